//! Client programs in any language (Go, Python, Node, Java, …) run as child processes that
//! print what they did as JSON lines, one object per line with an `event` field. Build the
//! `tokio::process::Command` (interpreter, script, arguments, environment, directory) and hand
//! it to [`run`]; [`crate::go_client`] builds and runs the Go programs with it.

use std::fmt;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// What a client program did: its exit status and its JSON lines.
#[derive(Debug)]
pub struct Output {
    /// Exit status: 0 done without client errors, 1 client errors or a timeout, 2 could not
    /// start.
    pub status: ExitStatus,
    /// Every line it printed, parsed, each an object with an `event` field.
    pub events: Vec<Value>,
    /// What it wrote to stderr.
    pub stderr: String,
    /// How long it ran.
    pub took: Duration,
}

impl Output {
    /// The last event of one kind.
    pub fn last(&self, kind: &str) -> Option<&Value> {
        self.events.iter().rev().find(|e| e["event"] == kind)
    }
}

impl fmt::Display for Output {
    /// The status, the time, the last few events and stderr: for failure messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "exit {} after {:.2?}; last events:",
            self.status, self.took
        )?;
        for event in self.events.iter().rev().take(12).rev() {
            writeln!(f, "  {event}")?;
        }
        if !self.stderr.is_empty() {
            writeln!(f, "stderr:\n{}", self.stderr)?;
        }
        Ok(())
    }
}

/// Runs `command` (program, arguments, environment and directory as the caller set them);
/// kills it if it runs longer than `limit`.
///
/// # Errors
/// It could not start, outlived `limit`, or printed a line that is not a JSON object.
pub async fn run(mut command: Command, limit: Duration) -> Result<Output> {
    let started = Instant::now();
    let what = format!("{:?}", command.as_std());
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let mut out_pipe = child.stdout.take().context("no stdout pipe")?;
    let mut err_pipe = child.stderr.take().context("no stderr pipe")?;
    let finished = tokio::time::timeout(limit, async {
        let (read_out, read_err, status) = tokio::join!(
            out_pipe.read_to_string(&mut stdout),
            err_pipe.read_to_string(&mut stderr),
            child.wait()
        );
        read_out?;
        read_err?;
        status
    })
    .await;
    let status = match finished {
        Ok(status) => status?,
        Err(_) => {
            child.kill().await?;
            bail!("{what} still running after {limit:?}; output so far:\n{stdout}\n{stderr}");
        }
    };
    let events = stdout
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line)
                .ok()
                .filter(Value::is_object)
                .with_context(|| format!("not a JSON object line: {line:?}"))
        })
        .collect::<Result<_>>()?;
    Ok(Output {
        status,
        events,
        stderr,
        took: started.elapsed(),
    })
}
