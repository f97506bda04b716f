//! Corpus case tulios/kafkajs#598: two concurrent `send()` calls of one idempotent kafkajs
//! producer (`idempotent: true, maxInFlightRequests: 1`) each take the partition's sequence
//! before either is answered, so kafkajs 1.15.0 sends two different one-record batches with
//! the same producer id, epoch and sequence 0. Kafka (and kmock) takes the second for a retry
//! of the first: it is answered NONE with the first's offset and its record is never stored,
//! while the client is told it was written. `sequence-reused` names it from the record digests.
//! kafkajs 2.0.0 numbers the batches apart and comes out clean.
//!
//! No fault is needed: the two sends race inside the client, and with 1.15.0 the second batch
//! reuses the sequence in every run (no retries allowed). The program is
//! `fixtures/clients/node/concurrent-sends` (`npm ci` there first, as `.ci/run` does).
//! `KMOCK_REPEAT=10` runs each release ten times (see `kmock_tests::repeat`).

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use kmock::check::Severity;
use kmock::{Checks, Cluster, Report};
use kmock_tests::{node_client, repeat};

const TOPIC: &str = "orders";
/// Generous hang guard for one run of the program (it takes about a second); it only catches
/// a hang, it measures nothing.
const PROGRAM_LIMIT: Duration = Duration::from_secs(60);
/// Hang guard for the journal to complete an answered entry.
const JOURNAL_LIMIT: Duration = Duration::from_secs(10);

/// Runs the program with kafkajs `release` (an alias of package.json) against a fresh cluster
/// and gives the check report, once both Produce entries are complete.
async fn run(release: &str) -> Result<Report> {
    let cluster = Cluster::builder().topic(TOPIC, 1).start().await?;
    let bootstrap = cluster.bootstrap();
    let args = [
        "--kafkajs",
        release,
        "--brokers",
        &bootstrap,
        "--topic",
        TOPIC,
    ];
    let output = node_client::run("concurrent-sends", &args, PROGRAM_LIMIT).await?;
    ensure!(
        output.status.success(),
        "{release} failed to send:\n{output}"
    );
    let sent = output
        .events
        .iter()
        .filter(|e| e["event"] == "sent")
        .count();
    ensure!(sent == 2, "{release}: both sends answered:\n{output}");
    // Each entry completes just after its answer is written: wait for both.
    let produced: Vec<u64> = cluster.journal().api("Produce").map(|e| e.seq).collect();
    ensure!(
        produced.len() == 2,
        "{release}: two Produce requests, got {}",
        produced.len()
    );
    for seq in produced {
        cluster
            .wait_for(|e| e.seq == seq && e.response.is_some(), JOURNAL_LIMIT)
            .await
            .with_context(|| format!("Produce seq {seq} completed"))?;
    }
    let report = cluster.check(&Checks::default());
    cluster.shutdown().await;
    Ok(report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafkajs_1_15_reuses_sequence_0_for_two_concurrent_sends() -> Result<()> {
    for run_number in 1..=repeat() {
        let report = run("kafkajs-1-15").await?;
        let reused: Vec<_> = report.of_kind("sequence-reused").collect();
        ensure!(
            reused.len() == 1 && report.count(Severity::Violation) == 1,
            "run {run_number}: exactly one violation, sequence-reused:\n{report}"
        );
        let v = reused[0];
        ensure!(
            v.key == format!("producer 0 {TOPIC}-0") && v.entries.len() == 2,
            "run {run_number}: the producer's partition and both batches named:\n{report}"
        );
        ensure!(
            v.message.contains("epoch 0 sequence 0 (1 record)")
                && v.message.contains("stored at offset 0")
                && v.message.contains("but its record differs"),
            "run {run_number}: {}",
            v.message
        );
        eprintln!("run {run_number}: {}", v.message);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafkajs_2_0_numbers_concurrent_sends_apart() -> Result<()> {
    for run_number in 1..=repeat() {
        let report = run("kafkajs-2-0").await?;
        ensure!(report.is_clean(), "run {run_number}:\n{report}");
    }
    Ok(())
}
