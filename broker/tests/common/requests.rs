//! Kafka requests the binary's tests send with kmock-client: group commits, joins and syncs,
//! and idempotent Produce requests.

use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, GroupId, JoinGroupRequest, OffsetCommitRequest, ProduceRequest,
    SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::records::{Compression, Record};

/// An OffsetCommit of `offset` for `group`/`topic`-0 from outside group management
/// (generation -1, no member id), as Kafka takes from an admin client or `assign()` consumer.
pub fn commit_request(group: &str, topic: &str, offset: i64) -> OffsetCommitRequest {
    wide_commit_request(group, topic, 1, offset)
}

/// As [`commit_request`], of `offset` for each of `topic`'s partitions 0..`partitions`.
pub fn wide_commit_request(
    group: &str,
    topic: &str,
    partitions: i32,
    offset: i64,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(group.to_string().into()))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(topic.to_string().into()))
            .with_partitions(
                (0..partitions)
                    .map(|p| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(offset)
                    })
                    .collect(),
            )])
}

/// An OffsetCommit of `topic`-`partition` at `offset` by `member_id` of `group` in `generation`.
pub fn member_commit_request(
    group: &str,
    generation: i32,
    member_id: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(group.to_string().into()))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(member_id.to_string().into())
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(topic.to_string().into()))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)])])
}

/// A consumer's JoinGroup (v1+) of `member_id` (empty on a first join) to `group`, offering
/// the "range" assignor, with 30 s session and rebalance timeouts.
pub fn join_request(group: &str, member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(group.to_string().into()))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(member_id.to_string().into())
        .with_protocol_type("consumer".to_string().into())
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name("range".to_string().into())
            .with_metadata(bytes::Bytes::from_static(&[0, 0, 0, 0, 0, 0]))])
}

/// A SyncGroup of `member_id` in `generation`; `shares` (member id, partitions of `topic`) are
/// the leader's, each encoded as a consumer-protocol assignment (version 0).
pub fn sync_request(
    group: &str,
    generation: i32,
    member_id: &str,
    topic: &str,
    shares: &[(&str, &[i32])],
) -> SyncGroupRequest {
    let assignment = |partitions: &[i32]| {
        let mut buf = bytes::BytesMut::new();
        bytes::BufMut::put_i16(&mut buf, 0);
        ConsumerProtocolAssignment::default()
            .with_assigned_partitions(vec![AssignedTopic::default()
                .with_topic(TopicName(topic.to_string().into()))
                .with_partitions(partitions.to_vec())])
            .encode(&mut buf, 0)
            .expect("an assignment encodes");
        buf.freeze()
    };
    SyncGroupRequest::default()
        .with_group_id(GroupId(group.to_string().into()))
        .with_generation_id(generation)
        .with_member_id(member_id.to_string().into())
        .with_assignments(
            shares
                .iter()
                .map(|(member, partitions)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(member.to_string().into())
                        .with_assignment(assignment(partitions))
                })
                .collect(),
        )
}

/// A Produce (acks all) of one idempotent batch of `count` records to `topic`-`partition` from
/// `producer_id` at `epoch`, sequences from `first`.
pub fn idempotent_produce(
    topic: &str,
    partition: i32,
    producer_id: i64,
    epoch: i16,
    first: i32,
    count: usize,
) -> ProduceRequest {
    idempotent_produce_values(
        topic,
        partition,
        producer_id,
        epoch,
        first,
        &vec![&b"v"[..]; count],
    )
}

/// As [`idempotent_produce`], one record (key `k`) for each of `values`.
pub fn idempotent_produce_values(
    topic: &str,
    partition: i32,
    producer_id: i64,
    epoch: i16,
    first: i32,
    values: &[&[u8]],
) -> ProduceRequest {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            producer_id,
            producer_epoch: epoch,
            sequence: first + i as i32,
            ..kmock_client::record(b"k", value)
        })
        .collect();
    let batch = kmock_client::encode_batch(&records, Compression::None).expect("a batch encodes");
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(topic.to_string().into()))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])])
}

/// A first ConsumerGroupHeartbeat (KIP-848) of member `member_id` joining `group`, subscribed
/// to `topics`.
pub fn consumer_group_join(
    group: &str,
    member_id: &str,
    topics: &[&str],
) -> kafka_protocol::messages::ConsumerGroupHeartbeatRequest {
    kafka_protocol::messages::ConsumerGroupHeartbeatRequest::default()
        .with_group_id(kafka_protocol::messages::GroupId(group.to_owned().into()))
        .with_member_id(member_id.to_owned().into())
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(
            topics
                .iter()
                .map(|t| kafka_protocol::messages::TopicName((*t).to_owned().into()))
                .collect(),
        ))
        .with_topic_partitions(Some(Vec::new()))
}
