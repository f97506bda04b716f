//! ListOffsets (API key 2), versions 1–10.
//!
//! Per partition, by `timestamp`: -2 earliest (log start offset), -1 latest (high watermark, or
//! the last stable offset for `read_committed`), -3 the record with the largest timestamp
//! (KIP-734), -4 earliest local (KIP-405; kmock has no remote tier, so the log start offset),
//! -5 latest tiered (no remote tier: offset -1), any other value the first record whose
//! timestamp is at least it (-1 offset when none is). Partition leader and
//! `current_leader_epoch` are checked as for Fetch.
//!
//! As Kafka's `ReplicaManager.fetchOffset`: a partition named twice is answered once with
//! INVALID_REQUEST; a special timestamp below the version that brought it (-3 v7, -4 v8, -5 v9,
//! -6 v11) or one Kafka does not know (-7 and below) gets UNSUPPORTED_VERSION.
//!
//! Deviations from Apache Kafka: none known (`list_offsets_*` conformance cases).

use std::collections::HashSet;

use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::topics::Topic;

/// Versions implemented.
pub const VERSIONS: VersionRange = ListOffsetsRequest::VERSIONS;

const READ_COMMITTED: i8 = 1;
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
/// KIP-1023's earliest pending upload, from v11 (above what kmock serves).
const EARLIEST_PENDING_UPLOAD: i64 = -6;

/// Looks up each partition's offset for the timestamp asked, as Kafka's
/// `ReplicaManager.fetchOffset`: a partition named more than once (in one topic entry or two) is
/// answered once, INVALID_REQUEST, before anything else is checked; a special timestamp the
/// request's version does not have is answered UNSUPPORTED_VERSION; the answers are grouped by
/// topic.
pub fn handle(ctx: &Ctx<'_>, request: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let mut seen = HashSet::new();
    let twice: HashSet<(&str, i32)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.as_str(), p.partition_index))
        })
        .filter(|tp| !seen.insert(*tp))
        .collect();
    let state = ctx.shared.state();
    let mut topics: Vec<ListOffsetsTopicResponse> = Vec::new();
    let mut answered = HashSet::new();
    for t in &request.topics {
        let name = t.name.0.as_str();
        let topic = state.topics.get(name);
        let partitions = t
            .partitions
            .iter()
            .filter(|p| answered.insert((name, p.partition_index)))
            .map(|p| {
                let found = if twice.contains(&(name, p.partition_index)) {
                    Err(ResponseError::InvalidRequest)
                } else if timestamp_unsupported(p.timestamp, version) {
                    Err(ResponseError::UnsupportedVersion)
                } else {
                    lookup(ctx, topic, p, request.isolation_level)
                };
                match found {
                    // The leader epoch field exists from v4.
                    Ok(found) if version < 4 => found.with_leader_epoch(-1),
                    Ok(found) => found,
                    Err(error) => ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error.code())
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1),
                }
            });
        match topics.iter_mut().find(|r| r.name.0.as_str() == name) {
            Some(r) => r.partitions.extend(partitions),
            None => {
                let partitions = partitions.collect();
                topics.push(
                    ListOffsetsTopicResponse::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions),
                );
            }
        }
    }
    ListOffsetsResponse::default().with_topics(topics)
}

/// Whether `timestamp` is a special timestamp `version` does not have (Kafka's
/// `ReplicaManager.isListOffsetsTimestampUnsupported`): -3 (max timestamp) from v7, -4
/// (earliest local) from v8, -5 (latest tiered) from v9, -6 (earliest pending upload) from v11,
/// no other negative value but -1 and -2.
fn timestamp_unsupported(timestamp: i64, version: i16) -> bool {
    let since = match timestamp {
        LATEST | EARLIEST => 0,
        MAX_TIMESTAMP => 7,
        EARLIEST_LOCAL => 8,
        LATEST_TIERED => 9,
        EARLIEST_PENDING_UPLOAD => 11,
        ts if ts >= 0 => 0,
        _ => i16::MAX,
    };
    version < since
}

fn lookup(
    ctx: &Ctx<'_>,
    topic: Option<&Topic>,
    p: &ListOffsetsPartition,
    isolation_level: i8,
) -> Result<ListOffsetsPartitionResponse, ResponseError> {
    let partition = topic
        .and_then(|t| t.partition(p.partition_index))
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    partition.check_leader(ctx.node_id, p.current_leader_epoch)?;
    let log = &partition.log;
    let (timestamp, offset) = match p.timestamp {
        LATEST if isolation_level == READ_COMMITTED => (-1, log.last_stable_offset()),
        LATEST => (-1, log.high_watermark()),
        EARLIEST | EARLIEST_LOCAL => (-1, log.log_start_offset()),
        LATEST_TIERED => (-1, -1),
        MAX_TIMESTAMP => log
            .max_timestamp()
            .map_or((-1, -1), |(offset, ts)| (ts, offset)),
        ts => log
            .offset_for_timestamp(ts)
            .map_or((-1, -1), |(offset, ts)| (ts, offset)),
    };
    Ok(ListOffsetsPartitionResponse::default()
        .with_partition_index(p.partition_index)
        .with_timestamp(timestamp)
        .with_offset(offset)
        .with_leader_epoch(partition.leader_epoch))
}
