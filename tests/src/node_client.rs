//! The Node client programs of `fixtures/clients/node` (kafkajs), run with `node` as child
//! processes that print what they did as JSON lines ([`crate::client_program`]).
//!
//! Each kafkajs release a program can load is an npm alias in `fixtures/clients/node/
//! package.json` (e.g. `kafkajs-1-15` for `npm:kafkajs@1.15.0`), pinned with its integrity
//! hash in `package-lock.json`; `npm ci` in that directory installs them (`.ci/run` does).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{ensure, Result};
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
    ensure!(
        dir.join("node_modules").is_dir(),
        "the kafkajs releases are not installed: run `npm ci` in {} (Node.js and npm needed)",
        dir.display()
    );
    let mut command = Command::new("node");
    command.arg(program).args(args).current_dir(&dir);
    crate::client_program::run(command, limit).await
}
