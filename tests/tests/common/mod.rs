//! Helpers shared by the wire-level integration tests: a cluster with a client, topic names,
//! and assertions whose messages say what arrived and what was expected.
#![allow(dead_code)]

use std::fmt::Debug;
use std::net::SocketAddr;

use anyhow::{ensure, Result};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use kmock::Cluster;
use kmock_client::Client;

/// A `TopicName` from a `&str`.
pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// A `StrBytes` from a `&str`.
pub fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// An error code as `Name (code)` (`NONE (0)` for no error), for assertion messages.
pub fn err(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(e) => format!("{e:?} ({code})"),
        None => format!("NONE ({code})"),
    }
}

/// Fails with "`what`: got …, expected …" unless `got == expected`.
pub fn same<T: PartialEq + Debug>(what: &str, got: T, expected: T) -> Result<()> {
    ensure!(
        got == expected,
        "{what}: got {got:?}, expected {expected:?}"
    );
    Ok(())
}

/// Fails unless error code `got` is `expected` (`None`: no error), naming both.
pub fn code_is(what: &str, got: i16, expected: Option<ResponseError>) -> Result<()> {
    same(what, err(got), err(expected.map_or(0, |e| e.code())))
}

/// A cluster of `brokers` brokers on 127.0.0.1:0 with `topics` of `partitions` partitions each
/// (topic auto-creation off), and a client connected to its first broker.
pub async fn start(brokers: usize, topics: &[&str], partitions: i32) -> Result<(Cluster, Client)> {
    let mut builder = Cluster::builder()
        .brokers(brokers)
        .auto_create_topics(false);
    for topic in topics {
        builder = builder.topic(topic, partitions);
    }
    let cluster = builder.start().await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    Ok((cluster, client))
}

/// A one-broker cluster emulating Kafka release `version` (`"4.1"`), and a client connected
/// to it.
pub async fn emulating(version: &str) -> Result<(Cluster, Client)> {
    let cluster = Cluster::builder()
        .kafka_version(version.parse()?)
        .start()
        .await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    Ok((cluster, client))
}

/// Waits until the journal's last entry is answered (the journal completes an entry as its
/// answer is sent, so a client may hold the answer before the journal does), with a generous
/// guard that only catches a hang. Requests of one connection are answered in order, so the
/// earlier requests of the same connection are answered too.
pub async fn last_answered(cluster: &Cluster) -> Result<()> {
    let Some(last) = cluster.journal().entries().last().map(|e| e.seq) else {
        return Ok(());
    };
    cluster
        .wait_for(
            |e| e.seq == last && e.response.is_some(),
            std::time::Duration::from_secs(60),
        )
        .await?;
    Ok(())
}

/// The address of broker `node_id` (node ids are 1..=n, in start order).
pub fn broker_addr(cluster: &Cluster, node_id: i32) -> SocketAddr {
    cluster.brokers()[node_id as usize - 1].addr
}

/// A client connected to broker `node_id`.
pub async fn connect_to(cluster: &Cluster, node_id: i32) -> Result<Client> {
    Ok(Client::connect(broker_addr(cluster, node_id)).await?)
}

/// Creates `topic` with `partitions` partitions (replication factor 1) and the topic `configs`
/// over CreateTopics v5, failing unless the answer is NONE.
pub async fn create_topic_with_configs(
    client: &Client,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> Result<()> {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::CreateTopicsRequest;
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(text(k))
                .with_value(Some(text(v)))
        })
        .collect();
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
        .with_configs(configs)]);
    let response = client.send(request, 5).await?;
    code_is("CreateTopics", response.topics[0].error_code, None)
}

pub mod classic_group;
pub mod cluster_ops;
pub mod commit_retries;
pub mod consumer_group;
pub mod exactly_once;
pub mod excerpt;
pub mod groups;
pub mod idempotent;
pub mod jsonl;
pub mod member;
pub mod proxy;
pub mod rdkafka_txn;
pub mod requests;
pub mod transactions;
