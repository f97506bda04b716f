//! librdkafka (the rdkafka crate's bundled 2.12) with `group.protocol=consumer`: the KIP-848
//! consumer group protocol (ConsumerGroupHeartbeat, server-side assignment). Two members share
//! six partitions, a third joins, one leaves, each committing after every message while a
//! producer writes throughout: every message is consumed, none is fetched again after the
//! group committed past it, and the checks stay clean.
//!
//! The same again under faults: every 7th heartbeat's answer is lost (`disconnect_after_apply`:
//! applied, then the connection closed), and the group's coordinator moves to another broker
//! once the third member has settled. librdkafka shares the coordinator connection between
//! heartbeats and commits, so the close also loses OffsetCommit answers, and librdkafka 2.12
//! sends such a commit again after newer ones were stored: the committed offset moves backwards
//! (Kafka stores the late commit too: it carries the member's current epoch), and the next owner
//! of the partition fetches from there. That run is judged by the checks naming it: nothing
//! lost, every violation an `offset-commit-regression`, every fetch below a stored commit
//! preceded by a regression of its partition, and every regression (in both runs) explained by
//! one of librdkafka's known commit patterns (`common::commit_retries`): a refused commit sent
//! again, the commit built when a KIP-848 revocation began sent when it ends, or commits held
//! while the member had no coordinator (moved, or its connection cut) sent late.
//!
//! "Fetched again after a commit" is read from the journal in arrival order: a Fetch of a
//! partition below an offset the group had already stored for it would hand out messages a
//! commit said were done. With `KMOCK_REPEAT=N` the test runs N times.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::commit_retries::{
    is_held_commit_sent_after_reconnect, is_held_commit_sent_late, is_revocation_commit_sent_late,
    is_stale_commit_retry,
};
use common::groups::{consumer_protocol_only, fetched_below_commits};
use common::member::{describe, keep_producing, settle, wait_members, Member, SETTLE_TIMEOUT};
use kafka_protocol::messages::ApiKey;
use kmock::check::Severity;
use kmock::journal::RequestSummary;
use kmock::{Checks, Cluster, Entry, Report, Rule, Violation};
use kmock_tests::repeat;
use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const GROUP: &str = "billing";

/// A KIP-848 member committing its position asynchronously after every message.
fn member(cluster: &Cluster, name: &str) -> Result<Member> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", cluster.bootstrap())
        .set("group.id", GROUP)
        .set("group.protocol", "consumer")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    Member::start(config, TOPIC, name, Some(1))
}

/// Per partition: records stored, the last offset the group stored, and each member's last
/// fetch offset, for a failure's context.
fn positions(cluster: &Cluster) -> String {
    let journal = cluster.journal();
    let mut lines = Vec::new();
    for p in 0..PARTITIONS {
        let stored: i64 = journal
            .produce_batches()
            .iter()
            .filter(|b| b.batch.partition == p && b.batch.error_code == Some(0))
            .map(|b| i64::from(b.batch.record_count))
            .sum();
        let committed = journal
            .offset_commits()
            .into_iter()
            .filter(|c| c.commit.partition == p && c.commit.error_code == Some(0))
            .map(|c| (c.entry.seq, c.member_id.clone(), c.commit.offset))
            .last();
        let mut fetched: HashMap<String, (u64, i64)> = HashMap::new();
        for e in journal.api("Fetch") {
            if let Some(RequestSummary::Fetch(f)) = &e.request {
                for fp in f.partitions.iter().filter(|fp| fp.partition == p) {
                    fetched.insert(
                        e.client_id.as_deref().unwrap_or_default().to_owned(),
                        (e.seq, fp.fetch_offset),
                    );
                }
            }
        }
        lines.push(format!(
            "  {TOPIC}-{p}: {stored} stored, last commit {committed:?}, last fetches {fetched:?}"
        ));
    }
    lines.join("\n")
}

/// The first heartbeats of the journal as JSON, for a failure's context.
fn heartbeats(cluster: &Cluster) -> String {
    let journal = cluster.journal();
    let lines: Vec<String> = journal
        .api("ConsumerGroupHeartbeat")
        .take(6)
        .map(|e| serde_json::to_string(&e.request).unwrap_or_default())
        .collect();
    lines.join("\n")
}

/// Each `offset-commit-regression` of `report` named by the first of librdkafka's known
/// commit patterns that explains it (counted by pattern), and the messages of those none
/// explains.
fn explain(entries: &[Entry], report: &Report) -> (BTreeMap<&'static str, usize>, Vec<String>) {
    type Recognizer = fn(&[Entry], &Violation) -> bool;
    let patterns: [(&str, Recognizer); 4] = [
        ("refused commit sent again", is_stale_commit_retry),
        (
            "revocation commit sent late",
            is_revocation_commit_sent_late,
        ),
        ("held across a coordinator move", |e, v| {
            is_held_commit_sent_late(e, GROUP, v)
        }),
        (
            "held across a reconnect",
            is_held_commit_sent_after_reconnect,
        ),
    ];
    let mut explained = BTreeMap::new();
    let mut unexplained = Vec::new();
    for v in report.of_kind("offset-commit-regression") {
        match patterns
            .iter()
            .find(|(_, recognizes)| recognizes(entries, v))
        {
            Some((name, _)) => *explained.entry(*name).or_default() += 1,
            None => unexplained.push(v.message.clone()),
        }
    }
    (explained, unexplained)
}

/// One run; the number of offset-commit-regression findings.
async fn run(faults: bool) -> Result<usize> {
    // Heartbeats every 500 ms (Kafka's default is 5 s) so that members learn of changes soon.
    let cluster = Cluster::builder()
        .brokers(3)
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
    if faults {
        let lost = Rule::on(ApiKey::ConsumerGroupHeartbeat)
            .every(7)
            .disconnect_after_apply();
        cluster.add_rule(lost)?;
    }

    let first = member(&cluster, "consumer-1")?;
    let second = member(&cluster, "consumer-2")?;
    settle(
        &cluster,
        PARTITIONS,
        "consumer-1 and consumer-2",
        &[&first, &second],
    )
    .await
    .with_context(|| heartbeats(&cluster))?;
    let third = member(&cluster, "consumer-3")?;
    settle(
        &cluster,
        PARTITIONS,
        "consumer-3 joined",
        &[&first, &second, &third],
    )
    .await?;
    println!("three members:\n{}", describe(&[&first, &second, &third]));
    if faults {
        let old = cluster.coordinator(GROUP);
        cluster.move_coordinator(GROUP, old % 3 + 1)?;
        settle(
            &cluster,
            PARTITIONS,
            "coordinator moved",
            &[&first, &second, &third],
        )
        .await?;
    }
    let (consumed_2, errors_2) = second.close_consumed();
    settle(&cluster, PARTITIONS, "consumer-2 left", &[&first, &third]).await?;
    stop.store(true, Ordering::Relaxed);
    let produced = producing.await??;
    // Every message is consumed by someone: wait for the tail (a hang guard only).
    wait_members(
        "every message consumed",
        &[&first, &third],
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
    .with_context(|| positions(&cluster))
    .context("messages lost")?;
    let errors = [first.close(), errors_2, third.close()].concat();

    let journal = cluster.journal();
    let heartbeats = consumer_protocol_only(&journal)?;
    let again = fetched_below_commits(journal.entries(), GROUP, TOPIC, "consumer");
    let report = cluster.check(&Checks::default());
    if !report.is_clean() || !again.is_empty() {
        let path = std::env::temp_dir().join(format!("kip848-{}.jsonl", std::process::id()));
        journal.write_jsonl(std::fs::File::create(&path)?)?;
        println!("journal written to {}", path.display());
    }
    let commits = journal
        .offset_commits()
        .into_iter()
        .filter(|c| c.commit.error_code == Some(0))
        .count();
    // (partition, seq of the commit that moved it backwards) of each regression.
    let regressions: Vec<(i32, u64)> = report
        .of_kind("offset-commit-regression")
        .filter_map(|v| {
            let partition = v.key.rsplit('-').next()?.parse().ok()?;
            Some((partition, v.entries.last()?.seq))
        })
        .collect();
    println!(
        "{produced} messages produced, {commits} partition commits stored, {heartbeats} heartbeats, \
         {} client errors; {} violations ({} offset-commit-regression), {} warnings, {} fetches \
         below a stored commit",
        errors.len(),
        report.count(Severity::Violation),
        regressions.len(),
        report.count(Severity::Warning),
        again.len(),
    );
    for e in &errors {
        println!("  client error: {e}");
    }
    {
        // librdkafka sends again an OffsetCommit whose answer was lost with the connection,
        // after newer commits were stored: the committed offset moves backwards and the next
        // owner fetches from there. The checks must name each such move; nothing else may go
        // wrong.
        let other: Vec<&str> = report
            .violations
            .iter()
            .filter(|v| v.severity == Severity::Violation && v.kind != "offset-commit-regression")
            .map(|v| v.message.as_str())
            .collect();
        ensure!(
            other.is_empty(),
            "violations other than offset-commit-regression:\n{}",
            other.join("\n")
        );
        let (explained, unexplained) = explain(journal.entries(), &report);
        println!("offset-commit-regression by librdkafka pattern: {explained:?}");
        ensure!(
            unexplained.is_empty(),
            "offset-commit-regression that no known librdkafka pattern explains:\n{}",
            unexplained.join("\n")
        );
        let unexplained: Vec<&str> = again
            .iter()
            .filter(|(p, seq, _)| !regressions.iter().any(|(rp, rseq)| rp == p && rseq < seq))
            .map(|(_, _, line)| line.as_str())
            .collect();
        ensure!(
            unexplained.is_empty(),
            "fetched again after a commit, with no offset-commit-regression before:\n{}",
            unexplained.join("\n")
        );
    }
    cluster.shutdown().await;
    Ok(regressions.len())
}

/// Runs [`repeat`] times.
async fn runs(faults: bool) -> Result<()> {
    for i in 0..repeat() {
        let started = Instant::now();
        let regressions = run(faults)
            .await
            .with_context(|| format!("run {}", i + 1))?;
        println!(
            "run {} took {:?}, {regressions} offset-commit-regression",
            i + 1,
            started.elapsed()
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip848_members_joining_and_leaving_while_committing_lose_nothing_and_are_clean(
) -> Result<()> {
    runs(false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_with_lost_heartbeat_answers_and_a_coordinator_move() -> Result<()> {
    runs(true).await
}
