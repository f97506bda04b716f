//! Ordering checks: verdicts over the journal (and, in process, the partition logs).
//!
//! Each check reads the journal in arrival order and returns violations; each violation names
//! its kind (a stable kebab-case name), its key, the journal entries involved and one sentence
//! a person can act on. [`CHECKS`] gives each its family and the requests it reads. Families:
//! - commit order ([`commits`]): `offset-commit-regression`, `commit-for-unassigned-partition`,
//!   `stale-generation-commit`;
//! - produce sequence ([`sequences`]): `sequence-gap`, `sequence-reorder`, `sequence-overlap`,
//!   `epoch-not-reset`, `epoch-regression`;
//! - produce order, for every producer: `reorder-on-retry` ([`retries`]), `inflight-exceeded`
//!   ([`inflight`]);
//! - log integrity ([`logs`] in process; `duplicate-write` and `lost-write` offline from the
//!   Produce answers, [`written`]): `duplicate-write`, `out-of-order-write`, `lost-write`;
//! - liveness ([`liveness`]): `stuck-client`;
//! - record identity ([`reuse`]): `sequence-reused`;
//! - transactions: `txn-offset-commit-regression` ([`txn_commits`]), `produce-after-end-txn`
//!   ([`produce_after_end`]), `end-txn-with-produce-in-flight` ([`end_txn_inflight`]),
//!   `read-committed-saw-aborted` ([`read_committed`]).

mod catalog;
pub mod commits;
pub mod end_txn_inflight;
pub mod inflight;
pub mod liveness;
pub mod logs;
pub mod produce_after_end;
pub mod read_committed;
mod rebalance;
pub mod retries;
pub mod reuse;
pub mod sequences;
mod shared;
pub mod txn_commits;
pub mod written;

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::journal::Entry;

pub use catalog::{CheckInfo, Family, ALL, CHECKS};
pub(crate) use shared::{
    applied_unanswered, ended_txn, error_name, sequence_ahead, SEQUENCE_SPACE,
};

/// Which commits `offset-commit-regression` compares with each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommitScope {
    /// Commits of the same member in the same generation (the default): a member moving its
    /// own committed offset backwards.
    #[default]
    Member,
    /// Every commit to the group, whoever sent it.
    Group,
}

/// Which checks to run, with their options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checks {
    selected: BTreeSet<String>,
    /// Scope of `offset-commit-regression`. Default [`CommitScope::Member`].
    pub commit_scope: CommitScope,
    /// `(group, topic, partition)` whose regressions are intentional resets, not reported.
    pub allowed_regressions: Vec<(String, String, i32)>,
    /// Produce requests a client may have outstanding on one connection
    /// (`inflight-exceeded`), for every producer; `None` (the default) holds only producers
    /// with a producer id, to [`inflight::IDEMPOTENT_MAX_IN_FLIGHT`] (5), Kafka's bound for
    /// idempotence: without one Kafka sets no bound (librdkafka's non-idempotent default is
    /// 1,000,000), so only the client's own configured limit can be checked.
    pub max_in_flight: Option<usize>,
    /// Retries a client may send after an error without taking the recovery step Kafka's
    /// protocol defines for it (`stuck-client`). Default [`DEFAULT_STUCK_AFTER`].
    pub stuck_after: usize,
    /// How soon after the error a client past [`Checks::stuck_after`] retries must have
    /// recovered (taken the step, or been answered without error) not to be named by
    /// `stuck-client`; a client that never recovers is named whatever this is. Default
    /// [`DEFAULT_STUCK_FOR`].
    pub stuck_for: Duration,
}

/// Default of [`Checks::stuck_after`]: 10 retries without the step. A correct client takes
/// the step before its first retry (librdkafka, the Java client and Sarama all look the
/// coordinator or the metadata up again on the error), so its count stays at 0 or 1 (a request
/// queued just as the answer came back); the bug this check exists for
/// (confluentinc/librdkafka#2791) sent hundreds.
pub const DEFAULT_STUCK_AFTER: usize = 10;

/// Default of [`Checks::stuck_for`]: 5 s. librdkafka answers a commit refused
/// UNKNOWN_MEMBER_ID by revoking its partitions through the application's poll before it
/// rejoins, and a consumer committing per message has been seen to send 116 refused commits in
/// the 144 ms that took; a client still retrying without the step seconds later is stuck.
pub const DEFAULT_STUCK_FOR: Duration = Duration::from_secs(5);

impl Default for Checks {
    fn default() -> Self {
        Self {
            selected: ALL.iter().map(|s| (*s).to_owned()).collect(),
            commit_scope: CommitScope::Member,
            allowed_regressions: Vec::new(),
            max_in_flight: None,
            stuck_after: DEFAULT_STUCK_AFTER,
            stuck_for: DEFAULT_STUCK_FOR,
        }
    }
}

impl Checks {
    /// Only the named checks.
    ///
    /// # Errors
    /// A sentence naming an unknown check and listing the known ones.
    pub fn only<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Result<Self, String> {
        let mut selected = BTreeSet::new();
        for name in names {
            let name = name.as_ref();
            if !ALL.contains(&name) {
                return Err(format!(
                    "unknown check {name:?}; the checks are {}",
                    ALL.join(", ")
                ));
            }
            selected.insert(name.to_owned());
        }
        Ok(Self {
            selected,
            ..Self::default()
        })
    }

    /// The checks a list names: every one for `["all"]`, else [`Checks::only`] (as a scenario's
    /// `checks:` and the control API's `POST /check` take them).
    ///
    /// # Errors
    /// A sentence naming an unknown check and listing the known ones.
    pub fn named<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        match names {
            [all] if all.as_ref() == "all" => Ok(Self::default()),
            names => Self::only(names),
        }
    }

    /// Compares commits within `scope` for `offset-commit-regression`.
    pub fn commit_scope(mut self, scope: CommitScope) -> Self {
        self.commit_scope = scope;
        self
    }

    /// Does not report regressions of this partition's committed offset (an intentional reset).
    pub fn allow_regression(mut self, group: &str, topic: &str, partition: i32) -> Self {
        self.allowed_regressions
            .push((group.to_owned(), topic.to_owned(), partition));
        self
    }

    /// The most Produce requests any producer may have outstanding on one connection (the
    /// client's `max.in.flight.requests.per.connection`, Sarama's `Net.MaxOpenRequests`), with
    /// or without a producer id.
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.max_in_flight = Some(requests);
        self
    }

    /// Reports `stuck-client` past `retries` retries without the recovery step.
    pub fn stuck_after(mut self, retries: usize) -> Self {
        self.stuck_after = retries;
        self
    }

    /// Reports `stuck-client` only for a client that had not recovered within `window` of the
    /// error (`Duration::ZERO`: however soon it recovered).
    pub fn stuck_for(mut self, window: Duration) -> Self {
        self.stuck_for = window;
        self
    }

    /// Whether `name` runs.
    pub fn runs(&self, name: &str) -> bool {
        self.selected.contains(name)
    }
}

/// A journal entry a violation points at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryRef {
    /// Arrival order.
    pub seq: u64,
    /// Connection id.
    pub conn: u64,
    /// Broker node id.
    pub broker: i32,
    /// Arrival time, µs since the cluster started.
    pub at_us: u64,
}

impl From<&Entry> for EntryRef {
    fn from(e: &Entry) -> Self {
        Self {
            seq: e.seq,
            conn: e.conn,
            broker: e.broker,
            at_us: e.at_us,
        }
    }
}

/// How bad a finding is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// A guarantee broke or the client is stuck: acknowledged data lost, duplicated or
    /// reordered, a committed offset moved backwards, a producer refused over and over without
    /// recovering. Fails [`Report::is_clean`] and makes `kmock check` exit 1.
    #[default]
    Violation,
    /// A protocol anomaly the client recovered from (e.g. a sequence gap answered
    /// OUT_OF_ORDER_SEQUENCE_NUMBER, then a new producer epoch and nothing lost). Reported and
    /// counted, never a failure.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Violation => "violation",
            Self::Warning => "warning",
        })
    }
}

/// One finding of a check: a broken invariant ([`Severity::Violation`]) or an anomaly the
/// client recovered from ([`Severity::Warning`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The check's name, e.g. `offset-commit-regression`.
    pub kind: String,
    /// How bad it is; `violation` when absent from older JSON.
    #[serde(default)]
    pub severity: Severity,
    /// What it is about, e.g. `billing/orders-0` or `producer 7 orders-2`.
    pub key: String,
    /// The entries involved, in arrival order.
    pub entries: Vec<EntryRef>,
    /// One sentence a person can act on.
    pub message: String,
}

/// The outcome of a run of checks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The checks that ran.
    pub checks: Vec<String>,
    /// Every finding, violations and warnings, by check then arrival order.
    pub violations: Vec<Violation>,
    /// Checks that could not run here, with why (e.g. log checks on an offline journal), and
    /// what the checks could not see: evicted entries, truncated request summaries.
    pub skipped: Vec<String>,
}

impl Report {
    /// Whether no finding of severity [`Severity::Violation`] was found (warnings allowed).
    pub fn is_clean(&self) -> bool {
        self.count(Severity::Violation) == 0
    }

    /// How many findings of `severity` the report holds.
    pub fn count(&self, severity: Severity) -> usize {
        self.violations
            .iter()
            .filter(|v| v.severity == severity)
            .count()
    }

    /// The findings of one check (`kind`), violations and warnings, in report order.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Violation> + 'a {
        self.violations.iter().filter(move |v| v.kind == kind)
    }

    /// The checks that did not run at all, each named at the head of a `skipped` line
    /// (`out-of-order-write: needs the partition logs …`).
    pub fn skipped_checks(&self) -> Vec<&str> {
        let skipped = |c: &&str| self.skipped.iter().any(|s| s.starts_with(&format!("{c}:")));
        self.checks
            .iter()
            .map(String::as_str)
            .filter(skipped)
            .collect()
    }

    /// Panics listing every finding, unless the report is clean (warnings allowed).
    ///
    /// # Panics
    /// When there is a violation.
    #[track_caller]
    pub fn assert_clean(&self) {
        assert!(
            self.is_clean(),
            "kmock checks found {} violation(s):\n{self}",
            self.count(Severity::Violation)
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Violations first, then warnings; each group in report order.
        for severity in [Severity::Violation, Severity::Warning] {
            for v in self.violations.iter().filter(|v| v.severity == severity) {
                let tag = match severity {
                    Severity::Violation => String::new(),
                    Severity::Warning => "warning: ".to_owned(),
                };
                writeln!(f, "{tag}{} [{}]: {}", v.kind, v.key, v.message)?;
            }
        }
        for s in &self.skipped {
            writeln!(f, "skipped: {s}")?;
        }
        let warnings = match self.count(Severity::Warning) {
            0 => String::new(),
            1 => ", 1 warning".to_owned(),
            n => format!(", {n} warnings"),
        };
        // A check that could not run here is named as skipped, not counted as clean.
        let (skipped, all) = (self.skipped_checks(), self.checks.len());
        let ran = match skipped.len() {
            0 => format!("{all} checks"),
            n => format!(
                "{} of {all} checks ({} skipped)",
                all - n,
                skipped.join(", ")
            ),
        };
        match (self.count(Severity::Violation), skipped.is_empty()) {
            (0, _) => writeln!(f, "clean: {ran}, no violation{warnings}"),
            (n, true) => writeln!(f, "{n} violation(s){warnings}"),
            (n, false) => writeln!(f, "{n} violation(s){warnings}; ran {ran}"),
        }
    }
}

/// Runs the journal checks of `checks` over `entries` (in arrival order), as `kmock check`
/// does offline. Without the partition logs, `duplicate-write` and `lost-write` read where
/// batches were written from the Produce answers ([`written`]), and `out-of-order-write` is
/// reported as skipped; in process, [`crate::Cluster::check`] runs all three on the logs.
pub fn run(entries: &[Entry], checks: &Checks) -> Report {
    let mut report = run_journal(entries, checks);
    // Without the logs, where batches were written is read from the Produce answers.
    for stretch in entries.split(is_reset) {
        report.violations.extend(written::check(stretch, checks));
    }
    if checks.runs("out-of-order-write") {
        report
            .skipped
            .push("out-of-order-write: needs the partition logs (run in process)".into());
    }
    report
}

fn is_reset(e: &Entry) -> bool {
    matches!(e.operation, Some(crate::journal::ClusterOperation::Reset))
}

/// The journal checks only, without noting the log checks as skipped. A reset
/// ([`crate::journal::ClusterOperation::Reset`]) starts the checks afresh: each stretch of
/// the journal between resets is checked on its own.
pub(crate) fn run_journal(entries: &[Entry], checks: &Checks) -> Report {
    let mut report = Report {
        checks: ALL
            .iter()
            .filter(|c| checks.runs(c))
            .map(|c| (*c).to_owned())
            .collect(),
        ..Report::default()
    };
    for stretch in entries.split(is_reset) {
        report.violations.extend(commits::check(stretch, checks));
        report.violations.extend(sequences::check(stretch, checks));
        report.violations.extend(liveness::check(stretch, checks));
        report.violations.extend(inflight::check(stretch, checks));
        report.violations.extend(retries::check(stretch, checks));
        report.violations.extend(reuse::check(stretch, checks));
        report
            .violations
            .extend(txn_commits::check(stretch, checks));
        report
            .violations
            .extend(produce_after_end::check(stretch, checks));
        report
            .violations
            .extend(end_txn_inflight::check(stretch, checks));
        report
            .violations
            .extend(read_committed::check(stretch, checks));
    }
    report.skipped.extend(truncated(entries, checks));
    report
}

/// A sentence naming the entries whose request summary was truncated
/// ([`crate::journal::summary::MAX_SUMMARY_ITEMS`]) among those the selected checks read:
/// the checks judged the partitions kept and never saw the others.
fn truncated(entries: &[Entry], checks: &Checks) -> Option<String> {
    let read = |e: &Entry| {
        CHECKS
            .iter()
            .filter(|c| checks.runs(c.name))
            .any(|c| c.reads.iter().any(|api| e.is(api)))
    };
    let cut: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.dropped() > 0 && read(e))
        .collect();
    if cut.is_empty() {
        return None;
    }
    let listed: Vec<String> = cut
        .iter()
        .take(5)
        .map(|e| {
            let api = e.api.as_deref().unwrap_or("?");
            format!("{api} seq {} dropped {} partitions", e.seq, e.dropped())
        })
        .collect();
    let more = match cut.len() {
        n if n > 5 => format!(" and {} more", n - 5),
        _ => String::new(),
    };
    Some(format!(
        "{} journal entries were truncated to their first {} partitions ({}{more}): the checks judged the partitions kept and did not see the dropped ones",
        cut.len(),
        crate::journal::summary::MAX_SUMMARY_ITEMS,
        listed.join(", "),
    ))
}

#[cfg(test)]
mod txn_tests;

#[cfg(test)]
pub(crate) mod testing;
