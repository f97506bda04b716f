//! The timeline page in a real browser: `fixtures/ui/browse.mjs` drives Debian's headless
//! `chromium` through `playwright-core` (pinned in `fixtures/ui/package-lock.json`; no browser
//! is downloaded) and reports what the page shows as JSON.
//!
//! Needs `node` and `/usr/bin/chromium` (or `$KMOCK_CHROMIUM`); `.ci/run` installs both and
//! `npm ci`s `fixtures/ui`, and [`view`] does the `npm ci` when it was not run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use serde::Deserialize;
use tokio::process::Command;

/// What the page showed at one moment.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shown {
    /// Connection lanes drawn.
    pub lanes: usize,
    /// Journal entries the page holds.
    pub entries: usize,
    /// The verdict line at the top.
    pub verdict: String,
    /// The findings listed, one text each (kind, key, sentence).
    pub findings: Vec<String>,
    /// The text of the details panel.
    pub detail: String,
    /// The per-partition series offered, as labelled: `commits group/topic-p — 2 commits, 1
    /// moved backwards`, `sequences producer 7 topic-p — 3 batches, 1 retries, …`.
    pub series: Vec<String>,
}

/// What `browse.mjs` saw: the page as loaded, after a click on a finding, after a filter.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    /// Console errors, uncaught exceptions.
    pub console_errors: Vec<String>,
    /// Requests that failed (the page must need no network beyond its own API).
    pub requests_failed: Vec<String>,
    /// Milliseconds from navigation until the page said it was drawn (`body[data-ready]`).
    pub ready_ms: u64,
    /// As loaded.
    #[serde(flatten)]
    pub loaded: Shown,
    /// After the test sent more requests to a live page ([`Steps::more`]).
    pub after_live: Option<Shown>,
    /// After clicking the first finding of the kind asked for.
    pub after_click: Option<Shown>,
    /// After typing into the client id filter.
    pub after_filter: Option<Shown>,
}

/// What to do on the page besides loading it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Steps<'a> {
    /// Wait, once the page is drawn, for the entries the `more` future of [`view`] makes.
    pub more: bool,
    /// Click the first finding of this kind.
    pub violation: Option<&'a str>,
    /// Type this into the client id filter.
    pub filter_client: Option<&'a str>,
}

/// Where screenshots go: `timeline-screenshots` in `target_tmp` (an integration test's
/// `env!("CARGO_TARGET_TMPDIR")`, `<target>/tmp`), kept as test artifacts; made if missing.
///
/// # Errors
/// It cannot be made.
pub fn screenshot_dir(target_tmp: &Path) -> Result<PathBuf> {
    let dir = target_tmp.join("timeline-screenshots");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Opens `url` (an `http://` page or a `file://` report) in headless chromium, takes the
/// `steps`, and saves screenshots named `name-*.png` in `out`. With
/// [`Steps::more`], `more` runs once the page is drawn (to send requests the live page must
/// then show); otherwise it is not run.
///
/// # Errors
/// `npm ci` failed, node or chromium did not start, the page was not drawn within two minutes
/// (a hang guard only), `more` failed, or `browse.mjs` printed no JSON.
pub async fn view(
    url: &str,
    out: &Path,
    name: &str,
    steps: Steps<'_>,
    more: impl std::future::Future<Output = Result<()>>,
) -> Result<View> {
    let dir = crate::fixture("ui");
    crate::node_client::install(&dir)?;
    let mut command = Command::new("node");
    command
        .arg("browse.mjs")
        .arg(url)
        .arg(out)
        .args(["--name", name])
        .current_dir(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Its own process group, so the hang guard can end Chromium with node.
        .process_group(0)
        .kill_on_drop(true);
    if steps.more {
        command.arg("--await-more");
    }
    if let Some(kind) = steps.violation {
        command.args(["--violation", kind]);
    }
    if let Some(text) = steps.filter_client {
        command.args(["--filter-client", text]);
    }
    let mut child = command
        .spawn()
        .context("starting node (Node.js must be on PATH)")?;
    let group = child.id().context("node exited at once")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let stderr = child.stderr.take().context("no stderr")?;
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut { stderr }, &mut text).await;
        text
    });
    // A hang guard only: the page of a 100,000-entry journal is drawn in seconds.
    let run = async {
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
        let mut printed = Vec::new();
        let mut more = Some(more);
        while let Some(line) = lines.next_line().await? {
            if line == r#"{"ready":true}"# {
                if let Some(more) = more.take() {
                    more.await
                        .context("sending more requests to the live page")?;
                }
            }
            printed.push(line);
        }
        let status = child.wait().await?;
        anyhow::Ok((status, printed))
    };
    let Ok(ran) = tokio::time::timeout(Duration::from_secs(300), run).await else {
        // Node and the Chromium it started: the whole group, none left orphaned.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .status();
        anyhow::bail!("browse.mjs ran for 5 minutes (its process group {group} killed)");
    };
    let (status, printed) = ran?;
    let stderr = errors.await.unwrap_or_default();
    let stdout = printed.join("\n");
    ensure!(
        status.success(),
        "browse.mjs {url} failed ({status}):\n{stdout}\n{stderr}"
    );
    let line = printed.last().map_or("", String::as_str);
    serde_json::from_str(line).with_context(|| format!("browse.mjs printed {stdout:?}"))
}

/// `file://` address of a local file.
pub fn file_url(path: &Path) -> Result<String> {
    let path = path
        .canonicalize()
        .with_context(|| format!("{}", path.display()))?;
    Ok(format!("file://{}", path.display()))
}
