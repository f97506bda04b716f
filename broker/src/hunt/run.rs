//! One run of a hunt: a fresh cluster from a scenario, the workload as a child process with
//! the cluster's addresses in its environment, a hang deadline, then the checks.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::check::{Checks, Report, Severity};
use crate::control::ControlApi;
use crate::error::Error;
use crate::journal::JournalSnapshot;
use crate::scenario::Scenario;

/// Lines of the workload's output kept for a finding.
const TAIL_LINES: usize = 40;

/// The finding kind of a workload that exited with a failure status.
pub const WORKLOAD_FAILED: &str = "workload-failed";
/// The finding kind of a workload still running at the hang deadline (then killed).
pub const WORKLOAD_HUNG: &str = "workload-hung";

/// The user's workload: a program and its arguments, run with `KAFKA_BOOTSTRAP_SERVERS` (the
/// cluster's bootstrap, `host:port,…`) and `KMOCK_CONTROL` (the control API's URL) set.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// What one run gave.
#[derive(Debug)]
pub struct Outcome {
    /// The checks' report on the run's journal.
    pub report: Report,
    /// The workload's exit status (`None` when it was killed at the deadline).
    pub status: Option<std::process::ExitStatus>,
    /// Whether it outlived the deadline.
    pub hung: bool,
    /// The last lines of its stdout and stderr, interleaved as read.
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
        if self.hung {
            kinds.insert(WORKLOAD_HUNG.into());
        } else if !self.status.is_some_and(|s| s.success()) {
            kinds.insert(WORKLOAD_FAILED.into());
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
/// its operations scheduled; on free ports whatever its `port`), kills it (its whole process
/// group) past `deadline`, and judges the journal with `checks`.
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
    let operations = tokio::spawn(crate::schedule::run(
        cluster.clone(),
        scenario.operations.clone(),
    ));
    let control = ControlApi::start(
        cluster.clone(),
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
    )
    .await?;
    let mut command = tokio::process::Command::new(&workload.program);
    command
        .args(&workload.args)
        .env("KAFKA_BOOTSTRAP_SERVERS", cluster.bootstrap())
        .env("KMOCK_CONTROL", control.url())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let started = Instant::now();
    let mut child = command.spawn().map_err(|e| {
        Error::Config(format!(
            "cannot start the workload {}: {e}",
            workload.program.to_string_lossy()
        ))
    })?;
    // Killed when the run ends, or when an aborted run is dropped.
    let group = Group(child.id());
    let tail = Tail::default();
    let readers = [
        child
            .stdout
            .take()
            .map(|o| tokio::spawn(lines(o, tail.clone()))),
        child
            .stderr
            .take()
            .map(|e| tokio::spawn(lines(e, tail.clone()))),
    ];
    let waited = tokio::time::timeout(deadline, child.wait()).await;
    let (status, hung) = match waited {
        Ok(status) => (status.ok(), false),
        Err(_) => (None, true),
    };
    let took = started.elapsed();
    drop(group);
    let _ = child.kill().await;
    for reader in readers.into_iter().flatten() {
        // Output left after a kill ends with the pipes' close; a descendant keeping a pipe
        // open is not waited for.
        let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
    }
    let output_tail = tail
        .lock()
        .map(|t| t.iter().cloned().collect())
        .unwrap_or_default();
    operations.abort();
    control.shutdown().await;
    cluster.shutdown().await;
    let report = cluster.check(checks);
    let rules_fired = cluster
        .rules()
        .into_iter()
        .map(|r| (r.name, r.fired, r.matched))
        .collect();
    Ok(Outcome {
        report,
        status,
        hung,
        output_tail,
        journal: cluster.journal(),
        rules_fired,
        took,
    })
}

/// The last [`TAIL_LINES`] lines of a workload's output.
type Tail = std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>;

/// Appends every line of `pipe` to `tail`, forgetting the oldest past [`TAIL_LINES`].
async fn lines(mut pipe: impl AsyncRead + Unpin, tail: Tail) {
    let keep = |line: String| {
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            keep(String::from_utf8_lossy(&line[..i]).into_owned());
        }
    }
    if !buf.is_empty() {
        keep(String::from_utf8_lossy(&buf).into_owned());
    }
}

/// The workload's process group (it leads one: `process_group(0)`), killed when dropped so that
/// what a shell workload started goes with it. Through kill(1), as std has no call for a group.
struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
