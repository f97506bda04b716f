//! Client quotas are honoured as Kafka's `ClientQuotaManager` honours them: a Produce or Fetch
//! that takes its client id past `producer_byte_rate` / `consumer_byte_rate` is answered at
//! once with the throttle time, a throttled Fetch with no records, and the connection reads
//! nothing more from the client until the throttle time has passed (KIP-219's muted channel).
//! librdkafka producing under a quota is told the throttle time and still delivers everything.
//! An ip quota names an IP address or a host name that resolves, looked up before the state is
//! locked.

mod common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Result};
use common::{code_is, same, text};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::AlterClientQuotasRequest;
use kmock::Cluster;
use kmock_client::{decode_records, record, Client};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::statistics::Statistics;
use rdkafka::ClientContext;
use tokio::time::Instant;

/// Sets `key` to `value` for client id `client_id` through AlterClientQuotas.
async fn set_quota(client: &Client, client_id: &str, key: &str, value: f64) -> Result<()> {
    let request = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(text("client-id"))
            .with_entity_name(Some(text(client_id)))])
        .with_ops(vec![OpData::default()
            .with_key(text(key))
            .with_value(value)])]);
    let answer = client.send(request, 1).await?;
    code_is("AlterClientQuotas", answer.entries[0].error_code, None)
}

/// 10,000 B/s: the first sample's window counts as Kafka's 10 full seconds, so one request
/// of 110,000 bytes is 11,000 B/s, 10 % over, throttled (11,000 − 10,000) / 10,000 × 10 s =
/// 1 s (a little more with the request's other bytes).
const RATE: f64 = 10_000.0;
const BIG: usize = 110_000;

#[tokio::test]
async fn a_produce_past_its_quota_is_answered_with_the_throttle_time_then_the_connection_waits(
) -> Result<()> {
    let cluster = Cluster::builder().topic("q", 1).start().await?;
    let addr = cluster.brokers()[0].addr;
    let admin = Client::connect(addr).await?;
    set_quota(&admin, "slow-producer", "producer_byte_rate", RATE).await?;
    let producer = Client::connect_with_client_id(addr, "slow-producer").await?;
    let value = vec![7u8; BIG];
    let sent = Instant::now();
    let answer = producer
        .produce("q", 0, &[record(b"k", &value)], -1)
        .await?;
    code_is(
        "produce",
        answer.responses[0].partition_responses[0].error_code,
        None,
    )?;
    let throttle_ms = answer.throttle_time_ms;
    ensure!(
        (1_000..1_100).contains(&throttle_ms),
        "throttle time {throttle_ms} ms, expected 1,000 ms and what the request's other bytes add"
    );
    // The muted connection reads the next request only once the throttle time has passed.
    producer.api_versions().await?;
    let waited = sent.elapsed();
    ensure!(
        waited >= Duration::from_millis(throttle_ms as u64),
        "the next request was answered {waited:?} after the throttled one was sent, within its \
         throttle time of {throttle_ms} ms"
    );
    // Another client id has no quota: not throttled.
    let other = Client::connect_with_client_id(addr, "free-producer").await?;
    let answer = other.produce("q", 0, &[record(b"k", &value)], -1).await?;
    same("other client's throttle", answer.throttle_time_ms, 0)?;
    cluster.shutdown().await;
    Ok(())
}

/// Three batches for the fetch test: 60,000, 60,000 and 1,000 bytes of value, at offsets 0–2.
const BATCHES: [usize; 3] = [60_000, 60_000, 1_000];

#[tokio::test]
async fn a_fetch_past_its_quota_is_answered_empty_with_the_throttle_time_and_not_counted(
) -> Result<()> {
    let cluster = Cluster::builder().topic("q", 1).start().await?;
    let addr = cluster.brokers()[0].addr;
    let admin = Client::connect(addr).await?;
    for size in BATCHES {
        admin
            .produce("q", 0, &[record(b"k", &vec![7u8; size])], -1)
            .await?;
    }
    set_quota(&admin, "slow-consumer", "consumer_byte_rate", RATE).await?;
    let consumer = Client::connect_with_client_id(addr, "slow-consumer").await?;
    let read = |answer: &kafka_protocol::messages::FetchResponse| -> Result<Vec<usize>> {
        let partition = &answer.responses[0].partitions[0];
        code_is("fetch", partition.error_code, None)?;
        let records = decode_records(partition.records.as_ref().expect("records"))?;
        Ok(records
            .iter()
            .map(|r| r.value.as_ref().map_or(0, |v| v.len()))
            .collect())
    };
    // At most the quota's window (100,000 bytes) is read: the first batch, 6,000 B/s.
    let answer = consumer
        .fetch("q", 0, 0, Duration::from_millis(100))
        .await?;
    same("values read from 0", read(&answer)?, vec![60_000])?;
    same("first fetch's throttle", answer.throttle_time_ms, 0)?;
    // The next two batches make 121,000 bytes in the window: 12,100 B/s over 10 s, throttled
    // 121,000 / 10,000 s less the window, about 2.1 s (down to 1.1 s on a machine so slow that
    // the first sample's second had passed, which lengthens the window), answered empty.
    let sent = Instant::now();
    let answer = consumer
        .fetch("q", 0, 1, Duration::from_millis(100))
        .await?;
    let throttle_ms = answer.throttle_time_ms;
    ensure!(
        (1_100..2_300).contains(&throttle_ms),
        "throttle time {throttle_ms} ms, expected 12,100 ms (and what the answers' other bytes \
         add) less the window"
    );
    same("topics in a throttled answer", answer.responses.len(), 0)?;
    // The throttled answer's bytes were taken back: the last batch alone stays within the
    // quota, and is read once the muted connection reads again.
    let answer = consumer
        .fetch("q", 0, 2, Duration::from_millis(100))
        .await?;
    let waited = sent.elapsed();
    ensure!(
        waited >= Duration::from_millis(throttle_ms as u64),
        "the next fetch was answered {waited:?} after the throttled one was sent, within its \
         throttle time of {throttle_ms} ms"
    );
    same("values read from 2", read(&answer)?, vec![1_000])?;
    same("last fetch's throttle", answer.throttle_time_ms, 0)?;
    cluster.shutdown().await;
    Ok(())
}

/// librdkafka's statistics, keeping the largest throttle time any broker reported.
#[derive(Default)]
struct Throttles {
    max_ms: Arc<AtomicI64>,
}

impl ClientContext for Throttles {
    fn stats(&self, statistics: Statistics) {
        for broker in statistics.brokers.values() {
            if let Some(window) = &broker.throttle {
                self.max_ms.fetch_max(window.max, Ordering::Relaxed);
            }
        }
    }
}

/// Messages of `VALUE` bytes produced under `PRODUCER_RATE` B/s: 300 KB, 20 KB/s, so the
/// first 200 KB go at once (10 s of window assumed empty) and the rest is throttled.
const MESSAGES: usize = 300;
const VALUE: usize = 1_000;
const PRODUCER_RATE: f64 = 20_000.0;
/// A hang guard only: the throttled run takes about 5 s.
const HANG_GUARD: Duration = Duration::from_secs(120);

#[tokio::test]
async fn librdkafka_producing_under_a_quota_is_throttled_and_delivers_everything() -> Result<()> {
    let cluster = Cluster::builder().topic("q", 1).start().await?;
    let admin = Client::connect(cluster.brokers()[0].addr).await?;
    set_quota(
        &admin,
        "rdkafka-under-quota",
        "producer_byte_rate",
        PRODUCER_RATE,
    )
    .await?;
    let throttles = Throttles::default();
    let max_ms = Arc::clone(&throttles.max_ms);
    let producer: FutureProducer<Throttles> = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("client.id", "rdkafka-under-quota")
        .set("statistics.interval.ms", "100")
        .set("linger.ms", "5")
        .set("batch.size", "16384")
        .set("message.timeout.ms", "100000")
        .create_with_context(throttles)?;
    let value = vec![b'v'; VALUE];
    let deliveries: Vec<_> = (0..MESSAGES)
        .map(|i| {
            let key = format!("k{i}");
            producer
                .send_result(FutureRecord::to("q").key(&key).payload(&value))
                .map_err(|(e, _)| e)
        })
        .collect::<Result<_, _>>()?;
    let delivered = tokio::time::timeout(HANG_GUARD, futures::future::join_all(deliveries)).await?;
    let mut offsets = Vec::new();
    for d in delivered {
        let delivery = d?.map_err(|(e, _)| e)?;
        same("partition", delivery.partition, 0)?;
        offsets.push(delivery.offset);
    }
    offsets.sort_unstable();
    same("offsets delivered", offsets, (0..MESSAGES as i64).collect())?;
    // The throttle time reaches librdkafka's statistics on their next emission.
    let deadline = Instant::now() + HANG_GUARD;
    while max_ms.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
        // Polling: statistics come every 100 ms on librdkafka's own thread.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reported = max_ms.load(Ordering::Relaxed);
    ensure!(reported > 0, "librdkafka was never told of a throttle time");
    println!("largest throttle time librdkafka reported: {reported} ms");
    let stored: i64 = cluster
        .journal()
        .produce_batches()
        .iter()
        .map(|b| i64::from(b.batch.record_count))
        .sum();
    same("records the journal saw produced", stored, MESSAGES as i64)?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn an_ip_quota_names_an_address_or_a_host_that_resolves() -> Result<()> {
    let cluster = Cluster::builder().start().await?;
    let admin = Client::connect(cluster.brokers()[0].addr).await?;
    let ip = |name: &str| {
        EntryData::default()
            .with_entity(vec![EntityData::default()
                .with_entity_type(text("ip"))
                .with_entity_name(Some(text(name)))])
            .with_ops(vec![OpData::default()
                .with_key(text("connection_creation_rate"))
                .with_value(10.0)])
    };
    // `localhost` resolves from the hosts file; `.invalid` never resolves (RFC 6761), whether
    // the resolver answers at once or the lookup timeout ends first.
    let names = [
        "localhost",
        "127.0.0.1",
        "no-such-host.invalid",
        "localhost",
    ];
    let request = AlterClientQuotasRequest::default()
        .with_entries(names.iter().map(|name| ip(name)).collect());
    let answer = admin.send(request, 1).await?;
    let got: Vec<(i16, Option<String>)> = answer
        .entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_ref().map(ToString::to_string),
            )
        })
        .collect();
    let invalid = kafka_protocol::ResponseError::InvalidRequest.code();
    same(
        "AlterClientQuotas ip entities (error, message)",
        got,
        vec![
            (
                invalid,
                Some("Ignoring duplicate entity ClientQuotaEntity(entries={ip=localhost})".into()),
            ),
            (0, None),
            (
                invalid,
                Some("no-such-host.invalid is not a valid IP or resolvable host.".into()),
            ),
        ],
    )
}
