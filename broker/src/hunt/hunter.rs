//! Runs of a hunt, each a task of its own on a fresh cluster, at most `--jobs` at once: the
//! search keeps up to that many schedules running ahead of the one it judges, and a shrink
//! judges a candidate's k re-runs side by side.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::{run, shrink, Fault, Options, Outcome, Workload};
use crate::check::Severity;
use crate::error::Error;

/// Starts a hunt's runs and keeps count of them; cheap to clone (the clones share the count
/// and the limit of runs at once).
#[derive(Clone)]
pub(super) struct Hunter {
    options: Arc<Options>,
    workload: Arc<Workload>,
    /// One permit a run: `options.jobs` of them.
    jobs: Arc<Semaphore>,
    total_runs: Arc<AtomicUsize>,
    warnings: Arc<AtomicUsize>,
}

impl Hunter {
    pub(super) fn new(options: &Options, workload: &Workload) -> Self {
        Self {
            options: Arc::new(options.clone()),
            workload: Arc::new(workload.clone()),
            jobs: Arc::new(Semaphore::new(options.jobs.max(1))),
            total_runs: Arc::default(),
            warnings: Arc::default(),
        }
    }

    pub(super) fn options(&self) -> &Options {
        &self.options
    }

    pub(super) fn workload(&self) -> &Workload {
        &self.workload
    }

    /// Runs of any kind finished so far.
    pub(super) fn total_runs(&self) -> usize {
        self.total_runs.load(Ordering::Relaxed)
    }

    /// Warnings over the runs finished so far.
    pub(super) fn warnings(&self) -> usize {
        self.warnings.load(Ordering::Relaxed)
    }

    /// Starts run `run` (its number gives the scenario's seed) with `faults` as a task of its
    /// own, once a job is free. Dropping the handle before it is done aborts the run.
    pub(super) fn start(&self, run: u64, faults: Vec<Fault>) -> Running {
        let hunter = self.clone();
        Running(tokio::spawn(async move {
            let _job = hunter
                .jobs
                .acquire()
                .await
                .map_err(|e| Error::Config(format!("hunt: {e}")))?;
            let scenario = hunter.options.scenario(run, &faults, Vec::new());
            let outcome = run::run(
                &scenario,
                &hunter.workload,
                &hunter.options.checks,
                hunter.options.deadline,
            )
            .await?;
            hunter.total_runs.fetch_add(1, Ordering::Relaxed);
            hunter
                .warnings
                .fetch_add(outcome.report.count(Severity::Warning), Ordering::Relaxed);
            Ok(outcome)
        }))
    }

    /// `n` runs of `faults` as run `run`, side by side (as many as the jobs allow), in order.
    pub(super) fn again(&self, run: u64, faults: &[Fault], n: usize) -> Vec<Running> {
        (0..n).map(|_| self.start(run, faults.to_vec())).collect()
    }
}

/// A run under way: a future of its outcome; dropped before it is done, it aborts the run.
pub(super) struct Running(JoinHandle<Result<Outcome, Error>>);

impl Future for Running {
    type Output = Result<Outcome, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|joined| {
            joined.unwrap_or_else(|e| Err(Error::Config(format!("a hunt run failed: {e}"))))
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The hunt's judge for shrinking: a candidate reproduces when `kind` shows in each of k runs.
/// With one job the runs go one after another and the first that does not reproduce ends the
/// judging; with more they go side by side (as many as the jobs allow), judged in order.
pub(super) struct Rerun<'a> {
    pub(super) hunter: &'a Hunter,
    pub(super) run: u64,
    pub(super) kind: &'a str,
    /// The last run that reproduced.
    pub(super) last: Option<Outcome>,
}

impl Rerun<'_> {
    /// Whether one re-run's result reproduces; keeps it as the last that did.
    fn judge(&mut self, ran: Result<Outcome, Error>) -> bool {
        match ran {
            Ok(outcome) if outcome.kinds().contains(self.kind) => {
                self.last = Some(outcome);
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::warn!("hunt: a shrinking run failed to start: {e}");
                false
            }
        }
    }
}

impl shrink::Judge<Fault> for Rerun<'_> {
    async fn reproduces(&mut self, faults: &[Fault]) -> bool {
        let k = self.hunter.options.reruns;
        if self.hunter.options.jobs <= 1 {
            for _ in 0..k {
                let ran = self.hunter.start(self.run, faults.to_vec()).await;
                if !self.judge(ran) {
                    return false;
                }
            }
            return true;
        }
        // Side by side; those still running when one does not reproduce are aborted (dropped).
        for running in self.hunter.again(self.run, faults, k) {
            let ran = running.await;
            if !self.judge(ran) {
                return false;
            }
        }
        true
    }
}
