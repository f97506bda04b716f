//! kmock-client traffic every figure shares: ApiVersions, partition leaders, and Produce
//! requests encoded once and sent pipelined. The same API versions go to every peer (versions
//! all three implement), so each answers the same bytes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use bytes::{Bytes, BytesMut};
use futures::stream::{self, StreamExt, TryStreamExt};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::Compression;
use kmock_client::{encode_batch, record, Client};

/// Produce v9: flexible, and implemented by all three (librdkafka's mock v0–10, kmock v3–13).
pub const PRODUCE_VERSION: i16 = 9;

/// Metadata v8: the newest before flexible versions, whose answers from librdkafka's mock (v9–12)
/// end with one byte more than the schema has, which kmock-client refuses.
pub const METADATA_VERSION: i16 = 8;

/// Metadata for `topics` (`None`: every topic), without creating any.
///
/// # Errors
/// A connection failure or an undecodable answer.
pub async fn metadata(client: &Client, topics: Option<&[&str]>) -> Result<MetadataResponse> {
    let topics = topics.map(|names| {
        names
            .iter()
            .map(|name| {
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string((*name).to_owned()))))
            })
            .collect()
    });
    let request = MetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(false);
    Ok(client.send(request, METADATA_VERSION).await?)
}

/// Sends ApiVersions v0 (which every broker answers) and checks it is answered without error.
///
/// # Errors
/// A connection failure, or an error code in the answer.
pub async fn api_versions(client: &Client) -> Result<()> {
    let answer = client.send(ApiVersionsRequest::default(), 0).await?;
    ensure!(
        answer.error_code == 0,
        "ApiVersions answered error {}",
        answer.error_code
    );
    Ok(())
}

/// The address of each partition's leader of `topic`, by partition index, from Metadata.
///
/// # Errors
/// A connection failure, a topic error, or a leader that is no broker of the answer.
pub async fn leaders(client: &Client, topic: &str) -> Result<Vec<SocketAddr>> {
    let answer = metadata(client, Some(&[topic])).await?;
    let brokers: HashMap<i32, SocketAddr> = answer
        .brokers
        .iter()
        .map(|b| {
            let addr = format!("{}:{}", b.host.as_str(), b.port);
            Ok((b.node_id.0, addr.parse().with_context(|| addr.clone())?))
        })
        .collect::<Result<_>>()?;
    let topic_answer = answer
        .topics
        .first()
        .ok_or_else(|| anyhow!("Metadata names no topic"))?;
    ensure!(
        topic_answer.error_code == 0,
        "Metadata for {topic}: error {}",
        topic_answer.error_code
    );
    let mut partitions: Vec<_> = topic_answer
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    partitions.sort_unstable();
    partitions
        .into_iter()
        .map(|(index, leader)| {
            brokers
                .get(&leader)
                .copied()
                .ok_or_else(|| anyhow!("{topic}-{index}: leader {leader} is not in Metadata"))
        })
        .collect()
}

/// One uncompressed record batch of `count` records, each key `key` and a value of
/// `value_bytes` bytes.
///
/// # Errors
/// When the batch does not encode.
pub fn batch(count: usize, value_bytes: usize) -> Result<Bytes> {
    let value = vec![b'x'; value_bytes];
    let records: Vec<_> = (0..count).map(|_| record(b"key", &value)).collect();
    Ok(encode_batch(&records, Compression::None)?)
}

/// The largest batch of records with `value_bytes`-byte values that fits in `max_bytes`
/// (Kafka's default `max.message.bytes` is 1,048,588).
///
/// # Errors
/// When the batch does not encode.
pub fn batch_up_to(max_bytes: usize, value_bytes: usize) -> Result<Bytes> {
    let one = batch(1, value_bytes)?.len();
    let two = batch(2, value_bytes)?.len();
    let per_record = two - one;
    let mut count = (max_bytes - (one - per_record)) / per_record;
    loop {
        let encoded = batch(count, value_bytes)?;
        if encoded.len() <= max_bytes {
            return Ok(encoded);
        }
        count -= 1;
    }
}

/// The body of a Produce v9 request (acks=all) of `batch` to `topic`-`partition`, encoded once
/// so that sending it costs the client one copy.
///
/// # Errors
/// When it does not encode.
pub fn produce_body(topic: &str, partition: i32, batch: &Bytes) -> Result<Bytes> {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch.clone()))])]);
    let mut body = BytesMut::new();
    request.encode(&mut body, PRODUCE_VERSION)?;
    Ok(body.freeze())
}

/// Sends one pre-encoded Produce body and checks every partition was appended.
///
/// # Errors
/// A connection failure, an undecodable answer, or an error code in it.
pub async fn produce(client: &Client, body: &[u8]) -> Result<()> {
    let mut answer = client
        .send_frame(
            ApiKey::Produce as i16,
            PRODUCE_VERSION,
            ProduceRequest::header_version(PRODUCE_VERSION),
            ProduceResponse::header_version(PRODUCE_VERSION),
            body,
        )
        .await?;
    let answer = ProduceResponse::decode(&mut answer, PRODUCE_VERSION)?;
    for topic in &answer.responses {
        for p in &topic.partition_responses {
            if p.error_code != 0 {
                bail!(
                    "Produce to {}-{}: error {}",
                    topic.name.as_str(),
                    p.index,
                    p.error_code
                );
            }
        }
    }
    Ok(())
}

/// One connection per target (address, pre-encoded Produce body), all connected first; then each
/// sends `requests` copies of its body keeping `in_flight` unanswered. The time from the first
/// request to the last answer.
///
/// # Errors
/// The first failure of any connection or request.
pub async fn produce_pipelined(
    targets: &[(SocketAddr, Bytes)],
    requests: usize,
    in_flight: usize,
) -> Result<Duration> {
    let mut clients = Vec::with_capacity(targets.len());
    for (addr, body) in targets {
        clients.push((Client::connect(addr).await?, body));
    }
    let started = Instant::now();
    let connections = clients.iter().map(|(client, body)| {
        stream::iter(0..requests)
            .map(|_| produce(client, body))
            .buffer_unordered(in_flight)
            .try_for_each(|()| async { Ok(()) })
    });
    futures::future::try_join_all(connections).await?;
    Ok(started.elapsed())
}

/// Targets for `topic` with `partitions` partitions: for each partition, its leader's address
/// (asked from `bootstrap`) and a Produce body of `batch` for it.
///
/// # Errors
/// As [`leaders`] and [`produce_body`].
pub async fn targets(
    bootstrap: SocketAddr,
    topic: &str,
    batch: &Bytes,
) -> Result<Vec<(SocketAddr, Bytes)>> {
    let client = Client::connect(bootstrap).await?;
    let leaders = leaders(&client, topic).await?;
    leaders
        .into_iter()
        .enumerate()
        .map(|(p, addr)| Ok((addr, produce_body(topic, p as i32, batch)?)))
        .collect()
}
