//! AlterReplicaLogDirs (API key 34), versions 1–2.
//!
//! Each kmock broker has one log directory, `/kmock/broker-<node id>/data` (as DescribeLogDirs
//! lists it), so a move can only be to where the replica already is, which Kafka answers
//! NONE and does nothing for. Per partition, in the order of Kafka's
//! `ReplicaManager.alterReplicaLogDirs`: a topic name too long for a future log's directory
//! (`<topic>-<partition>.<32 hex digits>-future` past 255 characters) INVALID_TOPIC_EXCEPTION;
//! a directory the broker does not have LOG_DIR_NOT_FOUND; an unknown topic or partition
//! UNKNOWN_TOPIC_OR_PARTITION; a partition with no replica on this broker REPLICA_NOT_AVAILABLE
//! (Kafka's answer kept for compatibility in place of NOT_LEADER_OR_FOLLOWER).
//! A partition named twice is answered once, for the last directory naming it.
//!
//! Deviations from Apache Kafka: topics are answered in request order, where Kafka answers in
//! hash-map order.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::describe_log_dirs::log_dir;
use super::{topic_name, Ctx};

/// Versions implemented.
pub const VERSIONS: VersionRange = AlterReplicaLogDirsRequest::VERSIONS;

/// Moves (in kmock: keeps) each partition's replica in the directory asked.
pub fn handle(
    ctx: &Ctx<'_>,
    request: AlterReplicaLogDirsRequest,
    _version: i16,
) -> AlterReplicaLogDirsResponse {
    // Kafka's map of partition to directory: the last directory naming a partition wins, and
    // the partition is answered where it was last named. Indexed, so that n partitions cost n
    // steps, not n².
    let named: Vec<(&str, i32, &str)> = request
        .dirs
        .iter()
        .flat_map(|dir| {
            dir.topics.iter().flat_map(move |t| {
                t.partitions
                    .iter()
                    .map(move |&p| (t.name.0.as_str(), p, dir.path.as_str()))
            })
        })
        .collect();
    let last: HashMap<(&str, i32), usize> = named
        .iter()
        .enumerate()
        .map(|(i, &(topic, partition, _))| ((topic, partition), i))
        .collect();
    let asked = named
        .iter()
        .enumerate()
        .filter(|&(i, &(topic, partition, _))| last[&(topic, partition)] == i)
        .map(|(_, &named)| named);
    let own = log_dir(ctx.node_id);
    let state = ctx.shared.state();
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    let mut topic_at: HashMap<&str, usize> = HashMap::new();
    for (topic, partition, path) in asked {
        let error = if future_dir_name_len(topic, partition) > 255 {
            Some(ResponseError::InvalidTopicException)
        } else if path != own {
            Some(ResponseError::LogDirNotFound)
        } else {
            match state.topics.get(topic).and_then(|t| t.partition(partition)) {
                None => Some(ResponseError::UnknownTopicOrPartition),
                Some(p) if !p.replicas.contains(&ctx.node_id) => {
                    Some(ResponseError::ReplicaNotAvailable)
                }
                Some(_) => None,
            }
        };
        let result = AlterReplicaLogDirPartitionResult::default()
            .with_partition_index(partition)
            .with_error_code(error.map_or(0, |e| e.code()));
        match topic_at.entry(topic) {
            Entry::Occupied(e) => results[*e.get()].partitions.push(result),
            Entry::Vacant(e) => {
                e.insert(results.len());
                results.push(
                    AlterReplicaLogDirTopicResult::default()
                        .with_topic_name(topic_name(topic))
                        .with_partitions(vec![result]),
                );
            }
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}

/// Length of Kafka's future log directory name for a partition (`UnifiedLog.logFutureDirName`).
fn future_dir_name_len(topic: &str, partition: i32) -> usize {
    topic.len() + 1 + partition.to_string().len() + 1 + 32 + "-future".len()
}
