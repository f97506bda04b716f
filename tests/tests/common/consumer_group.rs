//! KIP-848 consumer groups on the wire: ConsumerGroupHeartbeat requests as the Java client
//! and librdkafka send them (v1, a member id the client made), and v9 OffsetCommit and
//! OffsetFetch with a member epoch.

use std::collections::BTreeSet;

use anyhow::Result;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::*;
use kmock_client::Client;
use uuid::Uuid;

use super::{err, name, text};

/// A first heartbeat (epoch 0) of `member_id` subscribing to `topics`, rebalance timeout 30 s.
pub fn join(group: &str, member_id: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member_id))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| name(t)).collect()))
        .with_topic_partitions(Some(Vec::new()))
}

/// A heartbeat of `member_id` at `epoch` listing `owned` partitions of `topic` (`None`: the
/// field left null, as a heartbeat with nothing changed sends it).
pub fn beat(
    group: &str,
    member_id: &str,
    epoch: i32,
    topic: Uuid,
    owned: Option<&BTreeSet<i32>>,
) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member_id))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
        .with_topic_partitions(owned.map(|ps| {
            vec![TopicPartitions::default()
                .with_topic_id(topic)
                .with_partitions(ps.iter().copied().collect())]
        }))
}

/// Sends a heartbeat at v1.
pub async fn send(
    client: &Client,
    request: ConsumerGroupHeartbeatRequest,
) -> Result<ConsumerGroupHeartbeatResponse> {
    Ok(client.send(request, 1).await?)
}

/// The partitions of `topic` an answer assigns (`None`: no assignment in the answer).
pub fn assigned(answer: &ConsumerGroupHeartbeatResponse, topic: Uuid) -> Option<BTreeSet<i32>> {
    answer.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .filter(|t| t.topic_id == topic)
            .flat_map(|t| t.partitions.iter().copied())
            .collect()
    })
}

/// One answer in words, for assertion messages.
pub fn said(answer: &ConsumerGroupHeartbeatResponse) -> String {
    format!(
        "{} epoch {} member {:?} message {:?} assignment {:?}",
        err(answer.error_code),
        answer.member_epoch,
        answer.member_id.as_ref().map(|m| m.as_str()),
        answer.error_message.as_ref().map(|m| m.as_str()),
        answer.assignment.as_ref().map(|a| a
            .topic_partitions
            .iter()
            .map(|t| t.partitions.clone())
            .collect::<Vec<_>>()),
    )
}

/// The error of each partition of a v9 OffsetCommit of `offset` for `partitions` of `topic`.
pub async fn commit(
    client: &Client,
    group: &str,
    member_id: &str,
    epoch: i32,
    topic: &str,
    partitions: &[i32],
    offset: i64,
) -> Result<Vec<String>> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(epoch)
        .with_member_id(text(member_id))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|p| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(*p)
                            .with_committed_offset(offset)
                    })
                    .collect(),
            )]);
    let answer = client.send(request, 9).await?;
    Ok(answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| err(p.error_code)))
        .collect())
}

/// The group-level error of a v9 OffsetFetch of partition 0 of `topic` by `member_id` at
/// `epoch`.
pub async fn fetch_error(
    client: &Client,
    group: &str,
    member_id: &str,
    epoch: i32,
    topic: &str,
) -> Result<String> {
    let request =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text(group)))
            .with_member_id(Some(text(member_id)))
            .with_member_epoch(epoch)
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(name(topic))
                .with_partition_indexes(vec![0])]))]);
    let answer = client.send(request, 9).await?;
    Ok(err(answer.groups[0].error_code))
}
