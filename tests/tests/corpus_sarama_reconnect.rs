//! Bug corpus: IBM/sarama#1430, "Idempotent producer broken on broker reconnect", against
//! `fixtures/scenarios/sarama-reconnect.yaml`: the only broker goes away for 3 s while an
//! idempotent producer sends a message every 10 ms, and comes back.
//!
//! Sarama v1.23.0 gives each message its sequence number when it enters the producer; the
//! messages that fail while the broker is away keep theirs, so after the reconnect the next
//! batch skips them. Kafka (and kmock) answer OUT_OF_ORDER_SEQUENCE_NUMBER, and the producer
//! never recovers: every later batch is refused the same way. The check names it:
//! `sequence-gap`, a violation whose sentence says the producer never recovered. Sarama v1.26.2
//! (IBM/sarama#1661) numbers a batch when it sends it and bumps its epoch after a failed
//! message: clean (warnings allowed). The outage is thirty times the producer's retry budget,
//! so the bug shows in every run, and one attempt per run is enough.
//!
//! `KMOCK_REPEAT=10` runs each version ten times (see `kmock_tests::repeat`).

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use kmock::check::Severity;
use kmock::journal::ClusterOperation;
use kmock::{Cluster, Entry, Report};
use kmock_tests::go_client::{self, Output};
use kmock_tests::{repeat, start_scenario};

const SCENARIO: &str = "sarama-reconnect.yaml";
const TOPIC: &str = "events";
/// 900 messages 10 ms apart: 9 s, around the outage from 3 s to 6 s (3 s of traffic first: a
/// margin for a producer slow to start on a loaded machine).
const MESSAGES: usize = 900;
const INTERVAL: &str = "10ms";
/// A hang guard only: the producer ends when every message is acknowledged or failed.
const PRODUCER_LIMIT: Duration = Duration::from_secs(90);
/// OUT_OF_ORDER_SEQUENCE_NUMBER.
const OUT_OF_ORDER: i16 = 45;

/// One run of `shopify-producer` built against Sarama `sarama`.
async fn sarama_run(sarama: &str) -> Result<(Cluster, Report, Output)> {
    let binary = go_client::build("shopify-producer", sarama)?;
    let (cluster, checks) = start_scenario(SCENARIO).await?;
    let bootstrap = cluster.bootstrap();
    let messages = MESSAGES.to_string();
    let args = [
        "-brokers",
        &bootstrap,
        "-topic",
        TOPIC,
        "-messages",
        &messages,
        "-interval",
        INTERVAL,
    ];
    let out = go_client::run(&binary, &args, PRODUCER_LIMIT).await?;
    let report = cluster.check(&checks);
    Ok((cluster, report, out))
}

/// The arrival seq of the broker's return, and of its going away.
fn outage(cluster: &Cluster) -> Result<(u64, u64)> {
    let journal = cluster.journal();
    let at = |down: bool| {
        journal
            .entries()
            .iter()
            .find(|e| match e.operation {
                Some(ClusterOperation::BrokerDown { .. }) => down,
                Some(ClusterOperation::BrokerUp { .. }) => !down,
                _ => false,
            })
            .map(|e| e.seq)
    };
    Ok((
        at(true).context("the broker never went down")?,
        at(false).context("the broker never came back")?,
    ))
}

/// Produce batches stored, and refused OUT_OF_ORDER_SEQUENCE_NUMBER, among the entries with
/// seq in `range`.
fn answers(cluster: &Cluster, range: std::ops::Range<u64>) -> (usize, usize) {
    let batches = cluster.journal().produce_batches();
    let within = |code: i16| {
        batches
            .iter()
            .filter(|b| range.contains(&b.entry.seq) && b.batch.error_code == Some(code))
            .count()
    };
    (within(0), within(OUT_OF_ORDER))
}

fn describe(e: &Entry) -> String {
    format!("seq {} conn {}", e.seq, e.conn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_23_0_is_refused_for_good_after_the_broker_comes_back() -> Result<()> {
    let runs = repeat();
    for run in 1..=runs {
        let (cluster, report, out) = sarama_run("v1.23.0").await?;
        let (down, up) = outage(&cluster)?;
        let (stored_before, _) = answers(&cluster, 0..down);
        let (stored_after, refused_after) = answers(&cluster, up..u64::MAX);
        ensure!(
            stored_before > 0,
            "run {run}: nothing was stored before the outage: the producer started too late\n{out}"
        );
        let gaps: Vec<_> = report
            .of_kind("sequence-gap")
            .filter(|v| v.severity == Severity::Violation)
            .collect();
        ensure!(
            !gaps.is_empty()
                && gaps[0].message.contains("never recovered")
                && stored_after == 0
                && refused_after > 0,
            "run {run}: Sarama v1.23.0 after the reconnect: {stored_after} batches stored, \
             {refused_after} refused OUT_OF_ORDER_SEQUENCE_NUMBER; report:\n{report}producer:\n{out}"
        );
        let done = out.last("done").context("no done event")?;
        println!(
            "Sarama v1.23.0 run {run}/{runs}: producer {:.2?}, {stored_before} batches stored \
             before the outage, {refused_after} refused OUT_OF_ORDER_SEQUENCE_NUMBER after it and \
             none stored; acked {} failed {}; client errors by text {}; {} violation(s), {} \
             warning(s); first: {} [{}]: {} (entries {:?})",
            out.took,
            done["acked"],
            done["failed"],
            out.last("errors")
                .map_or("{}".into(), |e| e["by_text"].to_string()),
            report.count(Severity::Violation),
            report.count(Severity::Warning),
            gaps[0].kind,
            gaps[0].key,
            gaps[0].message,
            gaps[0].entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_26_2_recovers_after_the_broker_comes_back() -> Result<()> {
    let runs = repeat();
    for run in 1..=runs {
        let (cluster, report, out) = sarama_run("v1.26.2").await?;
        let (down, up) = outage(&cluster)?;
        let (stored_before, _) = answers(&cluster, 0..down);
        let (stored_after, refused_after) = answers(&cluster, up..u64::MAX);
        let last = cluster.journal().api("Produce").last().map(describe);
        ensure!(
            report.is_clean() && stored_before > 0 && stored_after > 0,
            "run {run}: Sarama v1.26.2: {stored_before} batches stored before the outage, \
             {stored_after} after it ({refused_after} refused OUT_OF_ORDER_SEQUENCE_NUMBER), last \
             Produce {last:?}; report:\n{report}producer:\n{out}"
        );
        let done = out.last("done").context("no done event")?;
        println!(
            "Sarama v1.26.2 run {run}/{runs}: producer {:.2?}, {stored_before} batches stored \
             before the outage, {stored_after} after it, {refused_after} refused \
             OUT_OF_ORDER_SEQUENCE_NUMBER; acked {} failed {}; client errors by text {}; clean, \
             {} warning(s)",
            out.took,
            done["acked"],
            done["failed"],
            out.last("errors")
                .map_or("{}".into(), |e| e["by_text"].to_string()),
            report.count(Severity::Warning),
        );
    }
    Ok(())
}
