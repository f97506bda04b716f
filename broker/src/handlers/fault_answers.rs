//! The answers of the fault rules' `error(code)` action, with the error where Kafka puts it —
//! per partition for Produce, Fetch, ListOffsets and OffsetCommit, per topic for Metadata, per
//! group or key for the batched forms, top level otherwise — and of the `throttle` action.
//! The rules ([`crate::faults`]) say which error fires; the handlers' side builds the answer
//! carrying it, so the rules never import a handler.

use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{metadata, Ctx};

/// The APIs `error(code)` can answer.
const ERROR_APIS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::InitProducerId,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::TxnOffsetCommit,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::DeleteGroups,
    ApiKey::OffsetDelete,
    ApiKey::ConsumerGroupDescribe,
];

/// Whether `error(code)` can answer requests of `api`.
pub(crate) fn supports_error(api: ApiKey) -> bool {
    ERROR_APIS.contains(&api)
}

/// The answer to `request` (at `version`) carrying `error`, or `None` for an API not in
/// [`supports_error`]. A Metadata answer is the one kmock would give (without creating
/// topics), with `error` on topic `topic` only when the rule named one (so a request for all
/// topics still lists the others), else on every topic it lists; a topic with the error lists no
/// partitions.
pub(crate) fn error_response(
    ctx: &Ctx<'_>,
    request: &RequestKind,
    version: i16,
    error: ResponseError,
    topic: Option<&str>,
) -> Option<ResponseKind> {
    let code = error.code();
    Some(match request {
        RequestKind::Produce(r) => ResponseKind::Produce(
            ProduceResponse::default().with_responses(
                r.topic_data
                    .iter()
                    .map(|t| {
                        TopicProduceResponse::default()
                            .with_name(t.name.clone())
                            .with_topic_id(t.topic_id)
                            .with_partition_responses(
                                t.partition_data
                                    .iter()
                                    .map(|p| {
                                        PartitionProduceResponse::default()
                                            .with_index(p.index)
                                            .with_error_code(code)
                                            .with_base_offset(-1)
                                            .with_log_append_time_ms(-1)
                                            .with_log_start_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        ),
        RequestKind::Fetch(r) => {
            let session_error = matches!(
                error,
                ResponseError::FetchSessionIdNotFound | ResponseError::InvalidFetchSessionEpoch
            );
            if session_error && version >= 7 {
                return Some(ResponseKind::Fetch(
                    FetchResponse::default().with_error_code(code),
                ));
            }
            ResponseKind::Fetch(
                FetchResponse::default().with_responses(
                    r.topics
                        .iter()
                        .map(|t| {
                            FetchableTopicResponse::default()
                                .with_topic(t.topic.clone())
                                .with_topic_id(t.topic_id)
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            PartitionData::default()
                                                .with_partition_index(p.partition)
                                                .with_error_code(code)
                                                .with_high_watermark(-1)
                                                .with_last_stable_offset(-1)
                                                .with_log_start_offset(-1)
                                                .with_records(Some(Default::default()))
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(
            ListOffsetsResponse::default().with_topics(
                r.topics
                    .iter()
                    .map(|t| {
                        ListOffsetsTopicResponse::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        ListOffsetsPartitionResponse::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(code)
                                            .with_timestamp(-1)
                                            .with_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        ),
        RequestKind::Metadata(r) => {
            let request = r.clone().with_allow_auto_topic_creation(false);
            let mut answer = metadata::handle(ctx, request, version);
            for t in &mut answer.topics {
                let named = t.name.as_ref().map(|n| n.0.as_str());
                if topic.is_none_or(|wanted| named == Some(wanted)) {
                    t.error_code = code;
                    t.partitions.clear();
                }
            }
            ResponseKind::Metadata(answer)
        }
        RequestKind::OffsetCommit(r) => ResponseKind::OffsetCommit(
            OffsetCommitResponse::default().with_topics(
                r.topics
                    .iter()
                    .map(|t| {
                        OffsetCommitResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        ),
        RequestKind::OffsetFetch(r) if version >= 8 => ResponseKind::OffsetFetch(
            OffsetFetchResponse::default().with_groups(
                r.groups
                    .iter()
                    .map(|g| {
                        OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::OffsetFetch(r) => ResponseKind::OffsetFetch(
            super::offset_fetch::error_answer(r, version, error),
        ),
        RequestKind::FindCoordinator(r) if version >= 4 => ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default().with_coordinators(
                r.coordinator_keys
                    .iter()
                    .map(|k| {
                        Coordinator::default()
                            .with_key(k.clone())
                            .with_node_id(BrokerId(-1))
                            .with_port(-1)
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::FindCoordinator(_) => ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default()
                .with_error_code(code)
                .with_node_id(BrokerId(-1))
                .with_port(-1),
        ),
        RequestKind::JoinGroup(r) => ResponseKind::JoinGroup(
            JoinGroupResponse::default()
                .with_error_code(code)
                .with_generation_id(-1)
                .with_protocol_name((version < 7).then(StrBytes::default))
                .with_member_id(r.member_id.clone()),
        ),
        RequestKind::SyncGroup(_) => {
            ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(code))
        }
        // Kafka's `GroupCoordinatorService.heartbeat` (and 3.x's `handleHeartbeat`) answers a
        // loading coordinator's COORDINATOR_LOAD_IN_PROGRESS with NONE: "the group is still
        // loading, so blindly respond".
        RequestKind::Heartbeat(_) if error == ResponseError::CoordinatorLoadInProgress => {
            ResponseKind::Heartbeat(HeartbeatResponse::default())
        }
        RequestKind::Heartbeat(_) => {
            ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
        }
        RequestKind::LeaveGroup(_) => {
            ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code))
        }
        RequestKind::InitProducerId(_) => ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
        // v4+: per partition of each transaction (Kafka's `errorResponseForTransaction`).
        RequestKind::AddPartitionsToTxn(r) if version >= 4 => ResponseKind::AddPartitionsToTxn(
            AddPartitionsToTxnResponse::default().with_results_by_transaction(
                r.transactions
                    .iter()
                    .map(|t| {
                        add_partitions_to_txn_response::AddPartitionsToTxnResult::default()
                            .with_transactional_id(t.transactional_id.clone())
                            .with_topic_results(t.topics.iter().map(|topic| {
                                add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                                    .with_name(topic.name.clone())
                                    .with_results_by_partition(topic.partitions.iter().map(|&p| {
                                        add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                                            .with_partition_index(p)
                                            .with_partition_error_code(code)
                                    }).collect())
                            }).collect())
                    })
                    .collect(),
            ),
        ),
        // Per partition, as Kafka answers a coordinator error for the whole request.
        RequestKind::AddPartitionsToTxn(r) => ResponseKind::AddPartitionsToTxn(
            AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(
                r.v3_and_below_topics
                    .iter()
                    .map(|t| {
                        add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                            .with_name(t.name.clone())
                            .with_results_by_partition(
                                t.partitions
                                    .iter()
                                    .map(|&p| {
                                        add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                                            .with_partition_index(p)
                                            .with_partition_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        ),
        RequestKind::AddOffsetsToTxn(_) => ResponseKind::AddOffsetsToTxn(
            AddOffsetsToTxnResponse::default().with_error_code(code),
        ),
        RequestKind::EndTxn(_) => ResponseKind::EndTxn(
            EndTxnResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
        RequestKind::TxnOffsetCommit(r) => ResponseKind::TxnOffsetCommit(
            TxnOffsetCommitResponse::default().with_topics(
                r.topics
                    .iter()
                    .map(|t| {
                        txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        ),
        RequestKind::ConsumerGroupHeartbeat(_) => ResponseKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default().with_error_code(code),
        ),
        // Per group, as Kafka's `getErrorDescribedGroupList` / `getErrorResultCollection`.
        RequestKind::DescribeGroups(r) => ResponseKind::DescribeGroups(
            DescribeGroupsResponse::default().with_groups(
                r.groups
                    .iter()
                    .map(|g| {
                        describe_groups_response::DescribedGroup::default()
                            .with_group_id(g.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::ListGroups(_) => {
            ResponseKind::ListGroups(ListGroupsResponse::default().with_error_code(code))
        }
        RequestKind::DeleteGroups(r) => ResponseKind::DeleteGroups(
            DeleteGroupsResponse::default().with_results(
                r.groups_names
                    .iter()
                    .map(|g| {
                        delete_groups_response::DeletableGroupResult::default()
                            .with_group_id(g.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::OffsetDelete(_) => {
            ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_error_code(code))
        }
        RequestKind::ConsumerGroupDescribe(r) => ResponseKind::ConsumerGroupDescribe(
            ConsumerGroupDescribeResponse::default().with_groups(
                r.group_ids
                    .iter()
                    .map(|g| {
                        consumer_group_describe_response::DescribedGroup::default()
                            .with_group_id(g.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        _ => return None,
    })
}

/// Sets the answer's throttle time; `false` when the version has no such field.
pub(crate) fn with_throttle(response: &mut ResponseKind, version: i16, throttle_ms: i32) -> bool {
    macro_rules! set {
        ($r:expr, $min:expr) => {
            if version >= $min {
                $r.throttle_time_ms = throttle_ms;
                true
            } else {
                false
            }
        };
    }
    match response {
        ResponseKind::Produce(r) => set!(r, 1),
        ResponseKind::Fetch(r) => set!(r, 1),
        ResponseKind::ListOffsets(r) => set!(r, 2),
        ResponseKind::Metadata(r) => set!(r, 3),
        ResponseKind::OffsetCommit(r) => set!(r, 3),
        ResponseKind::OffsetFetch(r) => set!(r, 3),
        ResponseKind::FindCoordinator(r) => set!(r, 1),
        ResponseKind::JoinGroup(r) => set!(r, 2),
        ResponseKind::Heartbeat(r) => set!(r, 1),
        ResponseKind::LeaveGroup(r) => set!(r, 1),
        ResponseKind::SyncGroup(r) => set!(r, 1),
        ResponseKind::DescribeGroups(r) => set!(r, 1),
        ResponseKind::ListGroups(r) => set!(r, 1),
        ResponseKind::ApiVersions(r) => set!(r, 1),
        ResponseKind::CreateTopics(r) => set!(r, 2),
        ResponseKind::DeleteTopics(r) => set!(r, 1),
        ResponseKind::InitProducerId(r) => set!(r, 0),
        ResponseKind::OffsetForLeaderEpoch(r) => set!(r, 2),
        ResponseKind::DescribeConfigs(r) => set!(r, 0),
        ResponseKind::CreatePartitions(r) => set!(r, 0),
        ResponseKind::DescribeCluster(r) => set!(r, 0),
        ResponseKind::DeleteGroups(r) => set!(r, 0),
        ResponseKind::OffsetDelete(r) => set!(r, 0),
        ResponseKind::AddPartitionsToTxn(r) => set!(r, 0),
        ResponseKind::AddOffsetsToTxn(r) => set!(r, 0),
        ResponseKind::EndTxn(r) => set!(r, 0),
        ResponseKind::TxnOffsetCommit(r) => set!(r, 0),
        ResponseKind::ConsumerGroupHeartbeat(r) => set!(r, 0),
        ResponseKind::ConsumerGroupDescribe(r) => set!(r, 0),
        ResponseKind::DeleteRecords(r) => set!(r, 0),
        ResponseKind::AlterConfigs(r) => set!(r, 0),
        ResponseKind::IncrementalAlterConfigs(r) => set!(r, 0),
        ResponseKind::DescribeTopicPartitions(r) => set!(r, 0),
        ResponseKind::ElectLeaders(r) => set!(r, 0),
        ResponseKind::DescribeLogDirs(r) => set!(r, 0),
        ResponseKind::AlterPartitionReassignments(r) => set!(r, 0),
        ResponseKind::ListPartitionReassignments(r) => set!(r, 0),
        _ => false,
    }
}
