//! librdkafka (through rdkafka) against a three-broker kmock cluster: for every compression
//! codec, 10,000 keyed messages with headers and timestamps are produced, then consumed from
//! all partitions, and each must come back unchanged at the offset its delivery report gave;
//! and every batch kmock stored carries the codec under test in its attributes.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context};
use futures::future::join_all;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders, Timestamp};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const MESSAGES: usize = 10_000;
/// Length of the run of one byte in each value (see `message`).
const VALUE_RUN: usize = 200;
/// Deliveries awaited together.
const CHUNK: usize = 1_000;
const CONSUME_TIMEOUT: Duration = Duration::from_secs(60);

/// Consumed messages by partition, in arrival order, with their offsets.
type ByPartition = BTreeMap<i32, Vec<(i64, Content)>>;

/// A message's content: what was sent, or what came back.
#[derive(Clone, PartialEq, Eq)]
struct Content {
    key: Vec<u8>,
    value: Vec<u8>,
    headers: Vec<(String, Vec<u8>)>,
    timestamp: Timestamp,
}

/// Bytes shown as escaped ASCII, so failure messages read `key-7`, not `[107, 101, …]`.
impl fmt::Debug for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<_> = self
            .headers
            .iter()
            .map(|(k, v)| format!("{k}={}", v.escape_ascii()))
            .collect();
        write!(
            f,
            "{{key: {:?}, value: {:?}, headers: {headers:?}, timestamp: {:?}}}",
            self.key.escape_ascii().to_string(),
            self.value.escape_ascii().to_string(),
            self.timestamp
        )
    }
}

/// Message `i` as the producer sends it.
fn message(i: usize, base_ms: i64) -> Content {
    Content {
        key: format!("key-{i}").into_bytes(),
        // A long run of one byte: every batch, even of one record, shrinks under every codec,
        // so librdkafka never falls back to sending it uncompressed (below).
        value: format!("value-{i}-{}", "v".repeat(VALUE_RUN)).into_bytes(),
        headers: vec![
            ("h1".to_owned(), i.to_string().into_bytes()),
            ("h2".to_owned(), b"x".to_vec()),
        ],
        timestamp: Timestamp::CreateTime(base_ms + i as i64),
    }
}

/// The content of a consumed message.
fn content(m: &impl Message) -> Content {
    let headers = m.headers().map_or_else(Vec::new, |hs| {
        hs.iter()
            .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
            .collect()
    });
    Content {
        key: m.key().unwrap_or_default().to_vec(),
        value: m.payload().unwrap_or_default().to_vec(),
        headers,
        timestamp: m.timestamp(),
    }
}

/// How many messages each partition holds, for failure messages.
fn counts(by_partition: &ByPartition) -> String {
    let count = |p| by_partition.get(&p).map_or(0, Vec::len);
    (0..PARTITIONS)
        .map(|p| format!("p{p}={} ", count(p)))
        .collect()
}

/// Produces every message with `codec`; returns each one's (partition, offset) by index.
async fn produce_all(
    bootstrap: &str,
    codec: &str,
    sent: &[Content],
) -> anyhow::Result<Vec<(i32, i64)>> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("compression.type", codec)
        .set("linger.ms", "5")
        .create()
        .context("creating the producer")?;
    let mut delivered = Vec::with_capacity(sent.len());
    let mut failures = Vec::new();
    for (chunk_no, chunk) in sent.chunks(CHUNK).enumerate() {
        let sends = chunk.iter().map(|m| {
            let headers = m.headers.iter().fold(OwnedHeaders::new(), |hs, (k, v)| {
                hs.insert(Header {
                    key: k,
                    value: Some(v),
                })
            });
            let record = FutureRecord::to(TOPIC)
                .key(&m.key)
                .payload(&m.value)
                .headers(headers)
                .timestamp(m.timestamp.to_millis().expect("sent with a timestamp"));
            producer.send(record, Duration::from_secs(30))
        });
        for (j, result) in join_all(sends).await.into_iter().enumerate() {
            match result {
                Ok(d) => delivered.push((d.partition, d.offset)),
                Err((e, _)) => failures.push(format!("message {}: {e}", chunk_no * CHUNK + j)),
            }
        }
    }
    ensure!(
        failures.is_empty(),
        "{} of {MESSAGES} deliveries failed with compression {codec}; first ones: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    Ok(delivered)
}

/// Reads from the beginning of every partition until `MESSAGES` have arrived.
async fn consume_all(bootstrap: &str, codec: &str) -> anyhow::Result<ByPartition> {
    // librdkafka wants a group id even for assign(); no group request is needed with it.
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("rdkafka-roundtrip-{codec}"))
        .set("enable.auto.commit", "false")
        .create()
        .context("creating the consumer")?;
    let mut assignment = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        assignment.add_partition_offset(TOPIC, p, Offset::Beginning)?;
    }
    consumer
        .assign(&assignment)
        .context("assigning all partitions")?;
    let deadline = tokio::time::Instant::now() + CONSUME_TIMEOUT;
    let mut by_partition = ByPartition::new();
    for received in 0..MESSAGES {
        let m = match tokio::time::timeout_at(deadline, consumer.recv()).await {
            Err(_) => bail!(
                "only {received} of {MESSAGES} messages arrived within {CONSUME_TIMEOUT:?}: {}",
                counts(&by_partition)
            ),
            Ok(Err(e)) => bail!(
                "consumer error after {received} of {MESSAGES} messages ({}): {e}",
                counts(&by_partition)
            ),
            Ok(Ok(m)) => m,
        };
        by_partition
            .entry(m.partition())
            .or_default()
            .push((m.offset(), content(&m)));
    }
    Ok(by_partition)
}

/// The compression codec a v2 record batch's attributes name (their low 3 bits).
fn codec_of(attributes: i16) -> &'static str {
    match attributes & 0x7 {
        0 => "none",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "unknown",
    }
}

/// A batch as kmock stored it.
#[derive(Debug)]
#[allow(dead_code)] // fields read through Debug in failure messages
struct StoredBatch {
    partition: i32,
    base_offset: i64,
    records: i32,
    bytes: usize,
    codec: &'static str,
}

/// The codec of every batch stored in each partition, read from the batch headers of a Fetch
/// from offset 0 at the partition's leader.
async fn stored_codecs(cluster: &kmock::Cluster) -> anyhow::Result<Vec<StoredBatch>> {
    let mut codecs = Vec::new();
    for p in 0..PARTITIONS {
        let leader = cluster.leader(TOPIC, p).context("a leader")?;
        let addr = cluster.brokers()[leader as usize - 1].addr;
        let client = kmock_client::Client::connect(addr).await?;
        let answer = client.fetch(TOPIC, p, 0, Duration::ZERO).await?;
        let data = &answer.responses[0].partitions[0];
        ensure!(
            data.error_code == 0,
            "fetch of partition {p}: error {}",
            data.error_code
        );
        let mut bytes = &data.records.clone().unwrap_or_default()[..];
        // Batch header: base offset (8), length (4), leader epoch (4), magic (1), crc (4),
        // attributes (2), last offset delta (4), two timestamps (16), producer id (8) and
        // epoch (2), base sequence (4), record count (4); the length counts what follows it.
        while bytes.len() >= 61 {
            let base_offset = i64::from_be_bytes(bytes[0..8].try_into()?);
            let length = i32::from_be_bytes(bytes[8..12].try_into()?) as usize;
            ensure!(
                bytes[16] == 2,
                "partition {p}: batch of magic {}",
                bytes[16]
            );
            let attributes = i16::from_be_bytes(bytes[21..23].try_into()?);
            let records = i32::from_be_bytes(bytes[57..61].try_into()?);
            codecs.push(StoredBatch {
                partition: p,
                base_offset,
                records,
                bytes: 12 + length,
                codec: codec_of(attributes),
            });
            bytes = &bytes[(12 + length).min(bytes.len())..];
        }
    }
    Ok(codecs)
}

async fn round_trip(codec: &str) -> anyhow::Result<()> {
    let cluster = kmock::Cluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .start()
        .await?;
    let bootstrap = cluster.bootstrap();
    // A minute in the past: well inside any timestamp bound a broker could apply.
    let base_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64 - 60_000;
    let sent: Vec<Content> = (0..MESSAGES).map(|i| message(i, base_ms)).collect();

    let delivered = produce_all(&bootstrap, codec, &sent).await?;
    let by_partition = consume_all(&bootstrap, codec).await?;

    for (p, messages) in &by_partition {
        let offsets = messages.iter().map(|(o, _)| *o);
        if let Some((k, o)) = offsets.enumerate().find(|&(k, o)| o != k as i64) {
            bail!("partition {p} ({codec}): message #{k} came back at offset {o}, expected {k}");
        }
    }
    let empty: Vec<i32> = (0..PARTITIONS)
        .filter(|p| !by_partition.contains_key(p))
        .collect();
    ensure!(
        empty.is_empty(),
        "partitions {empty:?} received nothing ({codec}): {}",
        counts(&by_partition)
    );

    let mut mismatches = Vec::new();
    for (i, (expected, &(p, o))) in sent.iter().zip(&delivered).enumerate() {
        // Offsets are contiguous from 0 (checked above), so offset o is at index o.
        let got = by_partition.get(&p).and_then(|ms| ms.get(o as usize));
        match got {
            None => mismatches.push(format!(
                "message {i}: delivered to partition {p} offset {o}, but nothing came back there"
            )),
            Some((_, got)) if got != expected => mismatches.push(format!(
                "message {i} at partition {p} offset {o}: sent {expected:?}, got back {got:?}"
            )),
            Some(_) => {}
        }
    }
    ensure!(
        mismatches.is_empty(),
        "{} of {MESSAGES} messages ({codec}) did not come back as sent; first ones:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(5)].join("\n")
    );
    let stored = stored_codecs(&cluster).await?;
    ensure!(!stored.is_empty(), "no batch stored");
    // librdkafka sends a batch uncompressed when compressing does not make it smaller
    // (rd_kafka_msgset_writer_compress); the values are built so that it always does, so
    // every batch must be stored with the codec it was sent with.
    let other: Vec<_> = stored.iter().filter(|b| b.codec != codec).collect();
    ensure!(
        other.is_empty(),
        "{} of {} stored batches are not {codec}-compressed: {:?}",
        other.len(),
        stored.len(),
        &other[..other.len().min(5)]
    );
    println!(
        "{codec}: all {MESSAGES} messages round-tripped in {} {codec} batches: {}",
        stored.len(),
        counts(&by_partition)
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_round_trips_through_a_three_broker_cluster_with_no_compression(
) -> anyhow::Result<()> {
    round_trip("none").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_round_trips_through_a_three_broker_cluster_with_gzip() -> anyhow::Result<()>
{
    round_trip("gzip").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_round_trips_through_a_three_broker_cluster_with_snappy() -> anyhow::Result<()>
{
    round_trip("snappy").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_round_trips_through_a_three_broker_cluster_with_lz4() -> anyhow::Result<()> {
    round_trip("lz4").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_round_trips_through_a_three_broker_cluster_with_zstd() -> anyhow::Result<()>
{
    round_trip("zstd").await
}
