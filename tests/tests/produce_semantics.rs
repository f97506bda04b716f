//! Produce and ListOffsets semantics on a running kmock cluster, over real sockets, at the oldest
//! Produce version (v3), the one kmock-client uses and the newest (v13, topics by id).

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use bytes::{Bytes, BytesMut};
use common::{code_is, err, name, same, start, text};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::*;
use kafka_protocol::records::{Compression, Record, TimestampType};
use kafka_protocol::ResponseError::{self, *};
use kmock::Cluster;
use kmock_client::{decode_records, encode_batch, record, Client, PRODUCE_VERSION};

/// Produce versions every produce test runs at.
const VERSIONS: [i16; 3] = [3, PRODUCE_VERSION, 13];

/// `error` for each of the [`VERSIONS`], to compare a whole run at once.
fn each(error: ResponseError) -> Vec<String> {
    vec![err(error.code()); VERSIONS.len()]
}

/// One broker with a one-partition topic `{prefix}-v{v}` for each of the [`VERSIONS`].
async fn start_per_version(prefix: &str) -> Result<(Cluster, Client)> {
    let topics = VERSIONS.map(|v| format!("{prefix}-v{v}"));
    start(1, &topics.each_ref().map(String::as_str), 1).await
}

fn batch(records: &[Record]) -> Bytes {
    encode_batch(records, Compression::None).expect("a plain batch encodes")
}

fn records(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| record(b"k", format!("v{i}").as_bytes()))
        .collect()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The topic part of a Produce request at `v`: by name, or from v13 by Metadata v12's topic id.
async fn addressed(client: &Client, topic: &str, v: i16) -> Result<TopicProduceData> {
    if v < 13 {
        return Ok(TopicProduceData::default().with_name(name(topic)));
    }
    let metadata = client.metadata(Some(&[topic])).await?;
    let t = metadata
        .topics
        .first()
        .context("Metadata answered no topic")?;
    code_is(&format!("Metadata v12 of {topic}"), t.error_code, None)?;
    Ok(TopicProduceData::default().with_topic_id(t.topic_id))
}

/// Sends `records` for partition `p` at `v`; acks 0 waits for no answer (an empty one is returned).
async fn produce_to(
    client: &Client,
    v: i16,
    topic: TopicProduceData,
    p: i32,
    records: Bytes,
    acks: i16,
) -> Result<ProduceResponse> {
    let data = PartitionProduceData::default()
        .with_index(p)
        .with_records(Some(records));
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![topic.with_partition_data(vec![data])]);
    if acks == 0 {
        client.send_no_response(request, v).await?;
        return Ok(ProduceResponse::default());
    }
    Ok(client.send(request, v).await?)
}

/// [`produce_to`] by name (by id at v13), returning the partition's answer.
async fn produce(
    client: &Client,
    v: i16,
    topic: &str,
    p: i32,
    records: Bytes,
    acks: i16,
) -> Result<PartitionProduceResponse> {
    let topic = addressed(client, topic, v).await?;
    let response = produce_to(client, v, topic, p, records, acks).await?;
    let one = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first());
    Ok(one.cloned().unwrap_or_default())
}

/// The error [`produce`] answers, as `Name (code)`.
async fn produce_error(c: &Client, v: i16, topic: &str, p: i32, records: Bytes) -> Result<String> {
    Ok(err(produce(c, v, topic, p, records, -1).await?.error_code))
}

fn timestamp_types(bytes: &Bytes) -> Result<Vec<TimestampType>> {
    Ok(decode_records(bytes)?
        .iter()
        .map(|r| r.timestamp_type)
        .collect())
}

async fn list_offset(
    client: &Client,
    v: i16,
    topic: &str,
    timestamp: i64,
) -> Result<ListOffsetsPartitionResponse> {
    let partition = ListOffsetsPartition::default().with_timestamp(timestamp);
    let topic = ListOffsetsTopic::default()
        .with_name(name(topic))
        .with_partitions(vec![partition]);
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_timeout_ms(5000)
        .with_topics(vec![topic]);
    let response = client.send(request, v).await?;
    let one = response.topics.first().and_then(|t| t.partitions.first());
    Ok(one
        .context("ListOffsets answer holds no partition")?
        .clone())
}

async fn latest(client: &Client, topic: &str) -> Result<i64> {
    let answer = list_offset(client, 10, topic, -1).await?;
    code_is(&format!("latest of {topic}"), answer.error_code, None)?;
    Ok(answer.offset)
}

/// Every stored batch of partition 0 from offset 0, as raw bytes.
async fn fetch_all(client: &Client, topic: &str) -> Result<Bytes> {
    let response = client
        .fetch(topic, 0, 0, Duration::from_millis(100))
        .await?;
    let p = &response.responses[0].partitions[0];
    code_is(&format!("Fetch of {topic}"), p.error_code, None)?;
    Ok(p.records.clone().unwrap_or_default())
}

/// `(LogAppendTime attribute set, max timestamp)` of every batch in `bytes`.
fn batch_headers(mut bytes: &[u8]) -> Vec<(bool, i64)> {
    let mut headers = Vec::new();
    while bytes.len() >= 61 {
        let length = 12 + i32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
        let attributes = i16::from_be_bytes(bytes[21..23].try_into().unwrap());
        let max_timestamp = i64::from_be_bytes(bytes[35..43].try_into().unwrap());
        headers.push((attributes & 0x08 != 0, max_timestamp));
        bytes = &bytes[length.min(bytes.len())..];
    }
    headers
}

#[tokio::test]
async fn the_broker_assigns_contiguous_offsets_and_refuses_a_client_base_offset() -> Result<()> {
    let (_cluster, client) = start_per_version("offsets").await?;
    for v in VERSIONS {
        let topic = format!("offsets-v{v}");
        let mut answers = Vec::new();
        for (count, client_base) in [(2, 0i64), (3, 42), (3, 0), (1, 0)] {
            // The base offset is outside the CRC: only the broker's rule can refuse it.
            let mut bytes = BytesMut::from(&batch(&records(count))[..]);
            bytes[..8].copy_from_slice(&client_base.to_be_bytes());
            let a = produce(&client, v, &topic, 0, bytes.freeze(), -1).await?;
            answers.push((err(a.error_code), a.base_offset));
        }
        // Kafka's UnifiedLog.analyzeAndValidateRecords: a client's v2 batch must have base offset 0.
        let what = format!("v{v}: (error, base offset) of batches of 2, 3, 3, 1 records written at base offsets 0, 42, 0, 0");
        same(
            &what,
            answers,
            vec![(err(0), 0), (err(87), -1), (err(0), 2), (err(0), 5)],
        )?;
        let fetched = decode_records(&fetch_all(&client, &topic).await?)?;
        let offsets: Vec<i64> = fetched.iter().map(|r| r.offset).collect();
        same(&format!("v{v}: fetched offsets"), offsets, (0..6).collect())?;
    }
    Ok(())
}

#[tokio::test]
async fn acks_zero_gets_no_answer_yet_the_records_are_stored() -> Result<()> {
    let (_cluster, client) = start_per_version("acks0").await?;
    let mut ends = Vec::new();
    for v in VERSIONS {
        let topic = format!("acks0-v{v}");
        produce(&client, v, &topic, 0, batch(&records(2)), 0).await?;
        // Answers come in request order: had the broker answered the produce, this request would
        // fail on an unexpected correlation id; its answer proves the produce was handled.
        ends.push(latest(&client, &topic).await?);
    }
    same(
        "latest offsets after acks=0 produces of 2 records",
        ends,
        vec![2; 3],
    )
}

#[tokio::test]
async fn a_failed_acks_zero_produce_closes_the_connection_as_kafka_does() -> Result<()> {
    // Kafka's KafkaApis.handleProduceRequest closes the connection when an acks=0 produce has an
    // error: the only way to tell such a producer to refresh its metadata.
    let (_cluster, client) = start(1, &["one"], 1).await?;
    produce(&client, PRODUCE_VERSION, "one", 5, batch(&records(1)), 0).await?;
    let closed = client.wait_closed(Duration::from_secs(2)).await;
    let what = "connection closed by the broker after an acks=0 produce to unknown partition 5";
    same(what, closed, true)
}

#[tokio::test]
async fn acks_two_gets_invalid_required_acks_and_stores_nothing() -> Result<()> {
    let (_cluster, client) = start(1, &["acks2"], 1).await?;
    let mut got = Vec::new();
    for v in VERSIONS {
        let a = produce(&client, v, "acks2", 0, batch(&records(1)), 2).await?;
        got.push(err(a.error_code));
    }
    let what = format!("acks=2 at versions {VERSIONS:?}");
    same(&what, got, each(InvalidRequiredAcks))?;
    same("latest offset then", latest(&client, "acks2").await?, 0)
}

#[tokio::test]
async fn a_corrupt_batch_and_two_batches_in_one_partition_are_refused_and_not_stored() -> Result<()>
{
    let (_cluster, client) = start(1, &["bad"], 1).await?;
    let good = batch(&records(2));
    let mut flipped = BytesMut::from(&good[..]);
    *flipped.last_mut().unwrap() ^= 0xff;
    let mut two = BytesMut::from(&good[..]);
    two.extend_from_slice(&good);
    let (flipped, two) = (flipped.freeze(), two.freeze());
    let (mut corrupt, mut double) = (Vec::new(), Vec::new());
    for v in VERSIONS {
        corrupt.push(produce_error(&client, v, "bad", 0, flipped.clone()).await?);
        double.push(produce_error(&client, v, "bad", 0, two.clone()).await?);
    }
    same("last byte flipped", corrupt, each(CorruptMessage))?;
    same("two batches concatenated", double, each(InvalidRecord))?;
    same("latest offset after them", latest(&client, "bad").await?, 0)
}

#[tokio::test]
async fn unknown_topics_topic_ids_and_partitions_are_refused() -> Result<()> {
    let (_cluster, client) = start(1, &["known", "doomed"], 1).await?;
    // A topic id that no longer names a topic: that of a deleted topic.
    let doomed = addressed(&client, "doomed", 13).await?;
    let gone = DeleteTopicState::default().with_name(Some(name("doomed")));
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![gone]);
    let deleted = client.send(request, 6).await?;
    code_is("deleting doomed", deleted.responses[0].error_code, None)?;
    let (mut topics, mut partitions) = (Vec::new(), Vec::new());
    for v in VERSIONS {
        let one = batch(&records(1));
        topics.push(if v >= 13 {
            let response = produce_to(&client, v, doomed.clone(), 0, one.clone(), -1).await?;
            err(response.responses[0].partition_responses[0].error_code)
        } else {
            produce_error(&client, v, "no-such-topic", 0, one.clone()).await?
        });
        partitions.push(produce_error(&client, v, "known", 1, one).await?);
    }
    let mut expected = each(UnknownTopicOrPartition);
    expected[2] = err(UnknownTopicId.code());
    let what = format!("unknown topic, then a deleted topic's id at v13, at {VERSIONS:?}");
    same(&what, topics, expected)?;
    let what = format!("partition 1 of a 1-partition topic at {VERSIONS:?}");
    same(&what, partitions, each(UnknownTopicOrPartition))
}

#[tokio::test]
async fn a_partition_led_by_another_broker_gets_not_leader_or_follower_naming_the_leader(
) -> Result<()> {
    let (cluster, client) = start(3, &["spread"], 3).await?;
    let first = cluster.brokers()[0].node_id;
    let (p, leader) = (0..3)
        .map(|p| (p, cluster.leader("spread", p).unwrap()))
        .find(|&(_, leader)| leader != first)
        .context("every partition is led by the first broker")?;
    let addr = cluster.brokers()[leader as usize - 1].addr;
    let endpoint = (leader, addr.ip().to_string(), i32::from(addr.port()));
    for v in VERSIONS {
        let topic = addressed(&client, "spread", v).await?;
        let response = produce_to(&client, v, topic, p, batch(&records(1)), -1).await?;
        let a = &response.responses[0].partition_responses[0];
        let what = format!("v{v}: partition {p} (led by {leader}) sent to broker {first}");
        code_is(&what, a.error_code, Some(NotLeaderOrFollower))?;
        if v >= 10 {
            let named = a.current_leader.leader_id.0;
            same(&format!("v{v}: current_leader"), named, leader)?;
            let endpoints = response.node_endpoints.iter();
            let endpoints: Vec<_> = endpoints
                .map(|e| (e.node_id.0, e.host.to_string(), e.port))
                .collect();
            let what = format!("v{v}: node_endpoints");
            same(&what, endpoints, vec![endpoint.clone()])?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn log_append_time_topics_are_stamped_by_the_broker_and_create_time_topics_answer_minus_one(
) -> Result<()> {
    let (_cluster, client) = start(1, &["create-time"], 1).await?;
    let config = CreatableTopicConfig::default()
        .with_name(text("message.timestamp.type"))
        .with_value(Some(text("LogAppendTime")));
    let topic = CreatableTopic::default()
        .with_name(name("append-time"))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(vec![config]);
    let request = CreateTopicsRequest::default().with_topics(vec![topic]);
    let created = client.send(request, 7).await?;
    code_is("creating append-time", created.topics[0].error_code, None)?;
    let (mut stamps, mut create_times) = (Vec::new(), Vec::new());
    for v in VERSIONS {
        let mut old = record(b"k", b"v");
        old.timestamp = 1000;
        let before = now_ms();
        let a = produce(&client, v, "append-time", 0, batch(&[old.clone()]), -1).await?;
        let t = a.log_append_time_ms;
        code_is(&format!("v{v}: LogAppendTime produce"), a.error_code, None)?;
        let what = format!("v{v}: log_append_time_ms {t} within {before}..=now");
        same(&what, (before..=now_ms()).contains(&t), true)?;
        stamps.push((true, t));
        let a = produce(&client, v, "create-time", 0, batch(&[old]), -1).await?;
        create_times.push(a.log_append_time_ms);
    }
    same("CreateTime log_append_time_ms", create_times, vec![-1; 3])?;
    let bytes = fetch_all(&client, "append-time").await?;
    let headers = batch_headers(&bytes);
    same("(LogAppendTime bit, max timestamp)", headers, stamps)?;
    let types = timestamp_types(&bytes)?;
    same(
        "LogAppendTime types",
        types,
        vec![TimestampType::LogAppend; 3],
    )?;
    let types = timestamp_types(&fetch_all(&client, "create-time").await?)?;
    same("CreateTime types", types, vec![TimestampType::Creation; 3])
}

#[tokio::test]
async fn list_offsets_finds_earliest_latest_by_timestamp_and_max_timestamp_offsets() -> Result<()> {
    let (_cluster, client) = start(1, &["times"], 1).await?;
    // One record per batch; the last (2500) makes the largest timestamp not the last record's.
    for ts in [1000, 2000, 3000, 2500] {
        let mut r = record(b"k", b"v");
        r.timestamp = ts;
        let a = produce(&client, PRODUCE_VERSION, "times", 0, batch(&[r]), -1).await?;
        code_is(&format!("producing timestamp {ts}"), a.error_code, None)?;
    }
    for v in [1, 10] {
        // Timestamp asked: earliest, latest, three real ones, max timestamp (v7+).
        let asked = [-2, -1, 1500, 2600, 9999, -3];
        let asked = &asked[..if v >= 7 { 6 } else { 5 }];
        let mut got = Vec::new();
        for &ts in asked {
            let a = list_offset(&client, v, "times", ts).await?;
            got.push((ts, err(a.error_code), a.offset, a.timestamp));
        }
        let mut expected = vec![(-2, 0, -1), (-1, 4, -1), (1500, 1, 2000), (2600, 2, 3000)];
        expected.extend([(9999, -1, -1), (-3, 2, 3000)]);
        let expected = expected.into_iter().map(|(ts, o, t)| (ts, err(0), o, t));
        let what = format!("ListOffsets v{v} (timestamp asked, error, offset, timestamp)");
        same(&what, got, expected.take(asked.len()).collect())?;
    }
    Ok(())
}
