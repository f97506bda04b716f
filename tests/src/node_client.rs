//! The Node client programs of `fixtures/clients/node` (kafkajs), run with `node` as child
//! processes that print what they did as JSON lines ([`crate::client_program`]).
//!
//! Each kafkajs release a program can load is an npm alias in `fixtures/clients/node/
//! package.json` (e.g. `kafkajs-1-15` for `npm:kafkajs@1.15.0`), pinned with its integrity
//! hash in `package-lock.json`; `npm ci` in that directory installs them (`.ci/run` does, and
//! [`run`] does when they are missing).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use tokio::process::Command;

pub use crate::client_program::Output;

/// `fixtures/clients/node`.
fn node_dir() -> PathBuf {
    crate::fixture("clients/node")
}

/// Runs `node <program> args…` in `fixtures/clients/node` (`program` is a directory there,
/// e.g. `"concurrent-sends"`); kills it if it runs longer than `limit`.
///
/// # Errors
/// The kafkajs releases are not installed (`npm ci` was not run there), `node` could not
/// start, the program outlived `limit`, or it printed a line that is not a JSON object.
pub async fn run(program: &str, args: &[&str], limit: Duration) -> Result<Output> {
    let dir = node_dir();
    install(&dir)?;
    let mut command = Command::new("node");
    command.arg(program).args(args).current_dir(&dir);
    crate::client_program::run(command, limit).await
}

/// One `npm ci` at a time in this process.
static INSTALLING: Mutex<()> = Mutex::new(());

/// Runs `npm ci` in `dir` unless its `node_modules` is there: the pinned packages, from the npm
/// registry.
pub(crate) fn install(dir: &std::path::Path) -> Result<()> {
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    if dir.join("node_modules").is_dir() {
        return Ok(());
    }
    let out = std::process::Command::new("npm")
        .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .output()
        .context("running `npm ci` for the kafkajs releases: Node.js and npm must be on PATH")?;
    ensure!(
        out.status.success(),
        "`npm ci` in {} failed ({}):\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
