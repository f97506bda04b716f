//! The rule builder ([`Rule`]): matchers, a count, a time window, an action and an
//! expectation, and how a rule matches a journal entry.

use std::ops::{Bound, RangeBounds};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;

use super::matchers;
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
    pub(super) fn describe(&self) -> String {
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
pub(super) enum Count {
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
    pub(super) name: Option<String>,
    pub(super) api: ApiKey,
    /// Kafka's name of `api`, as the journal writes it (compared on every request).
    api_name: String,
    pub(super) versions: Option<(i16, i16)>,
    broker: Option<i32>,
    connection: Option<u64>,
    client_id: Option<String>,
    pub(super) topic: Option<String>,
    pub(super) partition: Option<i32>,
    pub(super) group: Option<String>,
    pub(super) transactional_id: Option<String>,
    pub(super) producer_id: Option<i64>,
    /// Only in force on requests that reach the group coordinator's load check
    /// ([`Self::at_group_coordinator`]).
    pub(super) at_group_coordinator: bool,
    pub(super) count: Count,
    pub(super) window: Window,
    pub(super) action: Option<Action>,
    pub(super) expect: Option<(Bound<u64>, Bound<u64>)>,
}

/// When a rule is in force: from `after` until `until`, both measured from `origin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Window {
    pub after: Option<Duration>,
    pub until: Option<Duration>,
    pub from_cluster_start: bool,
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
            at_group_coordinator: false,
            count: Count::Range(Bound::Unbounded, Bound::Unbounded),
            window: Window::default(),
            action: None,
            expect: None,
        }
    }

    /// Matches only requests that reach the group coordinator's load check: a request of a
    /// group API at the broker that coordinates one of its (non-empty) group ids; the others
    /// get their NOT_COORDINATOR or INVALID_GROUP_ID first, as Kafka's `CoordinatorRuntime`
    /// and `GroupCoordinatorService` answer them before the load
    /// ([`crate::ClusterBuilder::coordinator_load`]'s rules).
    pub(crate) fn at_group_coordinator(mut self) -> Self {
        self.at_group_coordinator = true;
        self
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

    /// In force only from `d` after the rule was added (after the cluster started, with
    /// [`Rule::from_cluster_start`]): an earlier request neither matches it nor counts toward
    /// `nth`, `every` or `times`. The instant judged is the request's arrival, on the clock the
    /// journal's `at_us` reads (Tokio's: a paused clock in a test moves it).
    pub fn after(mut self, d: Duration) -> Self {
        self.window.after = Some(d);
        self
    }

    /// In force only until `d` after the rule was added (after the cluster started, with
    /// [`Rule::from_cluster_start`]), that instant excluded: an outage from 1 s to 2.5 s is
    /// `.after(1 s).until(2.5 s)`. A later request neither matches it nor counts.
    pub fn until(mut self, d: Duration) -> Self {
        self.window.until = Some(d);
        self
    }

    /// Measures `after` and `until` from the cluster's start (the journal's `at_us` 0) rather
    /// than from when the rule is added: how a scenario's rules are read.
    pub fn from_cluster_start(mut self) -> Self {
        self.window.from_cluster_start = true;
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

    /// Refuses a rule that could never fire: one whose matchers name a field its API's
    /// requests do not carry (or that kmock does not read from them), versions kmock does not
    /// implement, an empty time window, a count that numbers no request (`first(0)`,
    /// `times(3..3)`) or a probability of 0.
    ///
    /// # Errors
    /// A sentence naming the matcher and the API.
    pub(crate) fn check_possible(&self, implemented: super::Implemented) -> Result<(), String> {
        matchers::check(self, implemented.versions)?;
        if let (Some(after), Some(until)) = (self.window.after, self.window.until) {
            if until <= after {
                return Err(format!(
                    "the rule on {:?} is in force after {after:?} until {until:?}: an empty \
                     window, it would never fire",
                    self.api
                ));
            }
        }
        if self.window.until == Some(Duration::ZERO) {
            return Err(format!(
                "the rule on {:?} is in force until 0s: it would never fire",
                self.api
            ));
        }
        match self.count {
            Count::Range(start, end) if !Self::numbers_any(start, end) => Err(format!(
                "the rule on {:?} fires on matching requests numbered {start:?} to {end:?}: \
                 no number (they count from 1), it would never fire",
                self.api
            )),
            Count::Probability(p) if p <= 0.0 => Err(format!(
                "the rule on {:?} fires with probability {p}: it would never fire",
                self.api
            )),
            _ => Ok(()),
        }
    }

    /// Whether the bounds hold any request number (1, 2, …).
    fn numbers_any(start: Bound<u64>, end: Bound<u64>) -> bool {
        let first = match start {
            Bound::Included(n) => n.max(1),
            Bound::Excluded(n) => n.saturating_add(1).max(1),
            Bound::Unbounded => 1,
        };
        match end {
            Bound::Included(n) => first <= n,
            Bound::Excluded(n) => first < n,
            Bound::Unbounded => start != Bound::Excluded(u64::MAX),
        }
    }

    pub(super) fn matches(&self, entry: &Entry) -> bool {
        if !entry.is(&self.api_name) {
            return false;
        }
        let version_ok = self
            .versions
            .is_none_or(|(min, max)| entry.version.is_some_and(|v| (min..=max).contains(&v)));
        let partition_ok = match (&self.topic, self.partition) {
            (None, None) => true,
            (Some(t), None) => matchers::names_topic(entry, t),
            (t, Some(p)) => entry
                .partitions()
                .iter()
                .any(|(pt, pp)| *pp == p && t.as_ref().is_none_or(|t| pt == t)),
        };
        version_ok
            && partition_ok
            && self.broker.is_none_or(|b| entry.broker == b)
            && self.connection.is_none_or(|c| entry.conn == c)
            && self
                .client_id
                .as_ref()
                .is_none_or(|c| entry.client_id.as_deref() == Some(c.as_str()))
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
                .is_none_or(|p| matchers::carries_producer_id(entry, p))
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
