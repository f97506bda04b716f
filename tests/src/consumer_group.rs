//! KIP-848 consumer group requests as the Java client and librdkafka send them
//! (ConsumerGroupHeartbeat with a member id the client made, v9 OffsetCommit and OffsetFetch
//! with a member epoch), built once for the conformance cases and the wire tests.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    consumer_protocol_assignment, consumer_protocol_subscription, ConsumerGroupHeartbeatRequest,
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, OffsetCommitRequest,
    OffsetFetchRequest,
};
use kafka_protocol::protocol::Encodable;
use uuid::Uuid;

use crate::conformance::{name, text};

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

/// An OffsetCommit (v9 fields) of `offset` for `partitions` of `topic` by `member_id` at
/// member epoch `epoch`.
pub fn offset_commit(
    group: &str,
    (member_id, epoch): (&str, i32),
    topic: &str,
    partitions: &[i32],
    offset: i64,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
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
            )])
}

/// An OffsetFetch (v9 fields) of partition 0 of `topic` by `member_id` at member epoch
/// `epoch`.
pub fn offset_fetch(
    group: &str,
    (member_id, epoch): (&str, i32),
    topic: &str,
) -> OffsetFetchRequest {
    OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(Some(text(member_id)))
        .with_member_epoch(epoch)
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(name(topic))
            .with_partition_indexes(vec![0])]))])
}

/// A classic member's consumer protocol subscription (v1) to `topic`, owning `owned` of its
/// partitions (what a cooperative member sends when it rejoins), as JoinGroup metadata.
pub fn classic_subscription(topic: &str, owned: &[i32]) -> Bytes {
    let sub = ConsumerProtocolSubscription::default()
        .with_topics(vec![text(topic)])
        .with_owned_partitions(if owned.is_empty() {
            Vec::new()
        } else {
            vec![consumer_protocol_subscription::TopicPartition::default()
                .with_topic(name(topic))
                .with_partitions(owned.to_vec())]
        });
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    sub.encode(&mut buf, 1).expect("a v1 subscription encodes");
    buf.freeze()
}

/// A consumer protocol assignment (v1) of `partitions` of `topic`, as a leader's SyncGroup
/// gives it.
pub fn classic_assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let a = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
        consumer_protocol_assignment::TopicPartition::default()
            .with_topic(name(topic))
            .with_partitions(partitions.to_vec()),
    ]);
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    a.encode(&mut buf, 1).expect("a v1 assignment encodes");
    buf.freeze()
}
