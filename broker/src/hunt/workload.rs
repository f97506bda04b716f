//! A hunt's workload, the one thing a run does against its cluster: a program run as a child
//! process (`kmock hunt -- COMMAND`), or an async closure over the [`Cluster`] run in-process
//! (`kmock::hunt` from a Rust test). Both go through [`Workload::run`], which gives how it
//! ended ([`Exit`]); the rest of a run (cluster, faults, checks) is the same for both.

use std::ffi::OsString;
use std::future::Future;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

use crate::control::ControlApi;
use crate::error::Error;
use crate::Cluster;

/// Lines of the workload's output kept for a finding.
const TAIL_LINES: usize = 40;

/// The error an in-process workload fails with: any error (`anyhow::Error` converts into it).
pub type WorkloadError = Box<dyn std::error::Error + Send + Sync>;

/// An in-process workload's body: given the run's cluster, the future of its verdict.
type Body = dyn Fn(Cluster) -> BoxFuture<'static, Result<(), WorkloadError>> + Send + Sync;

/// The user's workload: what each run of a hunt does against its fresh cluster. Cheap to clone.
///
/// A run's verdict, beside the checks': the workload fails ([`super::WORKLOAD_FAILED`]) or is
/// still running at the hunt's deadline ([`super::WORKLOAD_HUNG`]; then killed or cancelled).
#[derive(Clone)]
pub enum Workload {
    /// A program and its arguments (`kmock hunt -- COMMAND ARGS…`), run as a child process
    /// leading a process group of its own, with `KAFKA_BOOTSTRAP_SERVERS` (the cluster's
    /// bootstrap, `host:port,…`) and `KMOCK_CONTROL` (the control API's URL) set. It fails
    /// with a failure exit status; its output's last lines go to the finding. At the deadline
    /// its whole process group is killed.
    Command {
        /// The program.
        program: OsString,
        /// Its arguments.
        args: Vec<OsString>,
    },
    /// An async closure over the run's [`Cluster`] (already started, the schedule's rules in
    /// force), run in-process as a task of its own: for hunts from Rust tests
    /// ([`Workload::in_process`]). It fails by returning an error (whose chain goes to the
    /// finding as its output) or by panicking; at the deadline its task is aborted (a client
    /// blocking a thread outside the runtime is not stopped by that: give it timeouts of its
    /// own).
    InProcess {
        /// What findings call it.
        name: String,
        /// The closure.
        body: Arc<Body>,
    },
}

impl Workload {
    /// A program and its arguments, as `kmock hunt -- PROGRAM ARGS…` runs them.
    pub fn command<A: Into<OsString>>(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = A>,
    ) -> Self {
        Self::Command {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    /// An in-process workload named `name`: `body` is called once a run with that run's
    /// cluster and its future run as a task; `Ok(())` is a success.
    ///
    /// ```no_run
    /// # async fn example() -> anyhow::Result<()> {
    /// use kmock::hunt::{self, Options, Workload};
    /// use kmock::Scenario;
    ///
    /// let base = Scenario::parse("brokers: 3\ntopics:\n  - { name: orders, partitions: 6 }\n")
    ///     .map_err(anyhow::Error::msg)?;
    /// let mut options = Options::new(base);
    /// (options.runs, options.seed) = (Some(10), 1);
    /// let workload = Workload::in_process("my producer", |cluster| async move {
    ///     // Run the client under test against `cluster.bootstrap()`; an error fails the run.
    ///     let bootstrap = cluster.bootstrap();
    ///     anyhow::ensure!(!bootstrap.is_empty(), "no bootstrap");
    ///     Ok(())
    /// });
    /// let summary = hunt::hunt(&options, &workload, &mut |line| println!("{line}")).await?;
    /// print!("{}", hunt::table(&summary));
    /// # Ok(()) }
    /// ```
    pub fn in_process<F, Fut, E>(name: impl Into<String>, body: F) -> Self
    where
        F: Fn(Cluster) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<WorkloadError>,
    {
        let body = move |cluster: Cluster| -> BoxFuture<'static, Result<(), WorkloadError>> {
            let run = body(cluster);
            Box::pin(async move { run.await.map_err(Into::into) })
        };
        Self::InProcess {
            name: name.into(),
            body: Arc::new(body),
        }
    }

    /// The workload in a finding's words: the command line, or `in-process: NAME`.
    pub fn describe(&self) -> String {
        match self {
            Self::Command { program, args } => std::iter::once(program)
                .chain(args)
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
            Self::InProcess { name, .. } => format!("in-process: {name}"),
        }
    }

    /// Runs the workload once against `cluster`, stopped past `deadline`.
    pub(super) async fn run(&self, cluster: &Cluster, deadline: Duration) -> Result<Ran, Error> {
        match self {
            Self::Command { program, args } => command(program, args, cluster, deadline).await,
            Self::InProcess { body, .. } => Ok(in_process(body.as_ref(), cluster, deadline).await),
        }
    }
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Workload({})", self.describe())
    }
}

/// How a workload's run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It succeeded: exit status 0, or `Ok(())`.
    Success,
    /// It failed: how (`exited with exit status: 3`, `returned an error`, `panicked`).
    Failed(String),
    /// It was still running at the deadline, and was stopped.
    Hung,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Success => f.write_str("succeeded"),
            Self::Failed(how) => f.write_str(how),
            Self::Hung => f.write_str("still running at the deadline, stopped"),
        }
    }
}

/// What running a workload gave.
pub(super) struct Ran {
    pub(super) exit: Exit,
    /// The last lines of its output (a command's stdout and stderr interleaved as read; an
    /// in-process workload's error chain or panic message).
    pub(super) output_tail: Vec<String>,
    pub(super) took: Duration,
}

/// A task aborted when dropped: a run cancelled (its hunt had enough findings) or stopped at
/// the deadline takes the tasks it started with it.
pub(super) struct AbortOnDrop<T>(pub(super) JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn in_process(body: &Body, cluster: &Cluster, deadline: Duration) -> Ran {
    let started = Instant::now();
    let mut task = AbortOnDrop(tokio::spawn(body(cluster.clone())));
    let (exit, output_tail) = match tokio::time::timeout(deadline, &mut task.0).await {
        Ok(Ok(Ok(()))) => (Exit::Success, Vec::new()),
        Ok(Ok(Err(e))) => {
            let mut chain = vec![format!("error: {e}")];
            let mut source = e.source();
            while let Some(cause) = source {
                chain.push(format!("caused by: {cause}"));
                source = cause.source();
            }
            (Exit::Failed("returned an error".into()), chain)
        }
        Ok(Err(joined)) => {
            let why = match joined.try_into_panic() {
                Ok(panic) => panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".into()),
                Err(e) => e.to_string(),
            };
            (
                Exit::Failed("panicked".into()),
                vec![format!("panic: {why}")],
            )
        }
        Err(_) => (Exit::Hung, Vec::new()),
    };
    let took = started.elapsed();
    // Aborts the task if it is still running (at the deadline).
    drop(task);
    Ran {
        exit,
        output_tail,
        took,
    }
}

async fn command(
    program: &OsString,
    args: &[OsString],
    cluster: &Cluster,
    deadline: Duration,
) -> Result<Ran, Error> {
    let control = ControlApi::start(
        cluster.clone(),
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
    )
    .await?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
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
            program.to_string_lossy()
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
    let exit = match tokio::time::timeout(deadline, child.wait()).await {
        Ok(Ok(status)) if status.success() => Exit::Success,
        Ok(Ok(status)) => Exit::Failed(format!("exited with {status}")),
        Ok(Err(e)) => Exit::Failed(format!("could not be waited for: {e}")),
        Err(_) => Exit::Hung,
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
    control.shutdown().await;
    Ok(Ran {
        exit,
        output_tail,
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
        if let Some(pid) = self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}
