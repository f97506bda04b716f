//! The Python client programs of `fixtures/clients/python`, run with a pinned confluent-kafka
//! in a virtualenv of its own: `venv.sh <version>` makes `venv/confluent-kafka-<version>/`
//! (git-ignored) from `requirements-<version>.txt`, pinned by hash, once, and `.ci/run` makes
//! them ahead of the tests. Programs print what they did as JSON lines and are run by
//! [`crate::client_program::run`].

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{ensure, Context, Result};
use tokio::process::Command;

/// One virtualenv made at a time in this process (tests run in parallel).
static MAKING: Mutex<()> = Mutex::new(());

/// The python of confluent-kafka `version`'s virtualenv (e.g. `"1.4.0"`), made now unless it
/// is there.
///
/// # Errors
/// No requirements file for that version, no Python 3.8, or pip failed (with its output).
pub fn python(version: &str) -> Result<PathBuf> {
    let _one_at_a_time = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let script = crate::fixture("clients/python/venv.sh");
    let out = std::process::Command::new(&script)
        .arg(version)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    ensure!(
        out.status.success(),
        "{} {version} failed ({}):\n{}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// A command running `fixtures/clients/python/<program>` with confluent-kafka `version` and
/// `args`, for [`crate::client_program::run`].
///
/// # Errors
/// As [`python`].
pub fn command(program: &str, version: &str, args: &[&str]) -> Result<Command> {
    let mut command = Command::new(python(version)?);
    command
        .arg(crate::fixture(&format!("clients/python/{program}")))
        .args(args);
    Ok(command)
}
