//! Fault rules: matchers + count + action, applied to requests as they arrive.
//!
//! A rule is written like a sentence, in the spirit of wiremock's `Mock::given(…)`:
//!
//! ```
//! use std::time::Duration;
//! use kmock::{ApiKey, Rule};
//!
//! let slow_commits = Rule::on(ApiKey::OffsetCommit).group("billing").delay(Duration::from_millis(40));
//! let lost_answer = Rule::on(ApiKey::Produce).topic("orders").every(50).disconnect_after_apply();
//! # let _ = (slow_commits, lost_answer);
//! ```
//!
//! Matching reads the request's journal entry (API, version, broker, connection, client id and
//! the decoded topics, partitions, groups, transactional and producer ids), at the moment the
//! request arrives: counts (`nth`, `every`, …) number matching requests in arrival order, and
//! `probability` draws from a generator seeded by the cluster's seed and the rule's id, so the
//! same seed gives the same schedule for the same request sequence. Every rule that fires is
//! named in the entry's `faults`.

mod errors;

use std::ops::{Bound, RangeBounds};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub(crate) use errors::{error_response, supports_error, with_throttle};

use crate::journal::Entry;

/// What a rule does to a request it fires on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Hold the request this long before handling it (later requests on the connection wait,
    /// as on a broker with one request in flight per connection).
    Delay(Duration),
    /// Handle the request, then hold the answer this long.
    DelayResponse(Duration),
    /// Close the connection before handling: the request has no effect.
    Disconnect,
    /// Handle the request (append, commit), then close without answering.
    DisconnectAfterApply,
    /// Handle the request and never answer it; the connection stays open and later requests
    /// on it are answered.
    Silence,
    /// Answer with this error where Kafka would put it (top level, per topic or per
    /// partition), without handling the request.
    Error(ResponseError),
    /// Answer normally, with this throttle time (at versions without the field, the answer is
    /// held that long instead, as before KIP-219).
    Throttle(Duration),
}

impl Action {
    fn describe(&self) -> String {
        match self {
            Self::Delay(d) => format!("delay({d:?})"),
            Self::DelayResponse(d) => format!("delay_response({d:?})"),
            Self::Disconnect => "disconnect".into(),
            Self::DisconnectAfterApply => "disconnect_after_apply".into(),
            Self::Silence => "silence".into(),
            Self::Error(e) => format!("error({e:?})"),
            Self::Throttle(d) => format!("throttle({d:?})"),
        }
    }
}

/// Which of the matching requests a rule fires on.
#[derive(Debug, Clone, PartialEq)]
enum Count {
    /// Matches numbered within these bounds (1-based).
    Range(Bound<u64>, Bound<u64>),
    /// Every k-th match.
    Every(u64),
    /// Each match with this probability.
    Probability(f64),
}

/// A fault rule: matchers, a count and an action. Build with [`Rule::on`]; add with
/// [`crate::Cluster::add_rule`].
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a Rule does nothing until added with cluster.add_rule(rule)"]
pub struct Rule {
    name: Option<String>,
    api: ApiKey,
    /// Kafka's name of `api`, as the journal writes it (compared on every request).
    api_name: String,
    versions: Option<(i16, i16)>,
    broker: Option<i32>,
    connection: Option<u64>,
    client_id: Option<String>,
    topic: Option<String>,
    partition: Option<i32>,
    group: Option<String>,
    transactional_id: Option<String>,
    producer_id: Option<i64>,
    count: Count,
    action: Option<Action>,
    expect: Option<(Bound<u64>, Bound<u64>)>,
}

impl Rule {
    /// A rule for requests of `api`, firing on every match until a count says otherwise.
    /// It needs an action (`delay`, `disconnect`, …) before it is added.
    pub fn on(api: ApiKey) -> Self {
        Self {
            name: None,
            api,
            api_name: format!("{api:?}"),
            versions: None,
            broker: None,
            connection: None,
            client_id: None,
            topic: None,
            partition: None,
            group: None,
            transactional_id: None,
            producer_id: None,
            count: Count::Range(Bound::Unbounded, Bound::Unbounded),
            action: None,
            expect: None,
        }
    }

    /// Names the rule in journal entries and messages (default `<api>#<id>`).
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Only requests at these API versions.
    pub fn versions(mut self, versions: impl RangeBounds<i16>) -> Self {
        let min = match versions.start_bound() {
            Bound::Included(v) => *v,
            Bound::Excluded(v) => v.saturating_add(1),
            Bound::Unbounded => i16::MIN,
        };
        let max = match versions.end_bound() {
            Bound::Included(v) => *v,
            Bound::Excluded(v) => v.saturating_sub(1),
            Bound::Unbounded => i16::MAX,
        };
        self.versions = Some((min, max));
        self
    }

    /// Only requests to this broker (node id).
    pub fn broker(mut self, node_id: i32) -> Self {
        self.broker = Some(node_id);
        self
    }

    /// Only requests on this connection (the journal's `conn`).
    pub fn connection(mut self, conn: u64) -> Self {
        self.connection = Some(conn);
        self
    }

    /// Only requests whose header carries this client id.
    pub fn client_id(mut self, client_id: &str) -> Self {
        self.client_id = Some(client_id.to_owned());
        self
    }

    /// Only requests naming this topic (any of their topics).
    pub fn topic(mut self, topic: &str) -> Self {
        self.topic = Some(topic.to_owned());
        self
    }

    /// Only requests naming this partition index (of the `topic`, if one is set).
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Only requests about this consumer group.
    pub fn group(mut self, group_id: &str) -> Self {
        self.group = Some(group_id.to_owned());
        self
    }

    /// Only requests carrying this transactional id.
    pub fn transactional_id(mut self, transactional_id: &str) -> Self {
        self.transactional_id = Some(transactional_id.to_owned());
        self
    }

    /// Only Produce requests with a batch from this producer id.
    pub fn producer_id(mut self, producer_id: i64) -> Self {
        self.producer_id = Some(producer_id);
        self
    }

    /// Fires on the `n`-th matching request only (1-based).
    pub fn nth(self, n: u64) -> Self {
        self.times(n..=n)
    }

    /// Fires on the first `n` matching requests.
    pub fn first(self, n: u64) -> Self {
        self.times(1..=n)
    }

    /// Fires on the matching requests whose number (1-based) lies in `range`: `times(..)` on
    /// all, `times(3..)` from the third.
    pub fn times(mut self, range: impl RangeBounds<u64>) -> Self {
        self.count = Count::Range(range.start_bound().cloned(), range.end_bound().cloned());
        self
    }

    /// Fires on every `k`-th matching request (the k-th, 2k-th, …).
    ///
    /// # Panics
    /// If `k` is 0.
    pub fn every(mut self, k: u64) -> Self {
        assert!(k > 0, "every(0) would never fire");
        self.count = Count::Every(k);
        self
    }

    /// Fires on each matching request with probability `p`, from the cluster's seeded
    /// generator (same seed, same schedule).
    ///
    /// # Panics
    /// If `p` is not within 0.0..=1.0.
    pub fn probability(mut self, p: f64) -> Self {
        assert!(
            (0.0..=1.0).contains(&p),
            "a probability is within 0.0..=1.0, not {p}"
        );
        self.count = Count::Probability(p);
        self
    }

    /// Holds the request for `d` before handling it.
    pub fn delay(self, d: Duration) -> Self {
        self.action(Action::Delay(d))
    }

    /// Handles the request, then holds the answer for `d`.
    pub fn delay_response(self, d: Duration) -> Self {
        self.action(Action::DelayResponse(d))
    }

    /// Closes the connection before handling: the request has no effect.
    pub fn disconnect(self) -> Self {
        self.action(Action::Disconnect)
    }

    /// Handles the request, then closes the connection without answering.
    pub fn disconnect_after_apply(self) -> Self {
        self.action(Action::DisconnectAfterApply)
    }

    /// Handles the request and never answers it.
    pub fn silence(self) -> Self {
        self.action(Action::Silence)
    }

    /// Answers with `error` where Kafka would put it, without handling the request.
    pub fn error(self, error: ResponseError) -> Self {
        self.action(Action::Error(error))
    }

    /// Answers normally with throttle time `d`.
    pub fn throttle(self, d: Duration) -> Self {
        self.action(Action::Throttle(d))
    }

    /// Sets the action.
    pub fn action(mut self, action: Action) -> Self {
        self.action = Some(action);
        self
    }

    /// Expects the rule to fire exactly `n` times (`expect(1)`) or a number of times within a
    /// range (`expect(1..)`, `expect(..=3)`), checked by [`crate::Cluster::verify`] and when the
    /// cluster is dropped.
    pub fn expect(mut self, times: impl Into<Times>) -> Self {
        let times = times.into();
        self.expect = Some((times.0, times.1));
        self
    }

    fn matches(&self, entry: &Entry) -> bool {
        if !entry.is(&self.api_name) {
            return false;
        }
        let version_ok = self
            .versions
            .is_none_or(|(min, max)| entry.version.is_some_and(|v| (min..=max).contains(&v)));
        let partitions = entry.partitions();
        let partition_ok = match (&self.topic, self.partition) {
            (None, None) => true,
            (Some(t), None) => partitions.iter().any(|(pt, _)| pt == t),
            (None, Some(p)) => partitions.iter().any(|(_, pp)| *pp == p),
            (Some(t), Some(p)) => partitions.iter().any(|(pt, pp)| pt == t && *pp == p),
        };
        version_ok
            && partition_ok
            && self.broker.is_none_or(|b| entry.broker == b)
            && self.connection.is_none_or(|c| entry.conn == c)
            && self
                .client_id
                .as_ref()
                .is_none_or(|c| entry.client_id.as_ref() == Some(c))
            && self
                .group
                .as_ref()
                .is_none_or(|g| entry.groups().contains(&g.as_str()))
            && self
                .transactional_id
                .as_ref()
                .is_none_or(|t| entry.transactional_id() == Some(t.as_str()))
            && self
                .producer_id
                .is_none_or(|p| entry.producer_ids().contains(&p))
    }
}

/// How many times a rule is expected to fire: a number or any range of `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times(Bound<u64>, Bound<u64>);

impl From<u64> for Times {
    fn from(n: u64) -> Self {
        Self(Bound::Included(n), Bound::Included(n))
    }
}

impl From<(Bound<u64>, Bound<u64>)> for Times {
    fn from((start, end): (Bound<u64>, Bound<u64>)) -> Self {
        Self(start, end)
    }
}

macro_rules! times_from_range {
    ($($range:ty),*) => {$(
        impl From<$range> for Times {
            fn from(range: $range) -> Self {
                Self(range.start_bound().cloned(), range.end_bound().cloned())
            }
        }
    )*};
}

times_from_range!(
    std::ops::Range<u64>,
    std::ops::RangeInclusive<u64>,
    std::ops::RangeFrom<u64>,
    std::ops::RangeTo<u64>,
    std::ops::RangeToInclusive<u64>,
    std::ops::RangeFull
);

/// A rule in force, with its counters.
#[derive(Debug)]
struct Active {
    id: u64,
    name: String,
    rule: Rule,
    action: Action,
    rng: ChaCha8Rng,
    matched: u64,
    fired: u64,
    /// Seqs of the entries it fired on (for expectation messages).
    fired_on: Vec<u64>,
}

/// How often a rule has matched and fired. Serialized as the control API's `GET /rules` items:
/// `{"id": 1, "name": "slow-commits", "matched": 4, "fired": 2}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuleStats {
    /// The rule's id.
    pub id: u64,
    /// The rule's name.
    pub name: String,
    /// Matching requests so far.
    pub matched: u64,
    /// Requests it fired on so far.
    pub fired: u64,
}

/// Every rule in force on a cluster.
#[derive(Debug)]
pub(crate) struct Rules {
    seed: u64,
    next_id: u64,
    active: Vec<Active>,
    /// Removed rules with expectations, kept for `verify`.
    retired: Vec<Active>,
}

/// The actions that fired on one request, in the order they apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fired {
    pub delay: Duration,
    pub disconnect: bool,
    pub error: Option<ResponseError>,
    pub delay_response: Duration,
    pub throttle: Option<Duration>,
    pub disconnect_after_apply: bool,
    pub silence: bool,
}

impl Rules {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            next_id: 1,
            active: Vec::new(),
            retired: Vec::new(),
        }
    }

    /// Adds a rule and returns its id.
    ///
    /// # Errors
    /// A sentence when the rule has no action, or an error action for an API kmock cannot
    /// answer with an error.
    pub fn add(&mut self, rule: Rule) -> Result<u64, String> {
        let Some(action) = rule.action.clone() else {
            return Err(format!(
                "the rule on {:?} has no action (delay, disconnect, error, …)",
                rule.api
            ));
        };
        if matches!(action, Action::Error(_)) && !supports_error(rule.api) {
            return Err(format!(
                "kmock cannot inject errors into {:?} answers yet",
                rule.api
            ));
        }
        let id = self.next_id;
        self.next_id += 1;
        let name = rule
            .name
            .clone()
            .unwrap_or_else(|| format!("{:?}#{id}", rule.api));
        self.active.push(Active {
            id,
            name,
            rule,
            action,
            rng: ChaCha8Rng::seed_from_u64(self.seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            matched: 0,
            fired: 0,
            fired_on: Vec::new(),
        });
        Ok(id)
    }

    /// Whether any rule is in force.
    pub fn any(&self) -> bool {
        !self.active.is_empty()
    }

    /// Removes a rule; `false` if there was none with this id.
    pub fn remove(&mut self, id: u64) -> bool {
        let Some(i) = self.active.iter().position(|a| a.id == id) else {
            return false;
        };
        let removed = self.active.remove(i);
        if removed.rule.expect.is_some() {
            self.retired.push(removed);
        }
        true
    }

    /// Counters of a rule, in force or retired.
    pub fn stats(&self, id: u64) -> Option<RuleStats> {
        self.active
            .iter()
            .chain(&self.retired)
            .find(|a| a.id == id)
            .map(|a| RuleStats {
                id: a.id,
                name: a.name.clone(),
                matched: a.matched,
                fired: a.fired,
            })
    }

    /// Every rule in force, with counters.
    pub fn list(&self) -> Vec<RuleStats> {
        self.active
            .iter()
            .filter_map(|a| self.stats(a.id))
            .collect()
    }

    /// Applies every rule to a new entry: counts matches, decides which fire, names them in
    /// the entry, and returns what to do.
    pub fn apply(&mut self, entry: &mut Entry) -> Fired {
        let mut fired = Fired::default();
        for rule in &mut self.active {
            if !rule.rule.matches(entry) {
                continue;
            }
            rule.matched += 1;
            let n = rule.matched;
            let fires = match &rule.rule.count {
                Count::Range(start, end) => (*start, *end).contains(&n),
                Count::Every(k) => n % k == 0,
                Count::Probability(p) => {
                    let draw = (rule.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    draw < *p
                }
            };
            if !fires {
                continue;
            }
            rule.fired += 1;
            rule.fired_on.push(entry.seq);
            entry
                .faults
                .push(format!("{}: {}", rule.name, rule.action.describe()));
            match &rule.action {
                Action::Delay(d) => fired.delay = fired.delay.saturating_add(*d),
                Action::DelayResponse(d) => {
                    fired.delay_response = fired.delay_response.saturating_add(*d)
                }
                Action::Disconnect => fired.disconnect = true,
                Action::DisconnectAfterApply => fired.disconnect_after_apply = true,
                Action::Silence => fired.silence = true,
                Action::Error(e) => {
                    fired.error.get_or_insert(*e);
                }
                Action::Throttle(d) => {
                    fired.throttle = Some(fired.throttle.map_or(*d, |t| t.max(*d)))
                }
            }
        }
        fired
    }

    /// Checks every expectation; the message lists each unmet one with the entries it fired on.
    pub fn verify(&self) -> Result<(), String> {
        let unmet: Vec<String> = self
            .active
            .iter()
            .chain(&self.retired)
            .filter_map(|a| {
                let (start, end) = a.rule.expect?;
                if (start, end).contains(&a.fired) {
                    return None;
                }
                Some(format!(
                    "rule {} expected to fire {} times, fired {} times (matched {}) on entries {:?}",
                    a.name,
                    describe_range(start, end),
                    a.fired,
                    a.matched,
                    a.fired_on
                ))
            })
            .collect();
        if unmet.is_empty() {
            Ok(())
        } else {
            Err(unmet.join("\n"))
        }
    }
}

fn describe_range(start: Bound<u64>, end: Bound<u64>) -> String {
    let start = match start {
        Bound::Included(s) => s.to_string(),
        Bound::Excluded(s) => (s + 1).to_string(),
        Bound::Unbounded => "0".into(),
    };
    let end = match end {
        Bound::Included(e) => format!("..={e}"),
        Bound::Excluded(e) => format!("..{e}"),
        Bound::Unbounded => "..".into(),
    };
    format!("{start}{end}")
}
