//! Produce: partitions named twice, odd record sets (empty, null, legacy magic, unknown
//! compression, transactional and control batches, several batches, a bad CRC), topic timestamp
//! bounds and idempotent sequences.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProduceRequest};
use kafka_protocol::ResponseError;
use kmock_client::{record, Client};

use super::batches::{corrupt, legacy, record_at, v2, with_attributes, with_magic, with_producer};
use super::{answered, case, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(produce_same_partition_twice),
    case!(produce_same_topic_twice),
    case!(produce_unknown_partition_and_topic),
    case!(produce_acks_outside_kafkas_three),
    // No case sends null records: Kafka 4.4 never answers that Produce (a NullPointerException
    // in `ProduceRequest.toString` while `KafkaApis.handleError` logs the first one), and a
    // case cannot tell "no answer" from "slow" without a time bound.
    case!(produce_empty_records),
    case!(produce_legacy_magic),
    case!(produce_unknown_magic),
    case!(produce_unknown_compression),
    case!(produce_two_batches_in_one_partition),
    case!(produce_bad_crc),
    case!(produce_transactional_batch_without_a_transactional_id),
    case!(produce_control_batch),
    case!(produce_timestamp_before_max),
    case!(produce_timestamp_after_max),
    case!(produce_log_append_time),
    case!(produce_idempotent_sequences),
];

/// One partition's record set in a Produce: (topic full name, partition, records).
type Part = (String, i32, Option<Bytes>);

/// Produce v9 of `parts` (each its own topic entry) with `acks`: one line per partition answer,
/// `produce NAME/P: ERROR` with the base offset when appended, sorted (Kafka answers the topics
/// of a request in hash order).
pub(super) async fn produce(
    cx: &Ctx,
    client: &Client,
    parts: Vec<Part>,
    acks: i16,
) -> Result<Lines> {
    let topics = parts
        .into_iter()
        .map(|(full, partition, records)| {
            TopicProduceData::default()
                .with_name(name(&full))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(records)])
        })
        .collect();
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(topics);
    let Some(answer) = answered(client.send(request, 9).await)? else {
        return Ok(vec!["connection closed".to_owned()]);
    };
    let mut lines = Vec::new();
    for t in &answer.responses {
        for p in &t.partition_responses {
            let offset = if p.error_code == 0 {
                format!(" at {}", p.base_offset)
            } else {
                String::new()
            };
            lines.push(format!(
                "produce {}/{}: {}{offset}",
                cx.short(&t.name.0),
                p.index,
                err(p.error_code)
            ));
        }
    }
    lines.sort();
    Ok(lines)
}

/// `what:` and the lines of a Produce ([`produce`]) of `records` to partition 0 of `full` with
/// `acks`.
pub(super) async fn produce_labelled(
    cx: &Ctx,
    client: &Client,
    what: &str,
    full: &str,
    records: impl Into<Bytes>,
    acks: i16,
) -> Result<Lines> {
    let mut lines = vec![format!("{what}:")];
    let parts = vec![(full.to_owned(), 0, Some(records.into()))];
    lines.extend(produce(cx, client, parts, acks).await?);
    Ok(lines)
}

/// InitProducerId v4 without a transactional id, with `producer_id` and `producer_epoch`
/// (-1 and -1 for a new producer).
pub(super) async fn init_producer_id_with(
    client: &Client,
    producer_id: i64,
    producer_epoch: i16,
) -> Result<InitProducerIdResponse> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(producer_id.into())
        .with_producer_epoch(producer_epoch);
    Ok(client.send(request, 4).await?)
}

/// One record batch of one record.
fn one() -> Result<Option<Bytes>> {
    Ok(Some(Bytes::from(v2(&[record(b"k", b"v")])?)))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_millis() as i64
}

/// A client and a ready one-partition topic (`t`) of this case with `configs`.
async fn topic(cx: &Ctx, configs: &[(&str, &str)]) -> Result<(Client, String)> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, configs).await?;
    Ok((client, full))
}

async fn produce_same_partition_twice(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(&full))
            .with_partition_data(vec![
                PartitionProduceData::default()
                    .with_index(0)
                    .with_records(one()?),
                PartitionProduceData::default()
                    .with_index(0)
                    .with_records(one()?),
            ])]);
    let answer = client.send(request, 9).await?;
    let mut lines: Lines = answer.responses[0]
        .partition_responses
        .iter()
        .map(|p| format!("partition {}: {}", p.index, err(p.error_code)))
        .collect();
    lines.extend(produce(&cx, &client, vec![(full, 0, one()?)], 1).await?);
    Ok(lines)
}

async fn produce_same_topic_twice(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let parts = vec![(full.clone(), 0, one()?), (full.clone(), 0, one()?)];
    let mut lines = produce(&cx, &client, parts, 1).await?;
    lines.extend(produce(&cx, &client, vec![(full, 0, one()?)], 1).await?);
    Ok(lines)
}

async fn produce_unknown_partition_and_topic(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let parts = vec![
        (full.clone(), 1, one()?),
        (full, -1, one()?),
        (cx.topic("nobody"), 0, one()?),
        ("bad name!".to_owned(), 0, one()?),
    ];
    produce(&cx, &client, parts, 1).await
}

async fn produce_acks_outside_kafkas_three(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let mut lines = Vec::new();
    for acks in [2, -2] {
        let batch = v2(&[record(b"k", b"v")])?;
        let what = format!("acks {acks}");
        lines.extend(produce_labelled(&cx, &client, &what, &full, batch, acks).await?);
    }
    Ok(lines)
}

async fn produce_empty_records(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let mut lines = produce(&cx, &client, vec![(full.clone(), 0, Some(Bytes::new()))], 1).await?;
    lines.extend(produce(&cx, &client, vec![(full, 0, one()?)], 1).await?);
    Ok(lines)
}

async fn produce_legacy_magic(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let mut lines = Vec::new();
    for magic in [0, 1] {
        let set = legacy(magic, b"k", b"v", now_ms());
        let what = format!("magic {magic}");
        lines.extend(produce_labelled(&cx, &client, &what, &full, set, 1).await?);
    }
    Ok(lines)
}

/// A v2 batch whose magic byte says 3 (or 255), CRC intact.
async fn produce_unknown_magic(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let mut lines = Vec::new();
    for magic in [3, 255] {
        let batch = with_magic(v2(&[record(b"k", b"v")])?, magic);
        let what = format!("magic {magic}");
        lines.extend(produce_labelled(&cx, &client, &what, &full, batch, 1).await?);
    }
    Ok(lines)
}

async fn produce_unknown_compression(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let mut lines = Vec::new();
    for codec in [5, 6, 7] {
        let batch = with_attributes(v2(&[record(b"k", b"v")])?, codec);
        let what = format!("codec {codec}");
        lines.extend(produce_labelled(&cx, &client, &what, &full, batch, 1).await?);
    }
    Ok(lines)
}

async fn produce_two_batches_in_one_partition(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let mut two = v2(&[record(b"k", b"a")])?;
    two.extend(v2(&[record(b"k", b"b")])?);
    produce(&cx, &client, vec![(full, 0, Some(two.into()))], 1).await
}

async fn produce_bad_crc(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let bad = corrupt(v2(&[record(b"k", b"v")])?);
    produce(&cx, &client, vec![(full, 0, Some(bad.into()))], 1).await
}

/// A transactional batch (attributes bit 4) in a Produce naming no transactional id, once with
/// no producer id and once with an idempotent producer's.
async fn produce_transactional_batch_without_a_transactional_id(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let plain = with_attributes(v2(&[record(b"k", b"v")])?, 0x10);
    let mut lines = produce(
        &cx,
        &client,
        vec![(full.clone(), 0, Some(plain.into()))],
        -1,
    )
    .await?;
    let (pid, epoch) = init_producer_id(&client).await?;
    let with_pid = with_attributes(
        with_producer(v2(&[record(b"k", b"v")])?, pid, epoch, 0),
        0x10,
    );
    lines.extend(produce(&cx, &client, vec![(full, 0, Some(with_pid.into()))], -1).await?);
    Ok(lines)
}

/// A control batch from a client: transactional (attributes bits 4 and 5, as every control
/// batch Kafka writes) and not (bit 5 alone).
async fn produce_control_batch(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let mut lines = Vec::new();
    for attributes in [0x30, 0x20] {
        let marker = v2(&[record(b"\0\0\0\0", b"\0\0\0\0\0\0")])?;
        let control = with_attributes(marker, attributes);
        let what = format!("attributes {attributes:#x}");
        lines.extend(produce_labelled(&cx, &client, &what, &full, control, -1).await?);
    }
    Ok(lines)
}

/// A client and a one-partition topic with `configs`, or the line saying the broker refused
/// them.
async fn topic_or_refusal(
    cx: &Ctx,
    configs: &[(&str, &str)],
) -> Result<Result<(Client, String), Lines>> {
    let client = cx.connect().await?;
    Ok(match cx.try_create(&client, "t", 1, configs).await? {
        Ok(full) => Ok((client, full)),
        Err(error) => Err(vec![format!("create t: {error}")]),
    })
}

/// Records an hour, a day and a year old, and one now, against `before.max.ms` of one hour.
async fn produce_timestamp_before_max(cx: Ctx) -> Result<Lines> {
    let (client, full) =
        match topic_or_refusal(&cx, &[("message.timestamp.before.max.ms", "3600000")]).await? {
            Ok(topic) => topic,
            Err(refused) => return Ok(refused),
        };
    let mut lines = Vec::new();
    for (what, age) in [
        ("a day old", 86_400_000),
        ("a year old", 31_536_000_000),
        ("now", 0),
    ] {
        let batch = v2(&[record_at(b"k", b"v", now_ms() - age)])?;
        lines.extend(produce_labelled(&cx, &client, what, &full, batch, 1).await?);
    }
    Ok(lines)
}

/// Records a day ahead and now against `after.max.ms` of one hour, and one old record (no
/// lower bound by default).
async fn produce_timestamp_after_max(cx: Ctx) -> Result<Lines> {
    let (client, full) =
        match topic_or_refusal(&cx, &[("message.timestamp.after.max.ms", "3600000")]).await? {
            Ok(topic) => topic,
            Err(refused) => return Ok(refused),
        };
    let mut lines = Vec::new();
    for (what, ahead) in [
        ("a day ahead", 86_400_000),
        ("now", 0),
        ("a year old", -31_536_000_000),
    ] {
        let batch = v2(&[record_at(b"k", b"v", now_ms() + ahead)])?;
        lines.extend(produce_labelled(&cx, &client, what, &full, batch, 1).await?);
    }
    Ok(lines)
}

/// A topic with LogAppendTime stamps the append time whatever the record says, and says so in
/// the answer; the timestamp bounds do not apply.
async fn produce_log_append_time(cx: Ctx) -> Result<Lines> {
    let configs = [
        ("message.timestamp.type", "LogAppendTime"),
        ("message.timestamp.before.max.ms", "3600000"),
    ];
    let (client, full) = match topic_or_refusal(&cx, &configs).await? {
        Ok(topic) => topic,
        Err(refused) => return Ok(refused),
    };
    let batch = v2(&[record_at(b"k", b"v", 1000)])?;
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(&full))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch.into()))])]);
    let answer = client.send(request, 9).await?;
    let p = &answer.responses[0].partition_responses[0];
    Ok(vec![format!(
        "{} at {}, log append time {}",
        err(p.error_code),
        p.base_offset,
        if p.log_append_time_ms > 0 {
            "set"
        } else {
            "unset"
        }
    )])
}

/// An idempotent producer's id and epoch (InitProducerId v4, no transactional id), asked again
/// while the broker answers COORDINATOR_LOAD_IN_PROGRESS (a Kafka that has just started has no
/// block of producer ids from its controller yet), as clients do.
pub(super) async fn init_producer_id(client: &Client) -> Result<(i64, i16)> {
    loop {
        let answer = init_producer_id_with(client, -1, -1).await?;
        if answer.error_code == ResponseError::CoordinatorLoadInProgress.code() {
            // The broker's retry hint; the case's hang guard bounds the loop.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        anyhow::ensure!(
            answer.error_code == 0,
            "InitProducerId: {}",
            err(answer.error_code)
        );
        return Ok((answer.producer_id.0, answer.producer_epoch));
    }
}

/// Sequences 0, 0 again (a duplicate), 5 (a gap), 1, and 1 at a later epoch.
async fn produce_idempotent_sequences(cx: Ctx) -> Result<Lines> {
    let (client, full) = topic(&cx, &[]).await?;
    let (pid, epoch) = init_producer_id(&client).await?;
    let mut lines = vec![format!("epoch {epoch}")];
    for (what, e, sequence) in [
        ("seq 0", epoch, 0),
        ("seq 0 again", epoch, 0),
        ("seq 5", epoch, 5),
        ("seq 1", epoch, 1),
        ("seq 1 at epoch+1", epoch + 1, 1),
        ("seq 0 at epoch+1", epoch + 1, 0),
        ("seq 0 at epoch", epoch, 0),
    ] {
        let batch = with_producer(v2(&[record(b"k", b"v")])?, pid, e, sequence);
        lines.extend(produce_labelled(&cx, &client, what, &full, batch, -1).await?);
    }
    Ok(lines)
}
