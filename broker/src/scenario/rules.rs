//! A scenario's fault rules (`rules:` items), and the same vocabulary as the control API's
//! `POST /rules` takes: [`RuleSpec`], read as YAML or JSON and built into a [`Rule`].

use std::ops::Bound;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};

use super::humantime_serde_opt;
use crate::codec::screaming;
use crate::faults::{Rule, Times};

/// A fault rule of a scenario, in the vocabulary of [`Rule`]. Serializes to the YAML it is
/// read from (unset fields left out), so that `kmock hunt` can write the rules it drew as a
/// scenario.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RuleSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub api: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactional_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nth: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<String>,
    /// In force from this long after the cluster started (a scenario's rule) or after the
    /// rule was added (`POST /rules`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub after: Option<Duration>,
    /// In force until this long after the same origin, excluded.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub until: Option<Duration>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub delay: Option<Duration>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub delay_response: Option<Duration>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub throttle: Option<Duration>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub disconnect: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub disconnect_after_apply: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub silence: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<serde_yaml::Value>,
}

/// `skip_serializing_if` for flags: a `false` action flag is left out.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_false(b: &bool) -> bool {
    !*b
}

/// Parses one fault rule written in the scenario's rule vocabulary (one item of `rules:`), as
/// YAML or JSON (`{"api": "Produce", "delay": "40ms"}`), and builds it.
///
/// ```
/// let rule = kmock::scenario::parse_rule("api: OffsetCommit\ngroup: billing\ndelay: 40ms\n")?;
/// assert_eq!(
///     rule,
///     kmock::Rule::on(kmock::ApiKey::OffsetCommit)
///         .group("billing")
///         .delay(std::time::Duration::from_millis(40))
/// );
/// # Ok::<(), String>(())
/// ```
///
/// # Errors
/// A sentence naming what is wrong: an unknown field (with its line and column), a bad
/// duration or range, an unknown API or error name, no action or more than one.
pub fn parse_rule(text: &str) -> Result<Rule, String> {
    if text.trim().is_empty() {
        return Err("no rule: the text is empty".into());
    }
    let spec: RuleSpec = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    spec.build()
}

/// The API Kafka names `name` (`Produce`, `OffsetCommit`, …), as its API key.
///
/// # Errors
/// A sentence naming the unknown API.
pub fn api_named(name: &str) -> Result<ApiKey, String> {
    ApiKey::iter()
        .find(|k| format!("{k:?}") == name)
        .ok_or_else(|| {
            format!("unknown API {name:?} (use Kafka's names: Produce, OffsetCommit, …)")
        })
}

impl RuleSpec {
    /// The rule this spec describes.
    ///
    /// # Errors
    /// A sentence naming what is wrong: a bad range, an unknown API or error name, a count or
    /// probability out of range, no action or more than one, or a rule that could never fire
    /// (a matcher for a field its API's requests lack, an empty `after`/`until` window).
    pub fn build(&self) -> Result<Rule, String> {
        let api = api_named(&self.api)?;
        let mut rule = Rule::on(api);
        if let Some(name) = &self.name {
            rule = rule.named(name);
        }
        if let Some(v) = &self.versions {
            let (start, end) = range::<i16>(v)?;
            rule = rule.versions((start, end));
        }
        if let Some(b) = self.broker {
            rule = rule.broker(b);
        }
        if let Some(c) = self.connection {
            rule = rule.connection(c);
        }
        if let Some(c) = &self.client_id {
            rule = rule.client_id(c);
        }
        if let Some(t) = &self.topic {
            rule = rule.topic(t);
        }
        if let Some(p) = self.partition {
            rule = rule.partition(p);
        }
        if let Some(g) = &self.group {
            rule = rule.group(g);
        }
        if let Some(t) = &self.transactional_id {
            rule = rule.transactional_id(t);
        }
        if let Some(p) = self.producer_id {
            rule = rule.producer_id(p);
        }
        let counts = [
            self.nth.is_some(),
            self.first.is_some(),
            self.every.is_some(),
            self.probability.is_some(),
            self.times.is_some(),
        ];
        if counts.iter().filter(|c| **c).count() > 1 {
            return Err("give at most one of nth, first, every, probability, times".into());
        }
        if let Some(n) = self.nth {
            if n == 0 {
                return Err("nth counts from 1".into());
            }
            rule = rule.nth(n);
        }
        if let Some(n) = self.first {
            rule = rule.first(n);
        }
        if let Some(k) = self.every {
            if k == 0 {
                return Err("every must be at least 1".into());
            }
            rule = rule.every(k);
        }
        if let Some(p) = self.probability {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("probability must be within 0.0..=1.0, not {p}"));
            }
            rule = rule.probability(p);
        }
        if let Some(t) = &self.times {
            rule = rule.times(range::<u64>(t)?);
        }
        if let Some(d) = self.after {
            rule = rule.after(d);
        }
        if let Some(d) = self.until {
            rule = rule.until(d);
        }
        let mut actions = Vec::new();
        if let Some(d) = self.delay {
            actions.push(rule.clone().delay(d));
        }
        if let Some(d) = self.delay_response {
            actions.push(rule.clone().delay_response(d));
        }
        if let Some(d) = self.throttle {
            actions.push(rule.clone().throttle(d));
        }
        if self.disconnect {
            actions.push(rule.clone().disconnect());
        }
        if self.disconnect_after_apply {
            actions.push(rule.clone().disconnect_after_apply());
        }
        if self.silence {
            actions.push(rule.clone().silence());
        }
        if let Some(e) = &self.error {
            if !crate::handlers::fault_answers::supports_error(api) {
                return Err(format!(
                    "kmock cannot inject errors into {api:?} answers yet"
                ));
            }
            actions.push(rule.clone().error(error_named(e)?));
        }
        let mut rule = match actions.len() {
            1 => actions.pop().expect("one action"),
            0 => return Err("no action: give one of delay, delay_response, throttle, disconnect, disconnect_after_apply, silence, error".into()),
            _ => return Err("more than one action: give exactly one".into()),
        };
        if let Some(expect) = &self.expect {
            let times: Times = match expect {
                serde_yaml::Value::Number(n) => n
                    .as_u64()
                    .ok_or_else(|| format!("expect {n} is not a count"))?
                    .into(),
                serde_yaml::Value::String(s) => range::<u64>(s)?.into(),
                other => {
                    return Err(format!(
                        "expect must be a number or a range like \"1..\", not {other:?}"
                    ))
                }
            };
            rule = rule.expect(times);
        }
        rule.check_possible(crate::handlers::IMPLEMENTED)?;
        Ok(rule)
    }
}

/// A Kafka error by its protocol name (`NOT_COORDINATOR`).
fn error_named(name: &str) -> Result<ResponseError, String> {
    (-1..=200)
        .filter_map(ResponseError::try_from_code)
        .find(|e| screaming(&format!("{e:?}")) == name)
        .ok_or_else(|| {
            format!("unknown Kafka error {name:?} (use the protocol's names, e.g. NOT_COORDINATOR)")
        })
}

/// A Rust-style range: `3..5`, `3..=5`, `3..`, `..=5`, `..`, or a single number.
fn range<T: std::str::FromStr + PartialOrd>(text: &str) -> Result<(Bound<T>, Bound<T>), String> {
    let bad = || format!("bad range {text:?}: write 3..5, 3..=5, 3.., ..=5 or a number");
    let parse = |s: &str| s.trim().parse::<T>().map_err(|_| bad());
    let Some((start, end)) = text.split_once("..") else {
        let n = parse(text)?;
        let m = parse(text)?;
        return Ok((Bound::Included(n), Bound::Included(m)));
    };
    let start = if start.trim().is_empty() {
        Bound::Unbounded
    } else {
        Bound::Included(parse(start)?)
    };
    let end = match end.strip_prefix('=') {
        Some(e) => Bound::Included(parse(e)?),
        None if end.trim().is_empty() => Bound::Unbounded,
        None => Bound::Excluded(parse(end)?),
    };
    if let (Bound::Included(a), Bound::Included(b) | Bound::Excluded(b)) = (&start, &end) {
        if a > b {
            return Err(format!(
                "range {text:?} is empty: its start is past its end"
            ));
        }
    }
    Ok((start, end))
}
