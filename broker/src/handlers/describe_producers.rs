//! DescribeProducers (API key 61), version 0.
//!
//! As Kafka's `KafkaApis.handleDescribeProducersRequest` and
//! `ReplicaManager.activeProducerState`, each partition answered in request order: a topic
//! whose name is not a legal topic name gets INVALID_TOPIC_EXCEPTION with the reason on every
//! partition, an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION, a partition of which
//! this broker holds no replica NOT_LEADER_OR_FOLLOWER; otherwise every producer with state
//! on the partition (idempotent or transactional): its epoch there, the last sequence of its
//! last batch kept (-1 when only markers came since its epoch began), the max timestamp of its
//! last batch or its last marker's timestamp, the coordinator epoch of its last marker (-1
//! before one), and the first offset of its open transaction there (-1 when none is open).
//!
//! Deviations from Apache Kafka: producers come in producer id order, where Kafka's order is
//! its map's; producer state never expires (Kafka forgets a producer after
//! `producer.id.expiration.ms`, a day by default); a follower answers from the leader's log,
//! which kmock's followers never lag.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::topics::validate_name;

/// Versions implemented.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// Describes the active producers of each partition, or answers why not.
pub fn handle(
    ctx: &Ctx<'_>,
    request: DescribeProducersRequest,
    _version: i16,
) -> DescribeProducersResponse {
    let state = ctx.shared.state();
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let topic_error = match validate_name(name) {
                Err(reason) => Some((ResponseError::InvalidTopicException, Some(reason))),
                Ok(()) if !state.topics.contains_key(name) => {
                    Some((ResponseError::UnknownTopicOrPartition, None))
                }
                Ok(()) => None,
            };
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    let fail = |error: ResponseError, message: Option<String>| {
                        PartitionResponse::default()
                            .with_partition_index(index)
                            .with_error_code(error.code())
                            .with_error_message(message.map(StrBytes::from_string))
                    };
                    if let Some((error, message)) = &topic_error {
                        return fail(*error, message.clone());
                    }
                    let Some(p) = state.topics.get(name).and_then(|t| t.partition(index)) else {
                        return fail(ResponseError::UnknownTopicOrPartition, None);
                    };
                    if !p.replicas.contains(&ctx.node_id) {
                        return fail(ResponseError::NotLeaderOrFollower, None);
                    }
                    let producers = p
                        .producers
                        .active()
                        .into_iter()
                        .map(|a| {
                            ProducerState::default()
                                .with_producer_id(ProducerId(a.producer_id))
                                .with_producer_epoch(i32::from(a.producer_epoch))
                                .with_last_sequence(a.last_sequence)
                                .with_last_timestamp(a.last_timestamp)
                                .with_coordinator_epoch(a.coordinator_epoch)
                                .with_current_txn_start_offset(
                                    p.log.ongoing_transaction_start(a.producer_id),
                                )
                        })
                        .collect();
                    PartitionResponse::default()
                        .with_partition_index(index)
                        .with_active_producers(producers)
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
