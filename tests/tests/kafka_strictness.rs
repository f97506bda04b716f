//! Places where a fake broker is tempted to be more lenient than Kafka, each checked over a
//! real socket against the error Apache Kafka gives.

mod common;

use std::time::Duration;

use anyhow::Result;
use bytes::BytesMut;
use common::{code_is, name, start, text};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, RequestHeader,
};
use kafka_protocol::protocol::{Encodable, HeaderVersion};
use kafka_protocol::ResponseError;
use kmock_client::record;
use tokio::io::AsyncWriteExt;

fn topic(n: &str, partitions: i32, rf: i16, configs: &[(&str, Option<&str>)]) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(n))
        .with_num_partitions(partitions)
        .with_replication_factor(rf)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(text(k))
                        .with_value(v.map(text))
                })
                .collect(),
        )
}

#[tokio::test]
async fn create_topics_reports_the_first_problem_in_kafkas_order() -> Result<()> {
    let (_cluster, client) = start(1, &["taken", "a_b"], 1).await?;
    let cases = [
        (
            topic("bad name!", 1, 9, &[]),
            Some(ResponseError::InvalidTopicException),
        ),
        (
            topic("taken", 1, 9, &[]),
            Some(ResponseError::TopicAlreadyExists),
        ),
        (
            topic("a.b", 1, 1, &[]),
            Some(ResponseError::InvalidTopicException),
        ),
        (
            topic("cfg", 1, 9, &[("retention.ms", Some("-7"))]),
            Some(ResponseError::InvalidConfig),
        ),
        (
            topic("nul", 1, 1, &[("cleanup.policy", None)]),
            Some(ResponseError::InvalidConfig),
        ),
        (
            topic("rf", 1, 9, &[]),
            Some(ResponseError::InvalidReplicationFactor),
        ),
        (
            topic("__cluster_metadata", 1, 1, &[]),
            Some(ResponseError::InvalidRequest),
        ),
        (
            topic("fine", 1, 1, &[("cleanup.policy", Some("compact"))]),
            None,
        ),
    ];
    for (t, expected) in cases {
        let what = format!("CreateTopics {:?}", t.name.0.as_str());
        let answer = client
            .send(CreateTopicsRequest::default().with_topics(vec![t]), 7)
            .await?;
        code_is(&what, answer.topics[0].error_code, expected)?;
    }
    Ok(())
}

#[tokio::test]
async fn delete_topics_naming_a_topic_twice_deletes_nothing() -> Result<()> {
    let (_cluster, client) = start(1, &["d1"], 1).await?;
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topic_names(vec![name("d1"), name("d1")]);
    let answer = client.send(request, 5).await?;
    for r in &answer.responses {
        code_is(
            "DeleteTopics [d1, d1]",
            r.error_code,
            Some(ResponseError::InvalidRequest),
        )?;
    }
    let metadata = client.metadata(Some(&["d1"])).await?;
    code_is("d1 still exists", metadata.topics[0].error_code, None)
}

#[tokio::test]
async fn create_partitions_with_a_count_of_i32_min_is_invalid_partitions() -> Result<()> {
    let (_cluster, client) = start(1, &["p"], 2).await?;
    let grow = CreatePartitionsTopic::default()
        .with_name(name("p"))
        .with_count(i32::MIN)
        .with_assignments(None);
    let answer = client
        .send(
            CreatePartitionsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(vec![grow]),
            3,
        )
        .await?;
    code_is(
        "CreatePartitions to i32::MIN",
        answer.results[0].error_code,
        Some(ResponseError::InvalidPartitions),
    )
}

#[tokio::test]
async fn min_insync_replicas_above_the_replication_factor_is_capped_from_kafka_3_7() -> Result<()> {
    // One replica, min.insync.replicas=2: Kafka 3.7+ caps the minimum at the replica count
    // (Partition.effectiveMinIsr, KAFKA-15583); before, acks=all could never be satisfied.
    for (version, expected) in [
        ("3.7", None),
        ("3.6", Some(ResponseError::NotEnoughReplicas)),
    ] {
        let cluster = kmock::Cluster::builder()
            .kafka_version(version.parse()?)
            .start()
            .await?;
        let client = kmock_client::Client::connect(cluster.brokers()[0].addr).await?;
        let created = client
            .send(
                CreateTopicsRequest::default().with_topics(vec![topic(
                    "isr",
                    1,
                    1,
                    &[("min.insync.replicas", Some("2"))],
                )]),
                7,
            )
            .await?;
        code_is("create isr", created.topics[0].error_code, None)?;
        let all = client.produce("isr", 0, &[record(b"k", b"v")], -1).await?;
        code_is(
            &format!("acks=-1 on Kafka {version}"),
            all.responses[0].partition_responses[0].error_code,
            expected,
        )?;
        let one = client.produce("isr", 0, &[record(b"k", b"v")], 1).await?;
        code_is(
            "acks=1",
            one.responses[0].partition_responses[0].error_code,
            None,
        )?;
        cluster.shutdown().await;
    }
    Ok(())
}

#[tokio::test]
async fn an_incremental_fetch_naming_no_known_session_is_fetch_session_id_not_found() -> Result<()>
{
    let (_cluster, client) = start(1, &["f"], 1).await?;
    let fetch = |epoch: i32| {
        FetchRequest::default()
            .with_session_epoch(epoch)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name("f"))
                .with_partitions(vec![
                    FetchPartition::default().with_partition_max_bytes(1 << 20)
                ])])
    };
    let incremental = client.send(fetch(5), 12).await?;
    code_is(
        "session epoch 5",
        incremental.error_code,
        Some(ResponseError::FetchSessionIdNotFound),
    )?;
    let full = client.send(fetch(-1), 12).await?;
    code_is("session epoch -1 (full fetch)", full.error_code, None)?;
    same_session_id(full.session_id)
}

fn same_session_id(id: i32) -> Result<()> {
    common::same("session id of a full fetch (no session is created)", id, 0)
}

#[tokio::test]
async fn shutdown_finishes_while_a_client_has_stopped_reading() -> Result<()> {
    let (cluster, client) = start(1, &["big"], 1).await?;
    let value = vec![b'x'; 900_000];
    for _ in 0..8 {
        client.produce("big", 0, &[record(b"k", &value)], 1).await?;
    }
    // A raw socket pipelines many 7 MB fetches and never reads an answer.
    let mut socket = tokio::net::TcpStream::connect(cluster.brokers()[0].addr).await?;
    let request = FetchRequest::default()
        .with_max_bytes(50 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("big"))
            .with_partitions(vec![
                FetchPartition::default().with_partition_max_bytes(50 << 20)
            ])]);
    for correlation_id in 0..40 {
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(1)
            .with_request_api_version(12)
            .with_correlation_id(correlation_id)
            .encode(&mut frame, FetchRequest::header_version(12))?;
        request.encode(&mut frame, 12)?;
        socket
            .write_all(&(frame.len() as u32).to_be_bytes())
            .await?;
        socket.write_all(&frame).await?;
    }
    // Once the first Fetch has arrived, its 7 MB answer is being written to a socket nobody
    // reads. This current-thread runtime runs the test again only when the connection task
    // waits, which it does once that answer has filled the socket's buffers.
    cluster
        .wait_for(|e| e.is("Fetch"), Duration::from_secs(30))
        .await?;
    tokio::time::timeout(Duration::from_secs(5), cluster.shutdown())
        .await
        .map_err(|_| anyhow::anyhow!("shutdown waited on a client that stopped reading"))?;
    drop(socket);
    Ok(())
}

#[tokio::test]
async fn shutdown_finishes_with_many_requests_queued_behind_a_slow_one() -> Result<()> {
    let (cluster, _client) = start(1, &["q"], 1).await?;
    cluster.add_rule(kmock::Rule::on(kmock::ApiKey::Metadata).delay(Duration::from_secs(60)))?;
    let mut socket = tokio::net::TcpStream::connect(cluster.brokers()[0].addr).await?;
    // One slow Metadata, then 70 ApiVersions behind it: more than the connection reads ahead.
    let mut frames = BytesMut::new();
    for (correlation_id, (api, version)) in std::iter::once((3i16, 1i16))
        .chain(std::iter::repeat_n((18, 0), 70))
        .enumerate()
    {
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(api)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id as i32)
            .encode(&mut frame, 1)?;
        if api == 3 {
            frame.extend_from_slice(&[0, 0, 0, 0]); // Metadata v1: no topics
        }
        frames.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        frames.extend_from_slice(&frame);
    }
    socket.write_all(&frames).await?;
    // The reader has read ahead of the slow request as far as it goes.
    cluster
        .wait_for(|e| e.correlation_id == Some(64), Duration::from_secs(5))
        .await?;
    tokio::time::timeout(Duration::from_secs(5), cluster.shutdown())
        .await
        .map_err(|_| anyhow::anyhow!("shutdown waited on requests queued behind a slow one"))?;
    // What was read is journaled (the rest waited in the socket, as on a broker that stops
    // reading a busy connection); the slow request was never answered.
    let journal = cluster.journal();
    assert!(
        journal.entries().len() > 64,
        "{} entries journaled",
        journal.entries().len()
    );
    assert!(journal.entries()[0].is("Metadata") && journal.entries()[0].response.is_none());
    Ok(())
}

#[tokio::test]
async fn a_cluster_refuses_to_advertise_an_unspecified_host_or_default_to_zero_partitions() {
    let unspecified = kmock::Cluster::builder()
        .host("0.0.0.0".parse().unwrap())
        .start()
        .await;
    assert!(
        matches!(unspecified, Err(kmock::Error::Config(_))),
        "{unspecified:?}"
    );
    let zero = kmock::Cluster::builder()
        .default_partitions(0)
        .start()
        .await;
    assert!(matches!(zero, Err(kmock::Error::Config(_))), "{zero:?}");
}
