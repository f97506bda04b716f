//! Helpers of the `kmock hunt` tests (`tests/tests/hunt_*.rs`): a budget or seed from the
//! environment, a fresh output directory, and a finding served by the `kmock` binary.

use std::path::PathBuf;

use anyhow::{Context, Result};

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

/// A running `kmock serve --print-json --config FILE` (the binary: [`crate::built_kmock`]),
/// killed when dropped.
#[derive(Debug)]
pub struct Served {
    child: tokio::process::Child,
    /// The bootstrap it printed, `host:port,…`.
    pub bootstrap: String,
    /// Its control API's URL.
    pub control: String,
}

impl Served {
    /// Starts `kmock serve --print-json --config scenario` and reads its start-up line.
    ///
    /// # Errors
    /// No `kmock` binary was built, it did not start, or printed no JSON line with a bootstrap
    /// and control URL within 30 s (a hang guard).
    pub async fn start(scenario: &std::path::Path) -> Result<Self> {
        use tokio::io::AsyncBufReadExt;
        let kmock = crate::built_kmock()?;
        let mut child = tokio::process::Command::new(&kmock)
            .args(["serve", "--print-json", "--config"])
            .arg(scenario)
            .env("RUST_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", kmock.display()))?;
        let stdout = child.stdout.take().context("kmock's stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .context("kmock serve printed nothing in 30 s")??
            .context("kmock serve exited before its start-up line")?;
        let json: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("kmock serve's start-up line {line:?}"))?;
        let field = |key: &str| {
            json[key]
                .as_str()
                .map(str::to_owned)
                .with_context(|| format!("no {key:?} in {json}"))
        };
        // Keeps reading (and dropping) what it prints later, so it never writes to a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            bootstrap: field("bootstrap")?,
            control: field("control")?,
            child,
        })
    }

    /// The control API's `POST /check` with `checks`: the kinds of the violations (not
    /// warnings) it answers, in its order.
    ///
    /// # Errors
    /// curl failed or the answer is not the check report.
    pub async fn violations(&self, checks: &[&str]) -> Result<Vec<String>> {
        let body = serde_json::json!({ "checks": checks }).to_string();
        let out = tokio::process::Command::new("curl")
            .args([
                "-sS",
                "-f",
                "-X",
                "POST",
                "-H",
                "Content-Type: application/json",
            ])
            .args(["-d", &body, &format!("{}/check", self.control)])
            .output()
            .await
            .context("running curl")?;
        anyhow::ensure!(
            out.status.success(),
            "POST /check: curl {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "POST /check answered {:?}",
                String::from_utf8_lossy(&out.stdout)
            )
        })?;
        let violations = report["violations"]
            .as_array()
            .with_context(|| format!("no violations list in {report}"))?;
        Ok(violations
            .iter()
            .filter(|v| v["severity"] == "violation")
            .filter_map(|v| v["kind"].as_str().map(str::to_owned))
            .collect())
    }

    /// Stops it (SIGKILL: its closing report is not needed; the control API gave the verdict).
    pub async fn stop(mut self) -> Result<()> {
        self.child.kill().await.context("stopping kmock serve")
    }
}
