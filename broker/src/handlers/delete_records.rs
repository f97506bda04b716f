//! DeleteRecords (API key 21), versions 0–2.
//!
//! Moves each partition's log start offset up to the offset asked (-1: the high watermark), as
//! Kafka's `ReplicaManager.deleteRecords` and `Partition.deleteRecordsOnLeader`
//! ([`crate::state::topics::Partition::delete_records`]), and answers the log start offset
//! after it as the low watermark. Afterwards ListOffsets EARLIEST answers the new log start
//! offset and a Fetch below it OFFSET_OUT_OF_RANGE.
//!
//! Per partition, in Kafka's order: a partition no topic has is UNKNOWN_TOPIC_OR_PARTITION; an
//! internal topic (`__consumer_offsets`, `__transaction_state`) INVALID_TOPIC_EXCEPTION; a
//! broker that does not lead it NOT_LEADER_OR_FOLLOWER; a topic whose `cleanup.policy` lacks
//! `delete` POLICY_VIOLATION; an offset below -1 or past the high watermark
//! OFFSET_OUT_OF_RANGE. Errors answer low watermark -1. A partition named twice is deleted
//! once, to the last offset given, and answered once (Kafka collects the request in a map;
//! with two different offsets Kafka 4.4.0 was seen keeping either, so no case pins the winner).
//!
//! Deviations from Apache Kafka: none known (`delete_records_*` conformance cases). Kafka
//! answers once every replica's log start offset has moved (a purgatory wait bounded by
//! `timeout_ms`); kmock's followers catch up at once, so it answers at once. Kafka answers
//! topics and partitions in hash-map order, kmock in request order.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::topics::is_internal;
use crate::state::ClusterState;

/// Versions implemented.
pub const VERSIONS: VersionRange = DeleteRecordsRequest::VERSIONS;

/// Deletes the records before each partition's offset.
pub fn handle(
    ctx: &Ctx<'_>,
    request: DeleteRecordsRequest,
    _version: i16,
) -> DeleteRecordsResponse {
    // Kafka's map of partition to offset: the last offset given for a partition wins. A map
    // (kept in request order by `asked`), so that n partitions cost n steps, not n².
    let mut asked: Vec<(&str, i32, i64)> = Vec::new();
    let mut at: HashMap<(&str, i32), usize> = HashMap::new();
    for t in &request.topics {
        let name = t.name.0.as_str();
        for p in &t.partitions {
            match at.entry((name, p.partition_index)) {
                Entry::Occupied(e) => asked[*e.get()].2 = p.offset,
                Entry::Vacant(e) => {
                    e.insert(asked.len());
                    asked.push((name, p.partition_index, p.offset));
                }
            }
        }
    }
    drop(at);
    let mut state = ctx.shared.state();
    let mut topics: Vec<DeleteRecordsTopicResult> = Vec::new();
    let mut topic_at: HashMap<&str, usize> = HashMap::new();
    for (name, index, offset) in asked {
        let result = match delete(ctx, &mut state, name, index, offset) {
            Ok(low_watermark) => DeleteRecordsPartitionResult::default()
                .with_partition_index(index)
                .with_low_watermark(low_watermark),
            Err(error) => {
                tracing::debug!(topic = name, partition = index, offset, "{error:?}");
                DeleteRecordsPartitionResult::default()
                    .with_partition_index(index)
                    .with_low_watermark(-1)
                    .with_error_code(error.code())
            }
        };
        match topic_at.entry(name) {
            Entry::Occupied(e) => topics[*e.get()].partitions.push(result),
            Entry::Vacant(e) => {
                e.insert(topics.len());
                topics.push(
                    DeleteRecordsTopicResult::default()
                        .with_name(super::topic_name(name))
                        .with_partitions(vec![result]),
                );
            }
        }
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// Deletes `name`-`index`'s records before `offset`; the low watermark after it.
fn delete(
    ctx: &Ctx<'_>,
    state: &mut ClusterState,
    name: &str,
    index: i32,
    offset: i64,
) -> Result<i64, ResponseError> {
    let internal_exists = match name {
        "__consumer_offsets" => {
            usize::try_from(index).is_ok_and(|i| i < state.consumer_offsets.len())
        }
        "__transaction_state" => {
            usize::try_from(index).is_ok_and(|i| i < state.transaction_state.len())
        }
        _ => false,
    };
    if internal_exists {
        return Err(ResponseError::InvalidTopicException);
    }
    let topic = state
        .topics
        .get_mut(name)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    let deletes = topic.deletes();
    let partition = topic
        .partition_mut(index)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    if is_internal(name) {
        return Err(ResponseError::InvalidTopicException);
    }
    partition.check_leader(ctx.node_id, -1)?;
    if !deletes {
        return Err(ResponseError::PolicyViolation);
    }
    partition.delete_records(offset)
}
