//! One run of a hunt: a fresh cluster from a scenario, its rules in force and its operations
//! scheduled, the workload ([`Workload`]: a command or an in-process closure) with a hang
//! deadline, then the checks.

use std::collections::BTreeSet;
use std::time::Duration;

use super::workload::AbortOnDrop;
use super::{Exit, Workload};
use crate::check::{Checks, Report, Severity};
use crate::error::Error;
use crate::journal::JournalSnapshot;
use crate::scenario::Scenario;

/// The finding kind of a workload that failed (a failure exit status, an error, a panic).
pub const WORKLOAD_FAILED: &str = "workload-failed";
/// The finding kind of a workload still running at the hang deadline (then stopped).
pub const WORKLOAD_HUNG: &str = "workload-hung";

/// What one run gave.
#[derive(Debug)]
pub struct Outcome {
    /// The checks' report on the run's journal.
    pub report: Report,
    /// How the workload ended.
    pub exit: Exit,
    /// The last lines of its output (a command's stdout and stderr interleaved as read; an
    /// in-process workload's error chain or panic message).
    pub output_tail: Vec<String>,
    /// The run's journal.
    pub journal: JournalSnapshot,
    /// Each rule's name with how often it fired and matched.
    pub rules_fired: Vec<(String, u64, u64)>,
    /// How long the workload ran.
    pub took: Duration,
}

impl Outcome {
    /// The kinds of finding this run shows: the checks with a violation (not warnings), and
    /// [`WORKLOAD_FAILED`] or [`WORKLOAD_HUNG`].
    pub fn kinds(&self) -> BTreeSet<String> {
        let mut kinds: BTreeSet<String> = self
            .report
            .violations
            .iter()
            .filter(|v| v.severity == Severity::Violation)
            .map(|v| v.kind.clone())
            .collect();
        match self.exit {
            Exit::Success => {}
            Exit::Failed(_) => {
                kinds.insert(WORKLOAD_FAILED.into());
            }
            Exit::Hung => {
                kinds.insert(WORKLOAD_HUNG.into());
            }
        }
        kinds
    }

    /// The finding this run is about, if any: the first violation's check, else the
    /// workload's failure.
    pub fn primary_kind(&self) -> Option<String> {
        self.report
            .violations
            .iter()
            .find(|v| v.severity == Severity::Violation)
            .map(|v| v.kind.clone())
            .or_else(|| self.kinds().into_iter().next())
    }
}

/// Runs `workload` once against a fresh cluster built from `scenario` (its rules in force,
/// its operations scheduled; on free ports whatever its `port`), stops it past `deadline`,
/// and judges the journal with `checks`. Dropped before it is done (a cancelled run), it takes
/// the workload and the scheduled operations with it.
///
/// # Errors
/// The cluster or control API did not start, or the workload could not be started.
pub async fn run(
    scenario: &Scenario,
    workload: &Workload,
    checks: &Checks,
    deadline: Duration,
) -> Result<Outcome, Error> {
    let cluster = scenario.builder()?.port(0).start().await?;
    for rule in scenario.rules()? {
        cluster.add_rule(rule)?;
    }
    let operations = AbortOnDrop(tokio::spawn(crate::schedule::run(
        cluster.clone(),
        scenario.operations.clone(),
    )));
    let ran = workload.run(&cluster, deadline).await;
    drop(operations);
    cluster.shutdown().await;
    let ran = ran?;
    let report = cluster.check(checks);
    let rules_fired = cluster
        .rules()
        .into_iter()
        .map(|r| (r.name, r.fired, r.matched))
        .collect();
    Ok(Outcome {
        report,
        exit: ran.exit,
        output_tail: ran.output_tail,
        journal: cluster.journal(),
        rules_fired,
        took: ran.took,
    })
}
