//! YAML scenarios: a cluster's shape, its fault rules and the checks to run at the end, in one
//! file for `kmock serve --config FILE`.
//!
//! ```yaml
//! brokers: 3                # default 1
//! port: 9092                # first broker's port; 0 picks free ones (default 9092)
//! host: 127.0.0.1           # default 127.0.0.1
//! seed: 7                   # seeds `probability` rules (default 0)
//! kafka_version: "2.4"      # behaviour to copy where versions differ (default: latest)
//! auto_create_topics: true  # default true
//! default_partitions: 1     # default 1
//! replication_factor: 3     # replicas of new topics' partitions (default 3, or fewer brokers)
//! journal_capacity: 1000000 # default 1,000,000 entries
//! connections_max_idle: 10m # Kafka's connections.max.idle.ms (default 10m)
//! max_connections: 1000     # Kafka's max.connections, per broker (default unlimited)
//! control_token: s3cret     # kmock serve's control API requires `Authorization: Bearer s3cret`
//! journal_max_bytes: 536870912 # estimated heap bytes kept (default 512 MiB)
//! topics:
//!   - { name: orders, partitions: 6 }
//! rules:
//!   - name: slow-commits    # optional
//!     api: OffsetCommit     # Kafka's API name
//!     group: billing        # matchers: versions ("3..=7"), broker, connection, client_id,
//!                           # topic, partition, group, transactional_id, producer_id
//!     every: 2              # count, at most one of: nth, first, every, probability, times ("3..")
//!     delay: 40ms           # action, exactly one of: delay, delay_response, throttle
//!                           # (durations: 40ms, 2s), disconnect, disconnect_after_apply,
//!                           # silence (true), error (a Kafka error name: NOT_COORDINATOR)
//!     expect: "1.."         # optional: a number or a range of firings
//! checks: [offset-commit-regression]  # run when kmock serve stops; "all" for every check
//! operations:               # cluster operations while serving (crate::schedule)
//!   - { at: 500ms, every: 1s, broker_down: 1 }
//!   - { at: 800ms, every: 1s, broker_up: 1 }
//! ```
//!
//! Unknown fields are refused; a bad file fails with the file, line and column, and what is
//! wrong.

use std::ops::Bound;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::check::{self, Checks};
use crate::cluster::{ClusterBuilder, KafkaVersion};
use crate::error::Error;
use crate::faults::{Rule, Times};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;

/// A scenario file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Brokers.
    pub brokers: Option<usize>,
    /// First broker's port.
    pub port: Option<u16>,
    /// Address to listen on and advertise.
    pub host: Option<std::net::IpAddr>,
    /// Seed of `probability` rules.
    pub seed: Option<u64>,
    /// Kafka version whose behaviour to copy.
    pub kafka_version: Option<String>,
    /// Whether Metadata creates unknown topics.
    pub auto_create_topics: Option<bool>,
    /// Partitions of an auto-created topic.
    pub default_partitions: Option<i32>,
    /// Replicas of each partition of a new topic.
    pub replication_factor: Option<usize>,
    /// Journal entries kept in memory.
    pub journal_capacity: Option<usize>,
    /// Kafka's `connections.max.idle.ms`.
    #[serde(default, with = "humantime_serde_opt")]
    pub connections_max_idle: Option<Duration>,
    /// Kafka's `max.connections`, per broker.
    pub max_connections: Option<usize>,
    /// The bearer token `kmock serve`'s control API requires.
    pub control_token: Option<String>,
    /// Estimated heap bytes of journal kept in memory.
    pub journal_max_bytes: Option<usize>,
    /// Topics created at start.
    #[serde(default)]
    pub topics: Vec<TopicSpec>,
    /// Fault rules in force from the start.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    /// Checks to run when the cluster stops.
    #[serde(default)]
    pub checks: Vec<String>,
    /// Cluster operations to run while serving ([`crate::schedule`]).
    #[serde(default)]
    pub operations: Vec<crate::schedule::OperationSpec>,
}

/// A topic of a scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicSpec {
    /// Name.
    pub name: String,
    /// Partitions.
    pub partitions: i32,
}

/// A fault rule of a scenario, in the vocabulary of [`Rule`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RuleSpec {
    pub name: Option<String>,
    pub api: String,
    pub versions: Option<String>,
    pub broker: Option<i32>,
    pub connection: Option<u64>,
    pub client_id: Option<String>,
    pub topic: Option<String>,
    pub partition: Option<i32>,
    pub group: Option<String>,
    pub transactional_id: Option<String>,
    pub producer_id: Option<i64>,
    pub nth: Option<u64>,
    pub first: Option<u64>,
    pub every: Option<u64>,
    pub probability: Option<f64>,
    pub times: Option<String>,
    #[serde(default, with = "humantime_serde_opt")]
    pub delay: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    pub delay_response: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    pub throttle: Option<Duration>,
    #[serde(default)]
    pub disconnect: bool,
    #[serde(default)]
    pub disconnect_after_apply: bool,
    #[serde(default)]
    pub silence: bool,
    pub error: Option<String>,
    pub expect: Option<serde_yaml::Value>,
}

/// Durations written as `40ms`, `2s`, `1m 30s`.
mod humantime_serde_opt {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map(Some).map_err(|e| {
            serde::de::Error::custom(format!(
                "bad duration {text:?} ({e}); write e.g. 40ms or 2s"
            ))
        })
    }
}

impl Scenario {
    /// Reads a scenario file.
    ///
    /// # Errors
    /// [`Error::Config`] naming the file, and the line, column and problem.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        Self::parse(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }

    /// Parses scenario YAML.
    ///
    /// # Errors
    /// A sentence with the line and column of the problem, or naming the bad rule.
    pub fn parse(text: &str) -> Result<Self, String> {
        let scenario: Self = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        if scenario.brokers == Some(0) {
            return Err("brokers must be at least 1".into());
        }
        scenario.rules().map_err(|e| e.to_string())?;
        scenario.checks().map_err(|e| e.to_string())?;
        for (i, op) in scenario.operations.iter().enumerate() {
            op.validate()
                .map_err(|e| format!("operation {} (at {:?}): {e}", i + 1, op.at))?;
        }
        if let Some(v) = &scenario.kafka_version {
            v.parse::<KafkaVersion>().map_err(|e| e.to_string())?;
        }
        Ok(scenario)
    }

    /// A cluster builder with the scenario's shape (unset fields keep the builder's defaults,
    /// but the port defaults to 9092 as for `kmock serve`).
    ///
    /// # Errors
    /// [`Error::Config`] for a bad `kafka_version` or `brokers: 0`.
    pub fn builder(&self) -> Result<ClusterBuilder, Error> {
        let mut b = crate::Cluster::builder().port(self.port.unwrap_or(9092));
        match self.brokers {
            Some(0) => return Err(Error::Config("brokers must be at least 1".into())),
            Some(n) => b = b.brokers(n),
            None => {}
        }
        if let Some(n) = self.replication_factor {
            b = b.replication_factor(n);
        }
        if let Some(host) = self.host {
            b = b.host(host);
        }
        if let Some(seed) = self.seed {
            b = b.seed(seed);
        }
        if let Some(v) = &self.kafka_version {
            b = b.kafka_version(v.parse()?);
        }
        if let Some(on) = self.auto_create_topics {
            b = b.auto_create_topics(on);
        }
        if let Some(n) = self.default_partitions {
            b = b.default_partitions(n);
        }
        if let Some(n) = self.journal_capacity {
            b = b.journal_capacity(n);
        }
        if let Some(idle) = self.connections_max_idle {
            b = b.connections_max_idle(Some(idle));
        }
        if let Some(max) = self.max_connections {
            b = b.max_connections(Some(max));
        }
        if let Some(n) = self.journal_max_bytes {
            b = b.journal_max_bytes(n);
        }
        for t in &self.topics {
            b = b.topic(&t.name, t.partitions);
        }
        Ok(b)
    }

    /// The rules, built.
    ///
    /// # Errors
    /// [`Error::Config`] naming the rule (by name or position) and what is wrong with it.
    pub fn rules(&self) -> Result<Vec<Rule>, Error> {
        self.rules
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                spec.build().map_err(|e| {
                    let which = spec.name.clone().unwrap_or_else(|| format!("#{}", i + 1));
                    Error::Config(format!("rule {which}: {e}"))
                })
            })
            .collect()
    }

    /// The checks to run at the end (none when the list is empty; `all` for every one).
    ///
    /// # Errors
    /// [`Error::Config`] for an unknown check name.
    pub fn checks(&self) -> Result<Option<Checks>, Error> {
        match self.checks.as_slice() {
            [] => Ok(None),
            names => Checks::named(names).map(Some).map_err(Error::Config),
        }
    }
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
    /// probability out of range, no action or more than one.
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
            if !crate::faults::supports_error(api) {
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

/// `NotCoordinator` → `NOT_COORDINATOR`.
pub(crate) fn screaming(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
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

/// The checks a scenario asks for, run on a finished cluster: the report, and whether every
/// rule expectation held.
pub fn finish(
    cluster: &crate::Cluster,
    checks: Option<&Checks>,
) -> (Option<check::Report>, Result<(), Error>) {
    (checks.map(|c| cluster.check(c)), cluster.verify())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_in_a_field_name_is_refused_with_its_line() {
        let err =
            Scenario::parse("brokers: 3\ntopics:\n  - name: t\n    partitons: 3\n").unwrap_err();
        assert!(err.contains("partitons") && err.contains("line 4"), "{err}");
    }

    #[test]
    fn a_rule_needs_exactly_one_action() {
        let none = Scenario::parse("rules:\n  - api: Produce\n").unwrap_err();
        assert!(none.contains("no action"), "{none}");
        let two = Scenario::parse("rules:\n  - api: Produce\n    silence: true\n    delay: 1s\n")
            .unwrap_err();
        assert!(two.contains("more than one action"), "{two}");
    }

    #[test]
    fn names_durations_errors_and_ranges_are_read() {
        let s = Scenario::parse(
            "rules:\n  - api: OffsetCommit\n    times: \"2..=3\"\n    error: NOT_COORDINATOR\n    expect: \"1..\"\n  - api: Fetch\n    delay: 40ms\n",
        )
        .unwrap();
        let rules = s.rules().unwrap();
        assert_eq!(
            rules[1],
            Rule::on(ApiKey::Fetch).delay(Duration::from_millis(40))
        );
        assert_eq!(
            rules[0],
            Rule::on(ApiKey::OffsetCommit)
                .times(2..=3)
                .error(ResponseError::NotCoordinator)
                .expect(1..)
        );
        assert!(
            Scenario::parse("rules:\n  - api: Produce\n    delay: fast\n")
                .unwrap_err()
                .contains("bad duration")
        );
        assert!(
            Scenario::parse("rules:\n  - api: Produse\n    silence: true\n")
                .unwrap_err()
                .contains("unknown API")
        );
        assert!(Scenario::parse("checks: [nope]\n")
            .unwrap_err()
            .contains("unknown check"));
    }
}
