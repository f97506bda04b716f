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
//!
//! A rule may be in force for a time window only (`after`, `until`), measured from when it
//! was added, or from the cluster's start ([`Rule::from_cluster_start`], as a scenario's rules
//! are), on the clock of the journal's `at_us`; outside it the rule neither matches nor counts.
//! A rule that could never fire (a matcher for a field its API lacks, an empty window) is
//! refused when added ([`matchers`]).

mod matchers;
mod rule;

use std::ops::{Bound, RangeBounds};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;

pub use rule::{Action, Rule, Times};

use crate::journal::Entry;
use rule::Count;

/// A rule in force, with its counters.
#[derive(Debug)]
struct Active {
    id: u64,
    name: String,
    rule: Rule,
    action: Action,
    rng: ChaCha8Rng,
    /// In force from this µs since the cluster started (the journal's `at_us`), included.
    from_at_us: Option<u64>,
    /// In force until this µs since the cluster started, excluded.
    until_at_us: Option<u64>,
    matched: u64,
    fired: u64,
    /// Seqs of the entries it fired on (for expectation messages).
    fired_on: Vec<u64>,
}

/// How often a rule has matched and fired, and when it is in force. Serialized as the control
/// API's `GET /rules` items: `{"id": 1, "name": "slow-commits", "matched": 4, "fired": 2}`,
/// with `"from_at_us"` and `"until_at_us"` for a rule with a time window.
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
    /// In force from this many µs after the cluster started (compare the journal's `at_us`);
    /// absent for a rule without `after`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_at_us: Option<u64>,
    /// In force until this many µs after the cluster started, excluded; absent for a rule
    /// without `until`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until_at_us: Option<u64>,
}

/// What kmock's handlers implement, as a rule is checked against it: given by the handlers
/// (`handlers::IMPLEMENTED`) to whoever makes [`Rules`] or checks a [`Rule`], so that the
/// rules, which say which fault fires, never import the handlers, which build the answers
/// (`handlers::fault_answers`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Implemented {
    /// The versions kmock implements for an API, `None` if it does not implement it.
    pub versions: fn(ApiKey) -> Option<VersionRange>,
    /// Whether an `error(code)` action can answer an API's requests.
    pub errors: fn(ApiKey) -> bool,
}

/// Every rule in force on a cluster.
#[derive(Debug)]
pub(crate) struct Rules {
    /// What the handlers implement, which a rule added is checked against.
    implemented: Implemented,
    /// The cluster's start, on the clock the journal's `at_us` reads.
    started: Instant,
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
    /// The topic matcher of the rule whose error fired, if it has one: a Metadata answer
    /// carries the error on that topic only.
    pub error_topic: Option<String>,
    pub delay_response: Duration,
    pub throttle: Option<Duration>,
    pub disconnect_after_apply: bool,
    pub silence: bool,
}

impl Rules {
    /// No rule yet; counts draw from generators seeded by `seed`, and rules added are checked
    /// against what the handlers `implemented`.
    pub fn new(seed: u64, implemented: Implemented) -> Self {
        Self {
            implemented,
            started: Instant::now(),
            seed,
            next_id: 1,
            active: Vec::new(),
            retired: Vec::new(),
        }
    }

    /// Adds a rule and returns its id; its time window starts now, or at the cluster's start
    /// for a rule [`Rule::from_cluster_start`].
    ///
    /// # Errors
    /// A sentence when the rule has no action, an error action for an API kmock cannot
    /// answer with an error, or it could never fire (`Rule::check_possible`).
    pub fn add(&mut self, rule: Rule) -> Result<u64, String> {
        rule.check_possible(self.implemented)?;
        let Some(action) = rule.action.clone() else {
            return Err(format!(
                "the rule on {:?} has no action (delay, disconnect, error, …)",
                rule.api
            ));
        };
        if matches!(action, Action::Error(_)) && !(self.implemented.errors)(rule.api) {
            return Err(format!(
                "kmock cannot inject errors into {:?} answers yet",
                rule.api
            ));
        }
        let origin = if rule.window.from_cluster_start {
            Duration::ZERO
        } else {
            self.started.elapsed()
        };
        // A window end past u64::MAX µs (half a million years) is never reached.
        let at_us =
            |d: Duration| u64::try_from(origin.saturating_add(d).as_micros()).unwrap_or(u64::MAX);
        let from_at_us = rule.window.after.map(at_us);
        let until_at_us = rule.window.until.map(at_us);
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
            from_at_us,
            until_at_us,
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
                from_at_us: a.from_at_us,
                until_at_us: a.until_at_us,
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
    /// the entry, and returns what to do. `reaches_group_load`: whether the request reaches the
    /// group coordinator's load check (see [`Rule::at_group_coordinator`]).
    pub fn apply(&mut self, entry: &mut Entry, reaches_group_load: bool) -> Fired {
        let mut fired = Fired::default();
        for rule in &mut self.active {
            let in_force = rule.from_at_us.is_none_or(|from| entry.at_us >= from)
                && rule.until_at_us.is_none_or(|until| entry.at_us < until)
                && (reaches_group_load || !rule.rule.at_group_coordinator);
            if !in_force || !rule.rule.matches(entry) {
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
                    if fired.error.is_none() {
                        fired.error = Some(*e);
                        fired.error_topic = rule.rule.topic.clone();
                    }
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
