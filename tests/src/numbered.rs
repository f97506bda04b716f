//! Numbered messages produced with librdkafka, the partition logs read back with librdkafka,
//! and the exactly-once-in-order verdict over both.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use futures::future::join_all;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

/// Where numbered messages went: message `i` carries the decimal number `i` as its value and
/// `key-{i % 997}` as its key.
#[derive(Debug, Clone, Default)]
pub struct Produced {
    /// `(partition, offset)` of message i, from its delivery report.
    pub delivered: Vec<(i32, i64)>,
    /// Message numbers sent to each partition, in production order (index = the producer's
    /// sequence within the partition, for an idempotent producer that never bumps its epoch).
    pub by_partition: Vec<Vec<usize>>,
}

/// Enqueues messages `0..count` to `topic` one at a time in number order (so each partition's
/// production order is the order of its numbers), `pause` between chunks of `chunk` messages,
/// then waits for every delivery report.
///
/// # Errors
/// The first message that could not be queued or delivered, with librdkafka's reason.
pub async fn produce_numbered(
    producer: &FutureProducer,
    topic: &str,
    partitions: i32,
    count: usize,
    (chunk, pause): (usize, Duration),
) -> Result<Produced> {
    let mut deliveries = Vec::with_capacity(count);
    for i in 0..count {
        let (key, value) = (format!("key-{}", i % 997), i.to_string());
        let record = FutureRecord::to(topic).key(&key).payload(&value);
        let queued = producer
            .send_result(record)
            .map_err(|(e, _)| anyhow!("message {i} not queued: {e}"))?;
        deliveries.push(queued);
        if (i + 1) % chunk == 0 {
            // Pacing asked for by the caller, not synchronisation: no event to wait for.
            tokio::time::sleep(pause).await;
        }
    }
    let mut produced = Produced {
        delivered: vec![(0, 0); count],
        by_partition: vec![Vec::new(); partitions as usize],
    };
    for (i, result) in join_all(deliveries).await.into_iter().enumerate() {
        let d = result
            .context("delivery report channel closed")?
            .map_err(|(e, _)| anyhow!("message {i} not delivered: {e}"))?;
        produced.delivered[i] = (d.partition, d.offset);
        produced.by_partition[d.partition as usize].push(i);
    }
    Ok(produced)
}

/// Reads every record of `topic`'s `partitions` up to their high watermarks with a
/// librdkafka consumer: per partition, `(offset, message number)` in log order.
///
/// # Errors
/// When the watermarks cannot be read, a value is not a number, or the log is not read whole
/// within `timeout`.
pub async fn read_log(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<Vec<Vec<(i64, usize)>>> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "log-reader")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    let mut ends = Vec::new();
    for p in 0..partitions {
        assignment.add_partition_offset(topic, p, Offset::Beginning)?;
        let (_, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(10))?;
        ends.push(high as usize);
    }
    consumer.assign(&assignment)?;
    let mut stored = vec![Vec::new(); partitions as usize];
    let deadline = tokio::time::Instant::now() + timeout;
    while stored.iter().zip(&ends).any(|(s, &end)| s.len() < end) {
        let message = tokio::time::timeout_at(deadline, consumer.recv())
            .await
            .map_err(|_| anyhow!("timed out reading the log; high watermarks {ends:?}"))??;
        let value = String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned();
        let n = value
            .parse()
            .with_context(|| format!("value {value:?} is not a message number"))?;
        stored[message.partition() as usize].push((message.offset(), n));
    }
    Ok(stored)
}

/// Checks that each partition's log holds exactly the messages produced to it, once each, in
/// production order, from offset 0, each where its delivery report put it.
///
/// # Errors
/// The first record that breaks this, with what was expected there; `around(partition,
/// index)` adds context (say, the journal's batches near that sequence).
pub fn exactly_once_in_order(
    stored: &[Vec<(i64, usize)>],
    produced: &Produced,
    around: impl Fn(i32, usize) -> String,
) -> Result<()> {
    for (p, messages) in (0..).zip(stored) {
        let expected: Vec<(i64, usize)> = (0..)
            .zip(produced.by_partition[p as usize].iter().copied())
            .collect();
        let wrong = |k: usize| match (messages.get(k), expected.get(k)) {
            (got, Some(&(o, n))) => got != Some(&(o, n)) || produced.delivered[n] != (p, o),
            (got, None) => got.is_some(),
        };
        if let Some(k) = (0..messages.len().max(expected.len())).find(|&k| wrong(k)) {
            bail!(
                "partition {p}: (offset, message) {k} of the log is {:?}, expected {:?}, \
                 delivery report (partition, offset) {:?} (log {} records, {} produced to it); {}",
                messages.get(k),
                expected.get(k),
                expected.get(k).map(|&(_, n)| produced.delivered[n]),
                messages.len(),
                expected.len(),
                around(p, k)
            );
        }
    }
    Ok(())
}
