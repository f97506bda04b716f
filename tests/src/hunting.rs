//! Helpers of the `kmock hunt` tests (`tests/tests/hunt_*.rs`): a budget or seed from the
//! environment, and a fresh output directory.

use std::path::PathBuf;

use anyhow::Result;

/// The number in the environment variable `name`, else `default`.
///
/// # Panics
/// When the variable is set but is not a number.
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
        })
        .unwrap_or(default)
}

/// A fresh (absent) output directory for `test` under the temporary directory, named by the
/// test and the process.
///
/// # Errors
/// A directory left by an earlier run with the same process id cannot be removed.
pub fn out_dir(test: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("kmock-{test}-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(dir)
}
