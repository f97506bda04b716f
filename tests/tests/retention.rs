//! Retention as Kafka's `UnifiedLog` enforces it, and the cluster's cap on stored bytes, over
//! real sockets: `retention.bytes` deleting whole `segment.bytes` (or
//! `internal.segment.bytes`) segments on append,
//! `retention.ms` deleting segments whose largest timestamp is older (cut by `segment.ms` on
//! the records' own timestamps, so that the boundaries are exact), the log start offset moving
//! in ListOffsets EARLIEST, Fetch below it OFFSET_OUT_OF_RANGE, DescribeLogDirs sizes
//! shrinking; librdkafka's consumer resetting to the new log start; the retention timer; and
//! KAFKA_STORAGE_ERROR past `max_stored_bytes`.
//!
//! The retention passes run at `Cluster::check_retention` (what the timer runs), so the
//! expectations below are exact; one test waits for the timer itself.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{DeleteRecordsRequest, DescribeLogDirsRequest, ListOffsetsRequest};
use kafka_protocol::records::{Compression, Record};
use kafka_protocol::ResponseError;
use kmock::journal::{ClusterOperation, RequestSummary};
use kmock::Cluster;
use kmock_client::{decode_records, encode_batch, record, Client};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use common::{code_is, create_topic_with_configs, name, same};

/// Kafka 4.4's smallest `segment.bytes` (1 MiB).
const MIB: usize = 1 << 20;
/// A generous hang guard: only a hang reaches it.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A cluster of one broker, topic auto-creation off, and a client.
async fn start(builder: kmock::ClusterBuilder) -> Result<(Cluster, Client)> {
    let cluster = builder.auto_create_topics(false).start().await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    Ok((cluster, client))
}

/// A retention deletion as journaled ([`ClusterOperation::Retention`]): its entry's seq and
/// broker, topic, partition, the log start offset after it and the bytes deleted.
type Retained = (u64, i32, String, i32, i64, u64);

/// Every retention deletion in the journal, in seq order.
fn retained(cluster: &Cluster) -> Vec<Retained> {
    cluster
        .journal()
        .entries()
        .iter()
        .filter_map(|e| match &e.operation {
            Some(ClusterOperation::Retention {
                topic,
                partition,
                log_start_offset,
                deleted_bytes,
            }) => Some((
                e.seq,
                e.broker,
                topic.clone(),
                *partition,
                *log_start_offset,
                *deleted_bytes,
            )),
            _ => None,
        })
        .collect()
}

/// The seq of the journaled Produce request whose batch went to `base_offset` of `topic`.
fn produce_seq(cluster: &Cluster, topic: &str, base_offset: i64) -> Result<u64> {
    let journal = cluster.journal();
    let found = journal.api("Produce").find(|e| match &e.request {
        Some(RequestSummary::Produce(p)) => p
            .partitions
            .iter()
            .any(|p| *p.topic == *topic && p.base_offset == Some(base_offset)),
        _ => false,
    });
    found
        .map(|e| e.seq)
        .with_context(|| format!("no Produce to {topic} at offset {base_offset} journaled"))
}

/// DeleteRecords v2 of partition 0 of `topic` up to `offset`, answered without error.
async fn delete_records(client: &Client, topic: &str, offset: i64) -> Result<()> {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(offset)])]);
    let answer = client.send(request, 2).await?;
    code_is(
        "DeleteRecords",
        answer.topics[0].partitions[0].error_code,
        None,
    )
}

/// A one-record batch with a `value_len`-byte value and timestamp `timestamp`.
fn one_record(timestamp: i64, value_len: usize) -> Record {
    Record {
        timestamp,
        ..record(b"k", &vec![b'v'; value_len])
    }
}

/// The size of [`one_record`]'s batch as stored.
fn batch_size(value_len: usize) -> Result<i64> {
    Ok(encode_batch(&[one_record(now_ms(), value_len)], Compression::None)?.len() as i64)
}

/// Produces one record to partition 0 with acks=1; `(error code, base offset, log start
/// offset, error message)` of the answer.
async fn produce(
    client: &Client,
    topic: &str,
    rec: Record,
) -> Result<(i16, i64, i64, Option<String>)> {
    let answer = client.produce(topic, 0, &[rec], 1).await?;
    let p = &answer.responses[0].partition_responses[0];
    Ok((
        p.error_code,
        p.base_offset,
        p.log_start_offset,
        p.error_message.as_ref().map(|m| m.to_string()),
    ))
}

/// Produces one record and fails unless it is appended at `offset`.
async fn produce_at(client: &Client, topic: &str, rec: Record, offset: i64) -> Result<()> {
    let (code, base, _, _) = produce(client, topic, rec).await?;
    code_is("Produce", code, None)?;
    same("Produce base offset", base, offset)
}

/// ListOffsets EARLIEST (-2) or LATEST (-1) of partition 0.
async fn list_offset(client: &Client, topic: &str, timestamp: i64) -> Result<i64> {
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])]);
    let answer = client.send(request, 7).await?;
    let p = &answer.topics[0].partitions[0];
    code_is("ListOffsets", p.error_code, None)?;
    Ok(p.offset)
}

/// DescribeLogDirs' size of partition 0.
async fn log_size(client: &Client, topic: &str) -> Result<i64> {
    let request =
        DescribeLogDirsRequest::default()
            .with_topics(Some(vec![DescribableLogDirTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![0])]));
    let answer = client.send(request, 1).await?;
    let dir = answer.results.first().context("no log directory")?;
    let p = dir
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("partition 0 not described")?;
    Ok(p.partition_size)
}

/// Fetch of partition 0 from `offset`: `(error code, offsets of the records returned)`.
async fn fetch(client: &Client, topic: &str, offset: i64) -> Result<(i16, Vec<i64>)> {
    let answer = client
        .fetch(topic, 0, offset, Duration::from_millis(0))
        .await?;
    let p = &answer.responses[0].partitions[0];
    let offsets = match &p.records {
        Some(records) => decode_records(records)?.iter().map(|r| r.offset).collect(),
        None => Vec::new(),
    };
    Ok((p.error_code, offsets))
}

#[tokio::test]
async fn retention_bytes_deletes_whole_segments_on_append() -> Result<()> {
    let (cluster, client) = start(Cluster::builder()).await?;
    let mib = MIB.to_string();
    let configs = [
        ("segment.bytes", mib.as_str()),
        ("retention.bytes", mib.as_str()),
    ];
    create_topic_with_configs(&client, "r", 1, &configs).await?;
    // Batches of 100 KiB of value: ten fill a 1 MiB segment, the eleventh starts the next.
    let value = 100 * 1024;
    let b = batch_size(value)?;
    ensure!(
        10 * b <= MIB as i64 && 11 * b > MIB as i64,
        "batch of {b} bytes"
    );
    for offset in 0..20 {
        produce_at(&client, "r", one_record(now_ms(), value), offset).await?;
    }
    // Segments [0, 10) and [10, 20): 20 batches exceed 1 MiB, but without the first segment
    // fewer than 1 MiB would stay, so nothing is deleted.
    same("EARLIEST after 20", list_offset(&client, "r", -2).await?, 0)?;
    // The 21st batch starts segment [20, …); without [0, 10) the log holds 11 batches, more
    // than 1 MiB: that segment goes, in the append's own check.
    let (code, base, log_start, _) = produce(&client, "r", one_record(now_ms(), value)).await?;
    code_is("Produce", code, None)?;
    same("21st base offset", base, 20)?;
    same("21st answer's log start offset", log_start, 10)?;
    same(
        "EARLIEST after 21",
        list_offset(&client, "r", -2).await?,
        10,
    )?;
    same("LATEST", list_offset(&client, "r", -1).await?, 21)?;
    same("log size", log_size(&client, "r").await?, 11 * b)?;
    let (code, _) = fetch(&client, "r", 9).await?;
    code_is(
        "Fetch below the log start",
        code,
        Some(ResponseError::OffsetOutOfRange),
    )?;
    let (code, offsets) = fetch(&client, "r", 10).await?;
    code_is("Fetch at the log start", code, None)?;
    same("first offset fetched", offsets.first().copied(), Some(10))?;
    // Up to 30 the log grows to [10, 20), [20, 30); the 31st deletes [10, 20) again.
    for offset in 21..31 {
        produce_at(&client, "r", one_record(now_ms(), value), offset).await?;
    }
    same(
        "EARLIEST after 31",
        list_offset(&client, "r", -2).await?,
        20,
    )?;
    same("log size after 31", log_size(&client, "r").await?, 11 * b)?;
    // Each deletion is journaled right after the Produce request whose append made it, on
    // broker 1, the partition's leader.
    let after = |offset| produce_seq(&cluster, "r", offset).map(|seq| seq + 1);
    same(
        "journaled retention",
        retained(&cluster),
        vec![
            (after(20)?, 1, "r".to_owned(), 0, 10, (10 * b) as u64),
            (after(30)?, 1, "r".to_owned(), 0, 20, (10 * b) as u64),
        ],
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// `internal.segment.bytes` (Kafka 4.x's way below `segment.bytes`' 1 MiB floor) cuts the
/// segments instead of `segment.bytes`, at the default emulated release: two batches a
/// segment, so `retention.bytes` of two batches deletes the first segment at the fourth.
#[tokio::test]
async fn internal_segment_bytes_cuts_segments_below_one_mebibyte() -> Result<()> {
    let (cluster, client) = start(Cluster::builder()).await?;
    let b = batch_size(100)?;
    let two = (2 * b).to_string();
    let configs = [
        ("internal.segment.bytes", two.as_str()),
        ("retention.bytes", two.as_str()),
    ];
    create_topic_with_configs(&client, "small", 1, &configs).await?;
    for offset in 0..3 {
        produce_at(&client, "small", one_record(now_ms(), 100), offset).await?;
    }
    // Segments [0, 2) and [2, 3): without the first, less than two batches would stay.
    same(
        "EARLIEST after 3",
        list_offset(&client, "small", -2).await?,
        0,
    )?;
    // The fourth fills [2, 4): without [0, 2) two batches stay, so it goes.
    let (code, base, log_start, _) = produce(&client, "small", one_record(now_ms(), 100)).await?;
    code_is("Produce", code, None)?;
    same("fourth base offset", base, 3)?;
    same("fourth answer's log start offset", log_start, 2)?;
    same("log size", log_size(&client, "small").await?, 2 * b)?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn retention_ms_deletes_segments_whose_largest_timestamp_is_older() -> Result<()> {
    let (cluster, client) = start(Cluster::builder()).await?;
    // segment.ms=1: every batch whose timestamp is more than 1 ms after its segment's first
    // batch's starts a segment, so each batch below has one.
    let configs = [("segment.ms", "1"), ("retention.ms", "60000")];
    create_topic_with_configs(&client, "t", 1, &configs).await?;
    let now = now_ms();
    let hour = 3_600_000;
    let times = [now - 3 * hour, now - 2 * hour, now - hour, now - 1000, now];
    for (offset, t) in times.into_iter().enumerate() {
        produce_at(&client, "t", one_record(t, 10), offset as i64).await?;
    }
    let b = batch_size(10)?;
    same("log size before", log_size(&client, "t").await?, 5 * b)?;
    // Nothing on append: only retention.bytes is checked there.
    same(
        "EARLIEST before the check",
        list_offset(&client, "t", -2).await?,
        0,
    )?;
    same(
        "partitions whose log start moved",
        cluster.check_retention(),
        1,
    )?;
    same("EARLIEST", list_offset(&client, "t", -2).await?, 3)?;
    same("log size after", log_size(&client, "t").await?, 2 * b)?;
    let journaled: Vec<_> = retained(&cluster)
        .into_iter()
        .map(|(_, broker, topic, partition, start, bytes)| (broker, topic, partition, start, bytes))
        .collect();
    same(
        "journaled retention",
        journaled,
        vec![(1, "t".to_owned(), 0, 3, (3 * b) as u64)],
    )?;
    let (code, _) = fetch(&client, "t", 0).await?;
    code_is(
        "Fetch of offset 0",
        code,
        Some(ResponseError::OffsetOutOfRange),
    )?;
    let (code, offsets) = fetch(&client, "t", 3).await?;
    code_is("Fetch of offset 3", code, None)?;
    same("offsets fetched", offsets, vec![3, 4])?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn compact_alone_keeps_what_retention_would_delete() -> Result<()> {
    let (cluster, client) = start(Cluster::builder()).await?;
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "1"),
        ("retention.ms", "1000"),
        ("retention.bytes", "0"),
    ];
    create_topic_with_configs(&client, "c", 1, &configs).await?;
    let old = now_ms() - 3_600_000;
    for offset in 0..3 {
        produce_at(&client, "c", one_record(old + 10 * offset, 10), offset).await?;
    }
    same(
        "partitions whose log start moved",
        cluster.check_retention(),
        0,
    )?;
    same("EARLIEST", list_offset(&client, "c", -2).await?, 0)?;
    same(
        "log size",
        log_size(&client, "c").await?,
        3 * batch_size(10)?,
    )?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn the_timer_deletes_and_delete_records_frees_whole_segments() -> Result<()> {
    let builder = Cluster::builder().retention_check_interval(kmock::MIN_RETENTION_CHECK_INTERVAL);
    let (cluster, client) = start(builder).await?;
    create_topic_with_configs(&client, "d", 1, &[("segment.ms", "1")]).await?;
    let now = now_ms();
    for offset in 0..4 {
        produce_at(&client, "d", one_record(now + 10 * offset, 10), offset).await?;
    }
    let b = batch_size(10)?;
    // DeleteRecords to 3 moves the log start at once; the segments wholly below it (offsets 0,
    // 1 and 2) go at the timer's next check.
    delete_records(&client, "d", 3).await?;
    same("EARLIEST", list_offset(&client, "d", -2).await?, 3)?;
    // The timer's deletion is journaled: awaited (HANG_GUARD only catches a hang).
    let deletion = cluster
        .wait_for(
            |e| matches!(e.operation, Some(ClusterOperation::Retention { .. })),
            HANG_GUARD,
        )
        .await
        .context("the retention timer never deleted the segments below the log start")?;
    same(
        "the timer's deletion",
        deletion.operation,
        Some(ClusterOperation::Retention {
            topic: "d".to_owned(),
            partition: 0,
            log_start_offset: 3,
            deleted_bytes: (3 * b) as u64,
        }),
    )?;
    same("log size after the timer", log_size(&client, "d").await?, b)?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_retention_check_interval_below_the_floor_is_refused_by_the_builder_and_a_scenario(
) -> Result<()> {
    let below = kmock::MIN_RETENTION_CHECK_INTERVAL - Duration::from_millis(1);
    let refused = Cluster::builder()
        .retention_check_interval(below)
        .start()
        .await;
    match refused {
        Err(kmock::Error::Config(message)) => ensure!(
            message.contains("below kmock's floor of 100ms"),
            "builder: {message}"
        ),
        other => anyhow::bail!("builder: {other:?}, expected a config error"),
    }
    let scenario = kmock::scenario::Scenario::parse("retention_check_interval: 1ms\n")
        .map_err(anyhow::Error::msg)?;
    match scenario.builder()?.start().await {
        Err(kmock::Error::Config(message)) => ensure!(
            message.contains("retention check interval of 1ms"),
            "scenario: {message}"
        ),
        other => anyhow::bail!("scenario: {other:?}, expected a config error"),
    }
    Ok(())
}

#[tokio::test]
async fn past_the_cap_produce_is_refused_with_kafka_storage_error() -> Result<()> {
    let b = batch_size(1000)?;
    // Room for three batches and a half.
    let cap = (7 * b / 2) as u64;
    let (cluster, client) = start(Cluster::builder().max_stored_bytes(cap)).await?;
    create_topic_with_configs(&client, "s", 1, &[("segment.ms", "1")]).await?;
    let now = now_ms();
    for offset in 0..3 {
        produce_at(&client, "s", one_record(now + 10 * offset, 1000), offset).await?;
    }
    let (code, _, _, message) = produce(&client, "s", one_record(now + 30, 1000)).await?;
    code_is("4th Produce", code, Some(ResponseError::KafkaStorageError))?;
    let message = message.unwrap_or_default();
    ensure!(message.contains("cap on stored bytes"), "{message}");
    ensure!(
        log_size(&client, "s").await? as u64 <= cap,
        "stored past the cap"
    );
    // Journaled with its error.
    let codes: Vec<Option<i16>> = cluster
        .journal()
        .entries()
        .iter()
        .filter_map(|e| match &e.request {
            Some(RequestSummary::Produce(p)) => Some(p.partitions[0].error_code),
            _ => None,
        })
        .collect();
    same(
        "journaled Produce error codes",
        codes,
        vec![
            Some(0),
            Some(0),
            Some(0),
            Some(ResponseError::KafkaStorageError.code()),
        ],
    )?;
    // Retention frees room again: DeleteRecords to 2, and the two segments below it go.
    delete_records(&client, "s", 2).await?;
    same(
        "partitions whose log start moved",
        cluster.check_retention(),
        0,
    )?;
    same("log size after the check", log_size(&client, "s").await?, b)?;
    produce_at(&client, "s", one_record(now + 40, 1000), 3).await?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn librdkafka_reads_from_the_log_start_retention_moved() -> Result<()> {
    let (cluster, client) = start(Cluster::builder()).await?;
    let mib = MIB.to_string();
    let configs = [
        ("segment.bytes", mib.as_str()),
        ("retention.bytes", mib.as_str()),
    ];
    create_topic_with_configs(&client, "q", 1, &configs).await?;
    let bootstrap = cluster.bootstrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("linger.ms", "5")
        .create()?;
    // 4 MiB of 1 KiB values: librdkafka's batches fill about four segments.
    let messages = 4096;
    let value = vec![b'x'; 1024];
    let keys: Vec<String> = (0..messages).map(|i| i.to_string()).collect();
    let mut deliveries = Vec::with_capacity(messages);
    for key in &keys {
        let record = FutureRecord::to("q").key(key).payload(&value).partition(0);
        deliveries.push(producer.send(record, Duration::from_secs(60)));
    }
    for d in futures::future::join_all(deliveries).await {
        d.map_err(|(e, _)| e)?;
    }
    let earliest = list_offset(&client, "q", -2).await?;
    let latest = list_offset(&client, "q", -1).await?;
    same("LATEST", latest, messages as i64)?;
    ensure!(earliest > 0, "retention.bytes deleted nothing of 4 MiB");
    let size = log_size(&client, "q").await?;
    // What stays: at least retention.bytes, and less than it plus one segment.
    ensure!(
        (MIB as i64..2 * MIB as i64).contains(&size),
        "log of {size} bytes after retention"
    );
    // A consumer assigned at offset 0 is told OFFSET_OUT_OF_RANGE and resets to the earliest
    // offset, the log start retention left.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "retention-reader")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset("q", 0, Offset::Offset(0))?;
    consumer.assign(&assignment)?;
    let consumer = std::sync::Arc::new(consumer);
    let reader = std::sync::Arc::clone(&consumer);
    let offsets = tokio::task::spawn_blocking(move || -> Result<Vec<i64>> {
        let deadline = std::time::Instant::now() + HANG_GUARD;
        let mut offsets = Vec::new();
        while offsets.len() < (latest - earliest) as usize {
            ensure!(
                std::time::Instant::now() < deadline,
                "hang: read {offsets:?}"
            );
            if let Some(m) = reader.poll(Duration::from_millis(100)) {
                offsets.push(m?.offset());
            }
        }
        Ok(offsets)
    })
    .await??;
    same(
        "first offset read",
        offsets.first().copied(),
        Some(earliest),
    )?;
    same(
        "offsets read",
        offsets,
        (earliest..latest).collect::<Vec<i64>>(),
    )?;
    cluster.shutdown().await;
    Ok(())
}
