//! A new librdkafka consumer in a group resumes after the offsets the previous member
//! committed: OffsetFetch at the coordinator gives back exactly what was committed, and the
//! second consumer reads everything from there on, once, and never fetches anything older.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use common::excerpt::group_excerpt;
use common::requests::connect_to_coordinator;
use common::{err, text};
use futures::future::join_all;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, TopicName};
use kmock::journal::RequestSummary;
use kmock::Cluster;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Message;
use tokio::time::Instant;

/// The consumers' session timeout: Kafka's `group.min.session.timeout.ms`, the least allowed.
const SESSION_TIMEOUT: Duration = Duration::from_millis(6_000);
/// Hang guard for reading: generous, it only catches a consumer that stops.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The group requests of the journal, one line each.
fn group_traffic(cluster: &Cluster) -> String {
    group_excerpt(cluster.journal().entries())
}

/// A consumer of `topic` in group `h` from the earliest offset, committing by hand.
fn resuming_consumer(bootstrap: &str, topic: &str, name: &str) -> Result<StreamConsumer> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "h")
        .set("client.id", name)
        .set(
            "session.timeout.ms",
            SESSION_TIMEOUT.as_millis().to_string(),
        )
        .set("heartbeat.interval.ms", "500")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .with_context(|| format!("creating consumer {name}"))?;
    consumer.subscribe(&[topic])?;
    Ok(consumer)
}

/// Closes a consumer (it leaves the group) off the async threads: closing blocks.
async fn close(consumer: StreamConsumer) -> Result<()> {
    consumer.unsubscribe();
    tokio::task::spawn_blocking(move || drop(consumer)).await?;
    Ok(())
}

/// The message number in a payload.
fn number(m: &impl Message) -> Result<usize> {
    let payload = m.payload().context("a message without a payload")?;
    Ok(std::str::from_utf8(payload)?.parse()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_consumer_resumes_after_the_last_committed_offset() -> Result<()> {
    const TOPIC: &str = "ledger";
    const MESSAGES: usize = 100;
    const FIRST_READS: usize = 60;
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, 2)
        .start()
        .await?;
    let bootstrap = cluster.bootstrap();

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("linger.ms", "5")
        .create()?;
    let sends = (0..MESSAGES).map(|i| {
        let (key, value) = (format!("key-{i}"), i.to_string());
        let producer = &producer;
        async move {
            let record = FutureRecord::to(TOPIC).key(&key).payload(&value);
            (i, producer.send(record, Duration::from_secs(30)).await)
        }
    });
    // Where each message is, by (partition, offset).
    let mut stored: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for (i, result) in join_all(sends).await {
        let delivery =
            result.map_err(|(e, _)| anyhow::anyhow!("message {i} not delivered: {e}"))?;
        stored.insert((delivery.partition, delivery.offset), i);
    }
    let ends: BTreeMap<i32, i64> = stored.keys().fold(BTreeMap::new(), |mut ends, &(p, o)| {
        let end = ends.entry(p).or_insert(0);
        *end = (*end).max(o + 1);
        ends
    });
    println!("produced {MESSAGES} messages; partition ends {ends:?}");

    // A reads 60 messages, committing each one synchronously, then closes.
    let a = resuming_consumer(&bootstrap, TOPIC, "consumer-a")?;
    let mut read_by_a: Vec<(i32, i64, usize)> = Vec::new();
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while read_by_a.len() < FIRST_READS {
        let m = match tokio::time::timeout_at(deadline, a.recv()).await {
            Err(_) => bail!(
                "consumer A read {} of {FIRST_READS} messages within {SETTLE_TIMEOUT:?}; group \
                 requests:\n{}",
                read_by_a.len(),
                group_traffic(&cluster)
            ),
            Ok(result) => result.context("consumer A")?,
        };
        read_by_a.push((m.partition(), m.offset(), number(&m)?));
        a.commit_message(&m, CommitMode::Sync).with_context(|| {
            format!(
                "consumer A committing partition {} offset {}",
                m.partition(),
                m.offset() + 1
            )
        })?;
        committed.insert(m.partition(), m.offset() + 1);
    }
    close(a).await?;
    println!("consumer A read {FIRST_READS} messages and committed {committed:?}");

    // The coordinator holds what A committed.
    let admin = connect_to_coordinator(&cluster, "h", "checker").await?;
    let fetched = admin
        .send(
            OffsetFetchRequest::default()
                .with_group_id(GroupId(text("h")))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(TopicName(text(TOPIC)))
                    .with_partition_indexes(vec![0, 1])])),
            7,
        )
        .await?;
    ensure!(
        fetched.error_code == 0,
        "OffsetFetch h: {}",
        err(fetched.error_code)
    );
    let mut found: BTreeMap<i32, i64> = BTreeMap::new();
    for t in &fetched.topics {
        for p in &t.partitions {
            ensure!(
                p.error_code == 0,
                "OffsetFetch h {}/{}: {}",
                t.name.0.as_str(),
                p.partition_index,
                err(p.error_code)
            );
            if p.committed_offset >= 0 {
                found.insert(p.partition_index, p.committed_offset);
            }
        }
    }
    ensure!(
        found == committed,
        "OffsetFetch h: committed offsets {found:?}, expected what consumer A committed, \
         {committed:?}"
    );

    // B reads the rest: everything from each partition's committed offset on, and nothing else.
    let expected_by_b: Vec<(i32, i64, usize)> = stored
        .iter()
        .filter(|((p, o), _)| *o >= committed.get(p).copied().unwrap_or(0))
        .map(|(&(p, o), &i)| (p, o, i))
        .collect();
    let b = resuming_consumer(&bootstrap, TOPIC, "consumer-b")?;
    let mut read_by_b: Vec<(i32, i64, usize)> = Vec::new();
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while read_by_b.len() < expected_by_b.len() {
        let m = match tokio::time::timeout_at(deadline, b.recv()).await {
            Err(_) => bail!(
                "consumer B read {} of {} messages within {SETTLE_TIMEOUT:?}; group requests:\n{}",
                read_by_b.len(),
                expected_by_b.len(),
                group_traffic(&cluster)
            ),
            Ok(result) => result.context("consumer B")?,
        };
        read_by_b.push((m.partition(), m.offset(), number(&m)?));
    }
    close(b).await?;
    // B never asked for anything before the committed offsets: each of its Fetches of a
    // partition starts at or after what A committed (so nothing older can reach it).
    let journal = cluster.journal();
    let early: Vec<String> = journal
        .client_id("consumer-b")
        .filter_map(|e| match &e.request {
            Some(RequestSummary::Fetch(f)) => Some(f),
            _ => None,
        })
        .flat_map(|f| &f.partitions)
        .filter(|p| p.fetch_offset < committed.get(&p.partition).copied().unwrap_or(0))
        .map(|p| format!("{}-{} from {}", p.topic, p.partition, p.fetch_offset))
        .collect();
    ensure!(
        early.is_empty(),
        "consumer B fetched before the committed offsets {committed:?}: {early:?}"
    );
    read_by_b.sort();
    ensure!(
        read_by_b == expected_by_b,
        "consumer B read {} messages, expected the {} after A's commits {committed:?}:\n  got \
         (partition, offset, number) {read_by_b:?}\n  expected {expected_by_b:?}",
        read_by_b.len(),
        expected_by_b.len()
    );
    let mut everything: Vec<usize> = read_by_a
        .iter()
        .chain(&read_by_b)
        .map(|&(_, _, i)| i)
        .collect();
    everything.sort();
    ensure!(
        everything == (0..MESSAGES).collect::<Vec<_>>(),
        "A and B together did not read each of the {MESSAGES} messages once: {everything:?}"
    );
    println!(
        "consumer B read the other {} messages, from the committed offsets on",
        read_by_b.len()
    );
    // A correct client with synchronous commits trips none of the ordering checks.
    cluster.check(&kmock::Checks::default()).assert_clean();
    cluster.shutdown().await;
    Ok(())
}
