//! `kmock hunt`: search seeded fault schedules for ones that make a workload break an ordering
//! guarantee, and shrink each to a scenario that reproduces it.
//!
//! A hunt runs the workload ([`Workload`]: any program, or an async closure over the cluster
//! from a Rust test) once without faults and learns its
//! traffic from the journal ([`Traffic`]); then each run draws, from the seed, a schedule of
//! 1–3 faults over that traffic ([`space`]: delays with jitter, disconnects before and after
//! apply, error codes Kafka answers that API with, throttling, broker outages, leader and
//! coordinator moves, at times within the workload's span), runs the workload on a fresh
//! cluster with those faults and judges it: a violation of a check, a failure exit status or a
//! hang past the deadline is a finding; warnings are counted only. A finding's schedule is
//! shrunk ([`shrink`]) with re-runs as the judge (a candidate counts when the same kind shows in
//! k of k runs), then run k times more for its reproduction rate, and written as
//! `finding-N.yaml` (a scenario for `kmock serve --config`), `finding-N.txt` (the verdicts, the
//! workload's output, a journal excerpt), `finding-N.journal.jsonl` and `finding-N.html` (a
//! timeline report, [`crate::timeline`]).

mod finding;
mod hunter;
pub mod run;
pub mod shrink;
pub mod space;
mod traffic;
mod workload;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use finding::Finding;
pub use run::{Outcome, WORKLOAD_FAILED, WORKLOAD_HUNG};
pub use space::Fault;
pub use traffic::Traffic;
pub use workload::{Exit, Workload, WorkloadError};

use crate::check::Checks;
use crate::error::Error;
use crate::scenario::Scenario;
use hunter::{Hunter, Rerun, Running};

/// How to hunt.
#[derive(Debug, Clone)]
pub struct Options {
    /// The cluster's shape and topics (its rules and operations, if any, stay in force in
    /// every run).
    pub base: Scenario,
    /// Schedules to try after the fault-free run (default 20 when `time` is unset too).
    pub runs: Option<usize>,
    /// Wall-clock budget of the search; a shrink under way is finished.
    pub time: Option<Duration>,
    /// Seed of the schedules (and of each run's `probability` rules).
    pub seed: u64,
    /// The checks that judge each run.
    pub checks: Checks,
    /// The names of those checks, for the finding's scenario (`checks:`).
    pub check_names: Vec<String>,
    /// Where findings are written.
    pub out: PathBuf,
    /// A workload still running this long after its start is killed: a hang.
    pub deadline: Duration,
    /// k: a shrinking candidate counts when it reproduces in k of k runs; also the runs that
    /// measure the shrunk schedule's reproduction rate.
    pub reruns: usize,
    /// Whether errors no client can recover from may be drawn.
    pub fatal_errors: bool,
    /// Candidates the shrinker may judge per finding.
    pub shrink_tries: usize,
    /// Stop the search after this many findings.
    pub max_findings: Option<usize>,
    /// Runs at once, each on a cluster of its own (at least 1). The schedules are drawn from
    /// the seed and the run's number, and judged in the order of their numbers, so the
    /// schedules tried and the findings they give do not depend on it.
    pub jobs: usize,
}

impl Options {
    /// Options with the defaults of `kmock hunt`: every check, seed 0, `kmock-hunt` as the
    /// output directory, a 2-minute deadline, k = 2, no fatal errors, 30 shrinking candidates,
    /// one run at a time.
    pub fn new(base: Scenario) -> Self {
        Self {
            base,
            runs: None,
            time: None,
            seed: 0,
            checks: Checks::default(),
            check_names: Vec::new(),
            out: PathBuf::from("kmock-hunt"),
            deadline: Duration::from_secs(120),
            reruns: 2,
            fatal_errors: false,
            shrink_tries: 30,
            max_findings: None,
            jobs: 1,
        }
    }

    /// The scenario of run `run` with `faults`: the base, its seed replaced by the run's, the
    /// faults' rules and operations added, and `checks` to run.
    pub fn scenario(&self, run: u64, faults: &[Fault], checks: Vec<String>) -> Scenario {
        let mut scenario = self.base.clone();
        scenario.seed = Some(self.seed.wrapping_add(run));
        for fault in faults {
            match fault {
                Fault::Rule(rule) => scenario.rules.push(rule.clone()),
                Fault::Operations(ops) => scenario.operations.extend(ops.iter().cloned()),
            }
        }
        scenario.checks = checks;
        scenario
    }
}

/// What a hunt found.
#[derive(Debug)]
pub struct Summary {
    /// The workload's traffic, from the fault-free run.
    pub traffic: Traffic,
    /// Schedules tried (the fault-free run and shrinking re-runs not counted).
    pub runs: usize,
    /// Runs of any kind, all told.
    pub total_runs: usize,
    /// The findings, in the order found.
    pub findings: Vec<Finding>,
    /// Later runs that showed a kind already found, by kind.
    pub again: BTreeMap<String, usize>,
    /// Warnings over all runs (recorded, never a finding).
    pub warnings: usize,
    /// How long the hunt took.
    pub took: Duration,
}

/// Hunts: the fault-free run, then schedules until the budget is spent, shrinking and writing
/// each new kind of finding. `progress` receives a line after each run.
///
/// # Errors
/// The output directory cannot be written, the cluster does not start, the workload cannot be
/// started or sends no request in the fault-free run.
pub async fn hunt(
    options: &Options,
    workload: &Workload,
    progress: &mut dyn FnMut(&str),
) -> Result<Summary, Error> {
    let started = Instant::now();
    std::fs::create_dir_all(&options.out)
        .map_err(|e| Error::Config(format!("{}: {e}", options.out.display())))?;
    let hunter = Hunter::new(options, workload);
    let baseline = hunter.start(0, Vec::new()).await?;
    let traffic = Traffic::learn(baseline.journal.entries());
    if traffic.apis.is_empty() {
        return Err(Error::Config(format!(
            "the workload sent no request in its fault-free run (it {}); output:\n{}",
            baseline.exit,
            baseline.output_tail.join("\n")
        )));
    }
    progress(&format!("hunt: fault-free run: {traffic}"));
    let mut summary = Summary {
        traffic,
        runs: 0,
        total_runs: 0,
        findings: Vec::new(),
        again: BTreeMap::new(),
        warnings: 0,
        took: Duration::ZERO,
    };
    if let Some(kind) = baseline.primary_kind() {
        let finding = found(&hunter, 0, &kind, Vec::new(), baseline, &summary).await?;
        summary.findings.push(finding);
    }
    let budget = options.runs.or(options.time.is_none().then_some(20));
    let brokers = i32::try_from(options.base.brokers.unwrap_or(1)).unwrap_or(1);
    // Runs started ahead of the one judged next, in the order of their numbers.
    let mut ahead: VecDeque<(usize, Vec<Fault>, Running)> = VecDeque::new();
    let mut next = 1;
    loop {
        let enough = options
            .max_findings
            .is_some_and(|n| summary.findings.len() >= n);
        while !enough
            && ahead.len() < options.jobs.max(1)
            && budget.is_none_or(|n| next <= n)
            && options.time.is_none_or(|t| started.elapsed() < t)
        {
            let faults = space::draw(
                options.seed,
                next as u64,
                &summary.traffic,
                brokers,
                options.fatal_errors,
            );
            let running = hunter.start(next as u64, faults.clone());
            ahead.push_back((next, faults, running));
            next += 1;
        }
        // Enough findings: the runs started ahead are aborted (dropped).
        let Some((run, faults, running)) = ahead.pop_front().filter(|_| !enough) else {
            break;
        };
        let outcome = running.await?;
        summary.runs = run;
        let kind = outcome.primary_kind();
        let verdict = match &kind {
            None => "clean".to_owned(),
            Some(k) if summary.findings.iter().any(|f| &f.kind == k) => {
                *summary.again.entry(k.clone()).or_default() += 1;
                format!("{k} again")
            }
            Some(k) => format!("{k}: shrinking"),
        };
        progress(&format!(
            "hunt: run {run}{} ({} faults): {verdict}; {} findings, {:.0?} spent",
            budget.map(|n| format!("/{n}")).unwrap_or_default(),
            faults.len(),
            summary.findings.len(),
            started.elapsed()
        ));
        if let Some(kind) = kind.filter(|k| !summary.findings.iter().any(|f| &f.kind == k)) {
            let finding = found(&hunter, run as u64, &kind, faults, outcome, &summary).await?;
            progress(&format!(
                "hunt: finding {}: {} ({} → {} faults, reproduced {} of {})",
                finding.number,
                finding.kind,
                finding.before.len(),
                finding.after.len(),
                finding.reproduced.0,
                finding.reproduced.1
            ));
            summary.findings.push(finding);
        }
    }
    drop(ahead);
    summary.total_runs = hunter.total_runs();
    summary.warnings = hunter.warnings();
    summary.took = started.elapsed();
    Ok(summary)
}

/// Shrinks the schedule of a new finding (of run `run`, showing `kind`), measures its rate
/// and writes it.
async fn found(
    hunter: &Hunter,
    run: u64,
    kind: &str,
    faults: Vec<Fault>,
    outcome: Outcome,
    summary: &Summary,
) -> Result<Finding, Error> {
    let options = hunter.options();
    let mut judge = Rerun {
        hunter,
        run,
        kind,
        last: None,
    };
    let shrunk = if faults.is_empty() {
        shrink::Shrunk {
            faults: Vec::new(),
            tried: 0,
        }
    } else {
        shrink::shrink(
            faults.clone(),
            space::simpler,
            &mut judge,
            options.shrink_tries,
        )
        .await
    };
    // The reproduction rate of the shrunk schedule, and a reproducing run to show.
    let k = options.reruns;
    let mut hits = 0;
    let mut shown = None;
    for running in hunter.again(run, &shrunk.faults, k) {
        let again = running.await?;
        if again.kinds().contains(kind) {
            hits += 1;
            shown = Some(again);
        }
    }
    let shown = shown.or(judge.last).unwrap_or(outcome);
    let finding = Finding {
        number: summary.findings.len() + 1,
        kind: kind.to_owned(),
        run,
        before: faults,
        after: shrunk.faults,
        tried: shrunk.tried,
        reproduced: (hits, k),
        scenario: Scenario::default(),
        files: Vec::new(),
    };
    finding.write(options, hunter.workload(), &shown)
}

/// The closing table of a hunt: one line a finding (its kind, faults before → after
/// shrinking, reproduction rate, file), then the runs, warnings and time.
pub fn table(summary: &Summary) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<8} {:<32} {:>14} {:>10}  file",
        "finding", "kind", "faults", "reproduced"
    );
    for f in &summary.findings {
        let _ = writeln!(
            t,
            "{:<8} {:<32} {:>14} {:>10}  {}",
            f.number,
            f.kind,
            format!("{} → {}", f.before.len(), f.after.len()),
            format!("{}/{}", f.reproduced.0, f.reproduced.1),
            f.files
                .first()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
    }
    let again: Vec<String> = summary
        .again
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(
        t,
        "{} findings in {} schedules ({} runs in all, {:.1?}); {} warnings; seen again: {}",
        summary.findings.len(),
        summary.runs,
        summary.total_runs,
        summary.took,
        summary.warnings,
        if again.is_empty() {
            "none".to_owned()
        } else {
            again.join(", ")
        }
    );
    t
}
