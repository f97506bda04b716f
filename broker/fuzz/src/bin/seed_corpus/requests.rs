//! One request of every API kmock implements, at each version it implements.

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;
use kmock_fuzz::TOPIC;

use super::{batch, text, topic_name, Seeds};

impl Seeds {
    /// Requests of `api`, the first that encodes at a version is its seed there.
    pub(super) fn requests(&self, api: ApiKey, version: i16) -> Vec<RequestKind> {
        use RequestKind as R;
        let name = topic_name;
        let id = self.topic_id;
        let group = || GroupId(text(&self.group));
        let codec = [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ][version as usize % 5];
        let codec = if version < 7 && codec == Compression::Zstd {
            Compression::Lz4
        } else {
            codec
        };
        match api {
            ApiKey::Produce => {
                let partition = vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(3, codec, None)))];
                let request = |topic: TopicProduceData| {
                    R::Produce(
                        ProduceRequest::default()
                            .with_acks(-1)
                            .with_timeout_ms(5_000)
                            .with_topic_data(vec![topic.with_partition_data(partition.clone())]),
                    )
                };
                vec![
                    request(TopicProduceData::default().with_name(name())),
                    request(TopicProduceData::default().with_topic_id(id)),
                ]
            }
            ApiKey::Fetch => {
                let partitions = vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)];
                let request = |topic: FetchTopic| {
                    R::Fetch(
                        FetchRequest::default()
                            .with_replica_id(BrokerId(-1))
                            .with_max_wait_ms(500)
                            .with_min_bytes(1)
                            .with_max_bytes(1 << 20)
                            .with_session_epoch(-1)
                            .with_topics(vec![topic.with_partitions(partitions.clone())]),
                    )
                };
                vec![
                    request(FetchTopic::default().with_topic(name())),
                    request(FetchTopic::default().with_topic_id(id)),
                ]
            }
            ApiKey::ListOffsets => vec![R::ListOffsets(
                ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![ListOffsetsTopic::default()
                        .with_name(name())
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-1)])]),
            )],
            ApiKey::Metadata => vec![R::Metadata(MetadataRequest::default().with_topics(Some(
                vec![MetadataRequestTopic::default().with_name(Some(name()))],
            )))],
            ApiKey::OffsetCommit => {
                let partitions = vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(3)];
                let request = |topic: OffsetCommitRequestTopic| {
                    R::OffsetCommit(
                        OffsetCommitRequest::default()
                            .with_group_id(group())
                            .with_generation_id_or_member_epoch(-1)
                            .with_topics(vec![topic.with_partitions(partitions.clone())]),
                    )
                };
                vec![
                    request(OffsetCommitRequestTopic::default().with_name(name())),
                    request(OffsetCommitRequestTopic::default().with_topic_id(id)),
                ]
            }
            ApiKey::OffsetFetch => vec![
                R::OffsetFetch(
                    OffsetFetchRequest::default()
                        .with_group_id(group())
                        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                            .with_name(name())
                            .with_partition_indexes(vec![0, 1])])),
                ),
                R::OffsetFetch(OffsetFetchRequest::default().with_groups(vec![
                    OffsetFetchRequestGroup::default()
                        .with_group_id(group())
                        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                            .with_name(name())
                            .with_partition_indexes(vec![0, 1])])),
                ])),
                R::OffsetFetch(OffsetFetchRequest::default().with_groups(vec![
                    OffsetFetchRequestGroup::default()
                        .with_group_id(group())
                        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                            .with_topic_id(id)
                            .with_partition_indexes(vec![0, 1])])),
                ])),
            ],
            ApiKey::FindCoordinator => vec![
                R::FindCoordinator(FindCoordinatorRequest::default().with_key(text(&self.group))),
                R::FindCoordinator(
                    FindCoordinatorRequest::default()
                        .with_coordinator_keys(vec![text(&self.group)]),
                ),
            ],
            ApiKey::JoinGroup => vec![R::JoinGroup(self.join(""))],
            ApiKey::Heartbeat => vec![R::Heartbeat(
                HeartbeatRequest::default()
                    .with_group_id(group())
                    .with_generation_id(1)
                    .with_member_id(text("seed-member")),
            )],
            ApiKey::LeaveGroup => vec![
                R::LeaveGroup(
                    LeaveGroupRequest::default()
                        .with_group_id(group())
                        .with_member_id(text("seed-member")),
                ),
                R::LeaveGroup(
                    LeaveGroupRequest::default()
                        .with_group_id(group())
                        .with_members(vec![
                            MemberIdentity::default().with_member_id(text("seed-member"))
                        ]),
                ),
            ],
            ApiKey::SyncGroup => vec![R::SyncGroup(self.sync("seed-member", 1))],
            ApiKey::DescribeGroups => vec![R::DescribeGroups(
                DescribeGroupsRequest::default().with_groups(vec![group()]),
            )],
            ApiKey::ListGroups => vec![R::ListGroups(ListGroupsRequest::default())],
            ApiKey::DeleteGroups => vec![R::DeleteGroups(
                DeleteGroupsRequest::default().with_groups_names(vec![group()]),
            )],
            ApiKey::OffsetDelete => vec![R::OffsetDelete(
                OffsetDeleteRequest::default()
                    .with_group_id(group())
                    .with_topics(vec![OffsetDeleteRequestTopic::default()
                        .with_name(name())
                        .with_partitions(vec![
                            OffsetDeleteRequestPartition::default().with_partition_index(0)
                        ])]),
            )],
            ApiKey::ApiVersions => vec![
                R::ApiVersions(
                    ApiVersionsRequest::default()
                        .with_client_software_name(text("kmock-seed"))
                        .with_client_software_version(text("1.0")),
                ),
                R::ApiVersions(ApiVersionsRequest::default()),
            ],
            ApiKey::CreateTopics => vec![R::CreateTopics(
                CreateTopicsRequest::default()
                    .with_timeout_ms(5_000)
                    .with_topics(vec![CreatableTopic::default()
                        .with_name(TopicName(text("created")))
                        .with_num_partitions(2)
                        .with_replication_factor(-1)
                        .with_configs(vec![CreatableTopicConfig::default()
                            .with_name(text("cleanup.policy"))
                            .with_value(Some(text("compact")))])]),
            )],
            ApiKey::DeleteTopics => vec![
                R::DeleteTopics(
                    DeleteTopicsRequest::default()
                        .with_timeout_ms(5_000)
                        .with_topic_names(vec![name()]),
                ),
                R::DeleteTopics(
                    DeleteTopicsRequest::default()
                        .with_timeout_ms(5_000)
                        .with_topics(vec![DeleteTopicState::default().with_name(Some(name()))]),
                ),
            ],
            ApiKey::InitProducerId => vec![R::InitProducerId(
                InitProducerIdRequest::default()
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            )],
            ApiKey::OffsetForLeaderEpoch => vec![R::OffsetForLeaderEpoch(
                OffsetForLeaderEpochRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![OffsetForLeaderTopic::default()
                        .with_topic(name())
                        .with_partitions(vec![OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(-1)
                            .with_leader_epoch(0)])]),
            )],
            ApiKey::DescribeConfigs => vec![R::DescribeConfigs(
                DescribeConfigsRequest::default().with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(text(TOPIC)),
                    DescribeConfigsResource::default()
                        .with_resource_type(4)
                        .with_resource_name(text("1")),
                ]),
            )],
            ApiKey::CreatePartitions => vec![R::CreatePartitions(
                CreatePartitionsRequest::default()
                    .with_timeout_ms(5_000)
                    .with_topics(vec![CreatePartitionsTopic::default()
                        .with_name(name())
                        .with_count(5)]),
            )],
            ApiKey::DescribeCluster => vec![R::DescribeCluster(DescribeClusterRequest::default())],
            other => panic!("kmock implements {other:?}: add a seed request for it"),
        }
    }

    pub(super) fn join(&self, member_id: &str) -> JoinGroupRequest {
        JoinGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(text(member_id))
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(Bytes::from_static(&[
                    0, 0, 0, 0, 0, 1, 0, 6, b'o', b'r', b'd', b'e', b'r', b's', 0, 0, 0, 0,
                ]))])
    }

    pub(super) fn sync(&self, member_id: &str, generation_id: i32) -> SyncGroupRequest {
        SyncGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id(generation_id)
            .with_member_id(text(member_id))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(text(member_id))
                .with_assignment(Bytes::new())])
    }
}

/// A Produce of `records` to partition 0 of the topic with `acks`.
pub(super) fn produce(records: &Bytes, acks: i16) -> RequestKind {
    RequestKind::Produce(
        ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name())
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records.clone()))])]),
    )
}
