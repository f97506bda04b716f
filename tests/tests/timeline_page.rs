//! The timeline page (`GET /ui`) and the HTML report (`kmock::timeline`) in headless Chromium
//! (`kmock_tests::browser`): they load without a console error, draw a lane per connection,
//! list the checks' findings, show both OffsetCommits of an offset-commit regression on a
//! click, narrow the lanes by a filter, and the live page follows the journal stream.
//! Screenshots are kept under `target/tmp/timeline-screenshots`.
//!
//! The traffic is scripted with kmock-client, so every count is exact: a producer's batch, the
//! same batch again (a duplicate) and a batch past a gap (OUT_OF_ORDER_SEQUENCE_NUMBER); two
//! committers whose commits of `orders-0` go 12, then 11 (the regression); a fault rule that
//! delays the first OffsetCommit; a leader move.

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::idempotent::producer_batch;
use common::requests::{connect_to_coordinator, offset_commit};
use kmock::control::ControlApi;
use kmock::{ApiKey, Checks, Cluster, Entry, Report, Rule};
use kmock_client::{record, Client};
use kmock_tests::browser::{self, Steps};

const GROUP: &str = "shipping";
const TOPIC: &str = "orders";

/// Where screenshots and reports are kept: `target/tmp/timeline-screenshots`.
fn shots() -> Result<std::path::PathBuf> {
    browser::screenshot_dir(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// The scripted traffic, on five connections (a producer, and two committers each after its
/// own coordinator lookup).
async fn traffic(cluster: &Cluster) -> Result<()> {
    cluster.add_rule(
        Rule::on(ApiKey::OffsetCommit)
            .named("commit-latency")
            .nth(1)
            .delay(Duration::from_millis(3)),
    )?;
    let leader = cluster.leader(TOPIC, 0).context("no leader of orders-0")?;
    let producer =
        Client::connect_with_client_id(common::broker_addr(cluster, leader), "producer-p").await?;
    let batch = |first| producer_batch(TOPIC, 0, (7, 0), first, 5, None);
    for first in [0, 0, 10] {
        producer.send(batch(first), 8).await?;
    }
    let newer = connect_to_coordinator(cluster, GROUP, "committer-b").await?;
    let stale = connect_to_coordinator(cluster, GROUP, "committer-a").await?;
    newer
        .send(offset_commit(GROUP, -1, "", TOPIC, &[(0, 12), (1, 21)]), 8)
        .await?;
    stale
        .send(offset_commit(GROUP, -1, "", TOPIC, &[(0, 11)]), 8)
        .await?;
    let other = if cluster.leader(TOPIC, 1) == Some(1) {
        2
    } else {
        1
    };
    cluster.move_leader(TOPIC, 1, other)?;
    Ok(())
}

async fn scripted() -> Result<(Cluster, Report)> {
    let cluster = Cluster::builder()
        .brokers(2)
        .topic(TOPIC, 2)
        .start()
        .await?;
    traffic(&cluster).await?;
    // The last commit's answer was read by the client: its entry may still be completing.
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    ensure!(
        report.of_kind("offset-commit-regression").count() == 1,
        "the scripted traffic makes one regression:\n{report}"
    );
    Ok((cluster, report))
}

/// A request on a fresh connection, for the live page to pick up.
async fn late_comer(cluster: &Cluster) -> Result<()> {
    let leader = cluster.leader(TOPIC, 1).context("no leader of orders-1")?;
    let client =
        Client::connect_with_client_id(common::broker_addr(cluster, leader), "late-comer").await?;
    client
        .produce(TOPIC, 1, &[record(b"k", b"late")], -1)
        .await?;
    Ok(())
}

/// What every view of the scripted run must show: no console error, no failed request, the
/// five lanes, every finding of `report`, and the offsets of both commits once the
/// regression is clicked.
fn shows_the_run(view: &browser::View, report: &Report) -> Result<()> {
    ensure!(
        view.console_errors.is_empty() && view.requests_failed.is_empty(),
        "console errors {:?}, failed requests {:?}",
        view.console_errors,
        view.requests_failed
    );
    let loaded = &view.loaded;
    ensure!(loaded.lanes == 5, "lanes: {loaded:?}");
    ensure!(
        loaded.findings.len() == report.violations.len(),
        "findings listed {:?}, report:\n{report}",
        loaded.findings
    );
    ensure!(
        loaded.verdict.starts_with(&format!(
            "{} violation",
            report.count(kmock::check::Severity::Violation)
        )),
        "verdict {:?}",
        loaded.verdict
    );
    let series = &loaded.series;
    ensure!(
        series.contains(&format!(
            "commits {GROUP}/{TOPIC}-0 — 2 commits, 1 moved backwards"
        )) && series.contains(&format!(
            "sequences producer 7 {TOPIC}-0 — 3 batches, 1 retries, 1 duplicates, 1 \
             OUT_OF_ORDER_SEQUENCE_NUMBER"
        )),
        "per-partition series {series:?}"
    );
    let clicked = view.after_click.as_ref().context("no click")?;
    let detail = &clicked.detail;
    ensure!(
        detail.matches("OffsetCommit v8").count() == 2
            && detail.contains("orders-0 → offset 12")
            && detail.contains("orders-0 → offset 11")
            && detail.contains("moved backwards"),
        "details after the click:\n{detail}"
    );
    let filtered = view.after_filter.as_ref().context("no filter")?;
    ensure!(filtered.lanes == 2, "lanes of committer-*: {filtered:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_page_shows_the_lanes_and_the_regression_and_follows_the_stream() -> Result<()> {
    let (cluster, report) = scripted().await?;
    // A token with '+' and '&': the page takes it as typed after '#token=', only
    // percent-decoded (URLSearchParams read it as "s3c t").
    let token = "s3c+t&x%2B";
    let api = ControlApi::start_with_token(
        cluster.clone(),
        "127.0.0.1:0".parse()?,
        Some("s3c+t&x+".into()),
    )
    .await?;
    let steps = Steps {
        more: true,
        violation: Some("offset-commit-regression"),
        filter_client: Some("committer"),
    };
    let url = format!("{}/ui#token={token}", api.url());
    let view = browser::view(&url, &shots()?, "live", steps, late_comer(&cluster)).await?;
    shows_the_run(&view, &report)?;
    let live = view.after_live.as_ref().context("no live step")?;
    ensure!(
        live.lanes == view.loaded.lanes + 1 && live.entries > view.loaded.entries,
        "after a request on a new connection: {live:?}, before: {:?}",
        view.loaded
    );
    println!(
        "live page drawn in {} ms ({} entries)",
        view.ready_ms, view.loaded.entries
    );
    api.shutdown().await;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_is_one_file_that_shows_the_same_run_offline() -> Result<()> {
    let (cluster, report) = scripted().await?;
    let journal = cluster.journal();
    let path = shots()?.join("report.html");
    kmock::timeline::write_report_file(&path, "timeline test", journal.entries(), &report, 0)?;
    let steps = Steps {
        violation: Some("offset-commit-regression"),
        filter_client: Some("committer"),
        ..Steps::default()
    };
    let url = browser::file_url(&path)?;
    let view = browser::view(&url, &shots()?, "report", steps, async { Ok(()) }).await?;
    shows_the_run(&view, &report)?;
    ensure!(
        view.loaded.entries == journal.entries().len(),
        "{} entries shown of {}",
        view.loaded.entries,
        journal.entries().len()
    );
    cluster.shutdown().await;
    Ok(())
}

/// 100,000 entries: the scripted run's requests copied onto 200 connections of 2 brokers, a
/// millisecond apart, with the run's findings. The time to draw it is printed, not asserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_of_100_000_entries_opens_and_keeps_every_entry() -> Result<()> {
    const ENTRIES: usize = 100_000;
    let (cluster, mut report) = scripted().await?;
    let journal = cluster.journal();
    let requests: Vec<&Entry> = journal
        .entries()
        .iter()
        .filter(|e| e.operation.is_none())
        .collect();
    let entries: Vec<Entry> = (0..ENTRIES)
        .map(|i| {
            let mut e = requests[i % requests.len()].clone();
            let took = e.response.as_ref().map_or(0, |r| r.at_us - e.at_us);
            e.seq = i as u64 + 1;
            e.at_us = i as u64 * 1000;
            e.conn = (i % 200) as u64 + 1;
            e.broker = (i % 2) as i32 + 1;
            if let Some(r) = e.response.as_mut() {
                r.at_us = e.at_us + took;
                r.sending_us = None;
            }
            e
        })
        .collect();
    // The scripted run's findings, pointing at the first copies of their entries.
    for v in &mut report.violations {
        for r in &mut v.entries {
            let copy = requests
                .iter()
                .position(|e| e.seq == r.seq)
                .context("no copy")?;
            *r = kmock::check::EntryRef::from(&entries[copy]);
        }
    }
    let path = shots()?.join("report-100k.html");
    kmock::timeline::write_report_file(&path, "100,000 entries", &entries, &report, 0)?;
    let bytes = std::fs::metadata(&path)?.len();
    let view = browser::view(
        &browser::file_url(&path)?,
        &shots()?,
        "report-100k",
        Steps::default(),
        async { Ok(()) },
    )
    .await?;
    ensure!(
        view.console_errors.is_empty() && view.requests_failed.is_empty(),
        "console errors {:?}, failed requests {:?}",
        view.console_errors,
        view.requests_failed
    );
    ensure!(
        view.loaded.entries == ENTRIES
            && view.loaded.lanes == 200
            && view.loaded.findings.len() == report.violations.len(),
        "{:?}",
        view.loaded
    );
    println!(
        "a {ENTRIES}-entry report ({:.1} MiB) drawn in {} ms",
        bytes as f64 / (1 << 20) as f64,
        view.ready_ms
    );
    cluster.shutdown().await;
    Ok(())
}
