//! Sarama's offset-commit race (v1.27.0–v1.43.2), caught on the wire. One consumer-group member
//! reads 8 pre-filled partitions and commits after every message, against
//! `fixtures/scenarios/commit-race.yaml` (jittered OffsetCommit latency). Sarama v1.43.2 builds
//! each OffsetCommit before it takes the connection to send it, so a stale commit can follow a
//! newer one: kmock's `offset-commit-regression` names both. v1.43.3, which builds and sends
//! under the connection's lock, and librdkafka come out clean.
//!
//! The timeline report of a v1.43.2 run, opened in headless Chromium, lists the findings and
//! shows both OffsetCommits of one on a click (the race is probabilistic: that test gives the
//! buggy release up to 3 runs to race at all; the page is then judged on the run that did).
//!
//! `KMOCK_REPEAT=10` runs each scenario ten times (see `kmock_tests::repeat`).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use kmock::journal::{JournalSnapshot, RequestSummary};
use kmock::{Checks, Cluster, Report, Violation};
use kmock_client::{record, Client};
use kmock_tests::go_client::{self, Output};
use kmock_tests::{repeat, rules_fired, start_scenario};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};

const SCENARIO: &str = "commit-race.yaml";
const TOPIC: &str = "orders";
const GROUP: &str = "shipping";
const PARTITIONS: i32 = 8;
const PER_PARTITION: i64 = 250;
const MESSAGES: i64 = PARTITIONS as i64 * PER_PARTITION;
/// How long one consumer may take before the run counts as stuck.
const CONSUMER_LIMIT: Duration = Duration::from_secs(60);

/// The scenario's cluster with [`PER_PARTITION`] messages in each partition of [`TOPIC`].
async fn prefilled() -> Result<(Cluster, Checks)> {
    let (cluster, checks) = start_scenario(SCENARIO).await?;
    for p in 0..PARTITIONS {
        let leader = cluster.leader(TOPIC, p).context("no leader")?;
        let broker = cluster.brokers().iter().find(|b| b.node_id == leader);
        let client = Client::connect(broker.context("no such broker")?.addr).await?;
        let values: Vec<String> = (0..PER_PARTITION).map(|i| i.to_string()).collect();
        let records: Vec<_> = values.iter().map(|v| record(b"", v.as_bytes())).collect();
        client.produce(TOPIC, p, &records, -1).await?;
    }
    Ok((cluster, checks))
}

/// One run of the Sarama consumer built at `binary`: the cluster, the verdict, the output.
async fn sarama_run(binary: &Path) -> Result<(Cluster, Report, Output)> {
    let (cluster, checks) = prefilled().await?;
    let messages = MESSAGES.to_string();
    let bootstrap = cluster.bootstrap();
    let args = [
        "-brokers",
        &bootstrap,
        "-topic",
        TOPIC,
        "-group",
        GROUP,
        "-messages",
        &messages,
    ];
    let out = go_client::run(binary, &args, CONSUMER_LIMIT).await?;
    ensure!(
        out.status.success(),
        "the consumer did not handle its {MESSAGES} messages without client errors:\n{out}"
    );
    let report = cluster.check(&checks);
    Ok((cluster, report, out))
}

/// The offset committed to [`TOPIC`]-`partition` by the OffsetCommit at `seq`.
fn committed(journal: &JournalSnapshot, seq: u64, partition: i32) -> Result<i64> {
    let entry = journal.entries().iter().find(|e| e.seq == seq);
    let Some(RequestSummary::OffsetCommit(commit)) = entry.and_then(|e| e.request.as_ref()) else {
        anyhow::bail!("journal entry {seq} is not an OffsetCommit: {entry:?}");
    };
    ensure!(commit.group_id == GROUP, "seq {seq} commits for {commit:?}");
    commit
        .partitions
        .iter()
        .find(|c| c.topic == TOPIC && c.partition == partition)
        .map(|c| c.offset)
        .with_context(|| format!("seq {seq} does not commit {TOPIC}-{partition}: {commit:?}"))
}

/// The violation names the group and partition, both journal entries, and both offsets as the
/// journal holds them, the stale one lower.
fn names_both_commits(journal: &JournalSnapshot, v: &Violation) -> Result<()> {
    let partition: i32 = v
        .key
        .strip_prefix(&format!("{GROUP}/{TOPIC}-"))
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("key {:?} is not {GROUP}/{TOPIC}-<partition>", v.key))?;
    let [newer, stale] = v.entries.as_slice() else {
        anyhow::bail!("{} entries, expected 2: {v:?}", v.entries.len());
    };
    let (high, low) = (
        committed(journal, newer.seq, partition)?,
        committed(journal, stale.seq, partition)?,
    );
    ensure!(
        low < high && newer.seq < stale.seq,
        "seq {} committed {high}, then seq {} committed {low}: not a regression",
        newer.seq,
        stale.seq
    );
    let expected = format!(
        "OffsetCommit seq {} (conn {}) set {} to {low} after seq {} (conn {}) had set it to \
         {high}: the committed offset moved backwards",
        stale.seq, stale.conn, v.key, newer.seq, newer.conn
    );
    ensure!(v.message == expected, "message {:?}", v.message);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_43_2_moves_committed_offsets_backwards_and_the_check_names_both_commits(
) -> Result<()> {
    let consumer = go_client::build("consumer", "v1.43.2")?;
    let runs = repeat();
    for run in 1..=runs {
        let (cluster, report, out) = sarama_run(&consumer).await?;
        let regressions: Vec<&Violation> = report
            .violations
            .iter()
            .filter(|v| v.kind == "offset-commit-regression")
            .collect();
        ensure!(
            !regressions.is_empty(),
            "run {run}: Sarama v1.43.2 committed {MESSAGES} messages without a regression \
             ({}); report:\n{report}consumer:\n{out}",
            rules_fired(&cluster)?
        );
        let journal = cluster.journal();
        for v in &regressions {
            names_both_commits(&journal, v).with_context(|| format!("run {run}: {v:?}"))?;
        }
        println!(
            "Sarama v1.43.2 run {run}/{runs}: consumer {:.2?}, {} offset-commit-regression ({}); \
             first:\n  {} [{}]: {}",
            out.took,
            regressions.len(),
            rules_fired(&cluster)?,
            regressions[0].kind,
            regressions[0].key,
            regressions[0].message
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_43_3_commits_in_order() -> Result<()> {
    let consumer = go_client::build("consumer", "v1.43.3")?;
    let runs = repeat();
    for run in 1..=runs {
        let (cluster, report, out) = sarama_run(&consumer).await?;
        let fired = rules_fired(&cluster)?;
        ensure!(
            report.is_clean(),
            "run {run}: Sarama v1.43.3 ({fired}):\n{report}consumer:\n{out}"
        );
        println!(
            "Sarama v1.43.3 run {run}/{runs}: consumer {:.2?}, clean ({fired})",
            out.took
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_commits_in_order_in_the_same_scenario() -> Result<()> {
    let runs = repeat();
    for run in 1..=runs {
        let (cluster, checks) = prefilled().await?;
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap())
            .set("group.id", GROUP)
            .set("client.id", "rdkafka-consumer")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .create()?;
        consumer.subscribe(&[TOPIC])?;
        let started = Instant::now();
        for handled in 0..MESSAGES {
            let message = tokio::time::timeout(CONSUMER_LIMIT, consumer.recv())
                .await
                .with_context(|| format!("run {run}: {handled} of {MESSAGES} messages read"))??;
            consumer.commit_message(&message, CommitMode::Async)?;
        }
        // Closing waits for the group to be left: not on a runtime thread.
        tokio::task::spawn_blocking(move || drop(consumer)).await?;
        let took = started.elapsed();
        let report = cluster.check(&checks);
        let fired = rules_fired(&cluster)?;
        ensure!(
            report.is_clean(),
            "run {run}: librdkafka ({fired}):\n{report}"
        );
        println!("librdkafka run {run}/{runs}: consumer {took:.2?}, clean ({fired})");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_43_2_race_in_the_timeline_report() -> Result<()> {
    use kmock_tests::browser::{self, Steps};
    let consumer = go_client::build("consumer", "v1.43.2")?;
    let mut raced = None;
    for attempt in 1..=3 {
        let (cluster, report, _) = sarama_run(&consumer).await?;
        if report.of_kind("offset-commit-regression").next().is_some() {
            raced = Some((cluster, report));
            break;
        }
        println!("attempt {attempt}: no regression this run");
    }
    let (cluster, report) = raced.context("Sarama v1.43.2 did not race in 3 runs")?;
    let journal = cluster.journal();
    let shots = browser::screenshot_dir(Path::new(env!("CARGO_TARGET_TMPDIR")))?;
    let path = shots.join("sarama-commit-race.html");
    kmock::timeline::write_report_file(&path, "Sarama v1.43.2", journal.entries(), &report, 0)?;
    let steps = Steps {
        violation: Some("offset-commit-regression"),
        ..Steps::default()
    };
    let url = browser::file_url(&path)?;
    let view = browser::view(&url, &shots, "sarama-commit-race", steps, async { Ok(()) }).await?;
    ensure!(
        view.console_errors.is_empty() && view.requests_failed.is_empty(),
        "console errors {:?}, failed requests {:?}",
        view.console_errors,
        view.requests_failed
    );
    let mut conns: Vec<u64> = journal
        .entries()
        .iter()
        .filter(|e| e.operation.is_none())
        .map(|e| e.conn)
        .collect();
    conns.sort_unstable();
    conns.dedup();
    let listed = report.violations.len().min(1000);
    ensure!(
        view.loaded.lanes == conns.len() && view.loaded.findings.len() == listed,
        "{} lanes for {} connections, {} findings listed of {}",
        view.loaded.lanes,
        conns.len(),
        view.loaded.findings.len(),
        report.violations.len()
    );
    let detail = &view.after_click.context("no click")?.detail;
    ensure!(
        detail.matches("OffsetCommit v").count() == 2 && detail.contains("moved backwards"),
        "details after the click:\n{detail}"
    );
    println!(
        "Sarama v1.43.2 report: {} entries, {} findings, drawn in {} ms",
        journal.entries().len(),
        report.violations.len(),
        view.ready_ms
    );
    Ok(())
}
