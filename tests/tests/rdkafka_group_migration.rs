//! KIP-848's online migration with librdkafka (the rdkafka crate's bundled 2.12): a member with
//! the classic protocol (`group.protocol=classic`, JoinGroup and SyncGroup) consumes six
//! partitions alone; a second member joins the same group with `group.protocol=consumer`
//! (ConsumerGroupHeartbeat). Under Kafka 4's default `group.consumer.migration.policy`,
//! `bidirectional`, the heartbeat upgrades the live classic group to a consumer group, the
//! classic member staying in it with JoinGroup, SyncGroup and Heartbeat; the two share the
//! partitions. When the consumer-protocol member leaves, the group goes back to a classic group
//! and the classic member takes every partition again. Both commit after every message while a
//! producer writes throughout: every message is consumed, none is fetched again after the group
//! committed past it, the checks are clean, and the journal shows both conversions
//! (`GroupConverted` entries).
//!
//! The classic member runs once with librdkafka's default eager assignors (`range,roundrobin`:
//! it gives up everything before rejoining) and once with `cooperative-sticky` (it rejoins
//! still owning its partitions, and gives up only those the consumer group's target takes
//! away, as Kafka's reconciliation of a classic member asks).
//!
//! "Fetched again after a commit" is read from the journal in arrival order, as in
//! `rdkafka_consumer_protocol.rs`. With `KMOCK_REPEAT=N` each test runs N times.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::groups::fetched_below_commits;
use common::member::{describe, keep_producing, settle, wait_members, Member, SETTLE_TIMEOUT};
use kmock::check::Severity;
use kmock::journal::ClusterOperation;
use kmock::{Checks, Cluster};
use kmock_tests::repeat;
use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const GROUP: &str = "billing";

/// A member committing its position after every message, with `protocol` (`classic` or
/// `consumer`); the classic one heartbeats every 500 ms (librdkafka's default is 3 s) so that
/// it learns of a rebalance soon, and assigns with `strategy` (`None`: librdkafka's default).
fn member(cluster: &Cluster, name: &str, protocol: &str, strategy: Option<&str>) -> Result<Member> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", cluster.bootstrap())
        .set("group.id", GROUP)
        .set("group.protocol", protocol)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    if protocol == "classic" {
        config.set("heartbeat.interval.ms", "500");
    }
    if let Some(strategy) = strategy {
        config.set("partition.assignment.strategy", strategy);
    }
    Member::start(config, TOPIC, name, Some(1))
}

/// The group conversions the journal shows, in order: `(to, member id)`.
fn conversions(cluster: &Cluster) -> Vec<(String, String)> {
    cluster
        .journal()
        .entries()
        .iter()
        .filter_map(|e| match &e.operation {
            Some(ClusterOperation::GroupConverted {
                group_id,
                to,
                member_id,
            }) if group_id == GROUP => Some((to.clone(), member_id.clone())),
            _ => None,
        })
        .collect()
}

/// One run, the classic member assigning with `strategy`.
async fn run(strategy: Option<&str>) -> Result<()> {
    // Consumer-protocol heartbeats every 500 ms (Kafka's default is 5 s), as the classic ones.
    let cluster = Cluster::builder()
        .topic(TOPIC, PARTITIONS)
        .consumer_group_heartbeat_interval(Duration::from_millis(500))
        .start()
        .await?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("linger.ms", "0")
        .create()?;
    let stop = Arc::new(AtomicBool::new(false));
    let producing = tokio::spawn(keep_producing(producer, TOPIC, stop.clone()));

    let classic = member(&cluster, "classic-1", "classic", strategy)?;
    settle(&cluster, PARTITIONS, "classic-1 alone", &[&classic]).await?;
    ensure!(
        conversions(&cluster).is_empty(),
        "converted before any consumer-protocol member: {:?}",
        conversions(&cluster)
    );
    let modern = member(&cluster, "consumer-2", "consumer", None)?;
    settle(
        &cluster,
        PARTITIONS,
        "consumer-2 joined the classic group",
        &[&classic, &modern],
    )
    .await?;
    println!("both members:\n{}", describe(&[&classic, &modern]));
    let upgraded = conversions(&cluster);
    ensure!(
        upgraded.len() == 1 && upgraded[0].0 == "consumer",
        "the journal shows {upgraded:?}, not one upgrade to a consumer group"
    );
    let (consumed_2, errors_2) = modern.close_consumed();
    settle(&cluster, PARTITIONS, "consumer-2 left", &[&classic]).await?;
    let converted = conversions(&cluster);
    ensure!(
        converted.len() == 2 && converted[1].0 == "classic",
        "the journal shows {converted:?}, not an upgrade then a downgrade"
    );
    stop.store(true, Ordering::Relaxed);
    let produced = producing.await??;
    // Every message is consumed by someone: wait for the tail (a hang guard only).
    wait_members(
        "every message consumed",
        &[&classic],
        SETTLE_TIMEOUT,
        |_, consumed| {
            let all: BTreeSet<usize> = consumed
                .iter()
                .flatten()
                .chain(&consumed_2)
                .copied()
                .collect();
            (0..produced).all(|n| all.contains(&n))
        },
    )
    .await
    .context("messages lost")?;
    let errors = [classic.close(), errors_2].concat();

    let journal = cluster.journal();
    let joins = journal.api("JoinGroup").count();
    let heartbeats = journal.api("ConsumerGroupHeartbeat").count();
    ensure!(
        joins > 0 && heartbeats > 0,
        "{joins} JoinGroup and {heartbeats} ConsumerGroupHeartbeat: not both protocols"
    );
    let again: Vec<String> = ["classic", "consumer"]
        .iter()
        .flat_map(|c| fetched_below_commits(journal.entries(), GROUP, TOPIC, c))
        .map(|(_, _, line)| line)
        .collect();
    let report = cluster.check(&Checks::default());
    if !report.is_clean() || !again.is_empty() {
        let path = std::env::temp_dir().join(format!("migration-{}.jsonl", std::process::id()));
        journal.write_jsonl(std::fs::File::create(&path)?)?;
        println!("journal written to {}", path.display());
    }
    let commits = journal
        .offset_commits()
        .into_iter()
        .filter(|c| c.commit.error_code == Some(0))
        .count();
    println!(
        "{produced} messages produced, {commits} partition commits stored, {joins} JoinGroup, \
         {heartbeats} ConsumerGroupHeartbeat, {} client errors; {} violations, {} warnings",
        errors.len(),
        report.count(Severity::Violation),
        report.count(Severity::Warning),
    );
    for e in &errors {
        println!("  client error: {e}");
    }
    ensure!(
        again.is_empty(),
        "fetched again after a commit:\n{}",
        again.join("\n")
    );
    ensure!(report.is_clean(), "the checks found:\n{report}");
    cluster.shutdown().await;
    Ok(())
}

/// Runs [`repeat`] times.
async fn runs(strategy: Option<&str>) -> Result<()> {
    for i in 0..repeat() {
        let started = Instant::now();
        run(strategy)
            .await
            .with_context(|| format!("run {}", i + 1))?;
        println!("run {} took {:?}", i + 1, started.elapsed());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_group_upgraded_by_a_consumer_member_and_downgraded_when_it_leaves_loses_nothing(
) -> Result<()> {
    runs(None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_with_a_cooperative_classic_member() -> Result<()> {
    runs(Some("cooperative-sticky")).await
}
