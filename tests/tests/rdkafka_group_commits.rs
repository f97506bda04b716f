//! librdkafka consumers (the rdkafka crate) joining and leaving a group while they commit after
//! every message, under an eager assignor (`range`) and a cooperative one
//! (`cooperative-sticky`): a correct client never commits a partition it does not own, so
//! `commit-for-unassigned-partition`, which judges each commit by the protocol the group chose,
//! and every other check stay clean.
//!
//! Each run: a producer writes to the 6 partitions throughout; consumer-1 starts alone,
//! consumer-2 and consumer-3 join, consumer-2 leaves; after each change the test waits until the
//! members share out the partitions and each has consumed (and so committed) more. With
//! `KMOCK_REPEAT=N` each test runs N times.
//!
//! librdkafka under `cooperative-sticky` keeps committing while it rejoins, at its old
//! generation until its SyncGroup answer: Kafka refuses those (ILLEGAL_GENERATION), and each is
//! a `stale-generation-commit` warning (1,075–3,924 a run, 10 runs), never a violation.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use common::member::{describe, keep_producing, settle, Member};
use kmock::check::Severity;
use kmock::journal::RequestSummary;
use kmock::{Checks, Cluster};
use kmock_tests::repeat;
use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const GROUP: &str = "billing";

/// A member committing its position asynchronously after every message, with `strategy` as
/// its `partition.assignment.strategy`.
fn member(cluster: &Cluster, strategy: &str, name: &str) -> Result<Member> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", cluster.bootstrap())
        .set("group.id", GROUP)
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", strategy);
    Member::start(config, TOPIC, name, Some(1))
}

/// One run under `strategy`; returns the generations in which members' commits were stored.
async fn run(strategy: &str) -> Result<BTreeSet<i32>> {
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .start()
        .await?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("linger.ms", "0")
        .create()?;
    let stop = Arc::new(AtomicBool::new(false));
    let producing = tokio::spawn(keep_producing(producer, TOPIC, stop.clone()));

    let first = member(&cluster, strategy, "consumer-1")?;
    settle(&cluster, PARTITIONS, "consumer-1 alone", &[&first]).await?;
    let second = member(&cluster, strategy, "consumer-2")?;
    settle(
        &cluster,
        PARTITIONS,
        "consumer-2 joined",
        &[&first, &second],
    )
    .await?;
    let third = member(&cluster, strategy, "consumer-3")?;
    settle(
        &cluster,
        PARTITIONS,
        "consumer-3 joined",
        &[&first, &second, &third],
    )
    .await?;
    println!(
        "{strategy}, three members:\n{}",
        describe(&[&first, &second, &third])
    );
    let errors_2 = second.close();
    settle(&cluster, PARTITIONS, "consumer-2 left", &[&first, &third]).await?;
    let errors = [first.close(), errors_2, third.close()].concat();
    stop.store(true, Ordering::Relaxed);
    let produced = producing.await??;

    let journal = cluster.journal();
    let chosen: BTreeSet<String> = journal
        .api("JoinGroup")
        .filter(|e| {
            e.response
                .as_ref()
                .is_some_and(|r| r.error_codes.is_empty())
        })
        .filter_map(|e| match &e.request {
            Some(RequestSummary::JoinGroup(j)) => j.protocol_name.clone(),
            _ => None,
        })
        .collect();
    ensure!(
        chosen == BTreeSet::from([strategy.to_owned()]),
        "protocols the group chose: {chosen:?}, expected only {strategy:?}"
    );
    // Partitions of members' commits Kafka stored: (seq, generation).
    let stored: BTreeSet<(u64, i32)> = journal
        .offset_commits()
        .into_iter()
        .filter(|c| c.generation_id >= 0 && c.commit.error_code == Some(0))
        .map(|c| (c.entry.seq, c.generation_id))
        .collect();
    let generations: BTreeSet<i32> = stored.iter().map(|(_, g)| *g).collect();
    let commits = stored.len();
    let report = cluster.check(&Checks::default());
    // Counts only: a cooperative run has a thousand or more warnings (the full report is
    // printed when a violation fails the run).
    println!(
        "{strategy}: {produced} messages produced, {commits} commits stored in generations \
         {generations:?}, {} client errors; {} violations, {} warnings ({} \
         stale-generation-commit)",
        errors.len(),
        report.count(Severity::Violation),
        report.count(Severity::Warning),
        report.of_kind("stale-generation-commit").count()
    );
    for e in &errors {
        println!("  client error: {e}");
    }
    report.assert_clean();
    cluster.shutdown().await;
    Ok(generations)
}

/// Runs `strategy` [`repeat`] times; every run must commit in each settled generation.
async fn runs(strategy: &str) -> Result<()> {
    for i in 0..repeat() {
        let generations = run(strategy)
            .await
            .with_context(|| format!("{strategy}, run {}", i + 1))?;
        ensure!(
            generations.len() >= 4,
            "{strategy}, run {}: commits stored in generations {generations:?}, expected at \
             least the four settled ones",
            i + 1
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_members_joining_and_leaving_while_committing_are_clean() -> Result<()> {
    runs("range").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooperative_sticky_members_joining_and_leaving_while_committing_are_clean() -> Result<()> {
    runs("cooperative-sticky").await
}
