//! ListOffsets (API key 2), versions 0–10 (v0 served only emulating a Kafka before 4.0,
//! which removed it: [`crate::KafkaVersion`]).
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
//! v0, as Kafka 2.x-3.x's `KafkaApis.handleListOffsetRequestV0` and `Log.legacyFetchOffsetsBefore`:
//! each partition as listed (no duplicate check), UNKNOWN_TOPIC_OR_PARTITION or
//! NOT_LEADER_OR_FOLLOWER with no offsets, otherwise up to `max_num_offsets` offsets, newest
//! first, out of the log's one segment: -1 gives the log end offset then the log start offset,
//! -2 the log start offset; a consumer's (replica id -1) are capped at the high watermark; a
//! negative `max_num_offsets` is UNKNOWN_SERVER_ERROR (Kafka's array of negative size).
//!
//! An `isolation_level` (v2+) other than 0 and 1 is UNKNOWN_SERVER_ERROR for every partition
//! asked, as Kafka 4.4.0 answers (conformance case
//! `fetch_and_list_offsets_unknown_isolation_level`).
//!
//! Deviations from Apache Kafka: none known for v1 and later (`list_offsets_*` conformance
//! cases). For a v0 timestamp other than -1 and -2, Kafka compares it with each segment file's
//! last-modified time; kmock's log has no segment files and takes the time of the request as
//! that of its one segment: a timestamp at or after it gives the log end and start offsets,
//! an earlier one none.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

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

const READ_UNCOMMITTED: i8 = 0;
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
    if version == 0 {
        return handle_v0(ctx, request);
    }
    if request.isolation_level != READ_UNCOMMITTED && request.isolation_level != READ_COMMITTED {
        return unknown_isolation_level(&request);
    }
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
    // Where each topic's answer is, so that grouping n topics costs n steps, not n².
    let mut topic_at: HashMap<&str, usize> = HashMap::new();
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
        match topic_at.entry(name) {
            Entry::Occupied(e) => topics[*e.get()].partitions.extend(partitions),
            Entry::Vacant(e) => {
                e.insert(topics.len());
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

/// The answer to an isolation level no version defines: UNKNOWN_SERVER_ERROR for every
/// partition asked (Kafka's `ListOffsetsRequest.getErrorResponse`, `IsolationLevel.forId`
/// having thrown).
fn unknown_isolation_level(request: &ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = request
        .topics
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
                                .with_error_code(ResponseError::UnknownServerError.code())
                                .with_timestamp(-1)
                                .with_offset(-1)
                                .with_leader_epoch(-1)
                        })
                        .collect(),
                )
        })
        .collect();
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

/// Kafka's `ListOffsetsRequest.CONSUMER_REPLICA_ID`.
const CONSUMER_REPLICA_ID: i32 = -1;

/// ListOffsets v0 (see the module's header): the old-style offsets of each partition.
fn handle_v0(ctx: &Ctx<'_>, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let from_consumer = request.replica_id.0 == CONSUMER_REPLICA_ID;
    let now_ms = ctx.shared.now_ms();
    let state = ctx.shared.state();
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let topic = state.topics.get(t.name.0.as_str());
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    match old_style_offsets(ctx, topic, p, from_consumer, now_ms) {
                        Ok(offsets) => answer.with_old_style_offsets(offsets),
                        Err(error) => answer.with_error_code(error.code()),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// `Log.legacyFetchOffsetsBefore` over a log of one segment (base offset the log start, last
/// modified `now_ms`), then `Partition.legacyFetchOffsetsForTimestamp`'s cap at the high
/// watermark for a consumer.
fn old_style_offsets(
    ctx: &Ctx<'_>,
    topic: Option<&Topic>,
    p: &ListOffsetsPartition,
    from_consumer: bool,
    now_ms: i64,
) -> Result<Vec<i64>, ResponseError> {
    let partition = topic
        .and_then(|t| t.partition(p.partition_index))
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    partition.check_leader(ctx.node_id, -1)?;
    if p.max_num_offsets < 0 {
        return Err(ResponseError::UnknownServerError);
    }
    let log = &partition.log;
    // (offset, last modified), oldest first: the segment, then the log end while the
    // segment holds anything.
    let mut points = vec![(log.log_start_offset(), now_ms)];
    if log.log_end_offset() > log.log_start_offset() {
        points.push((log.log_end_offset(), now_ms));
    }
    let start = match p.timestamp {
        LATEST => Some(points.len() - 1),
        EARLIEST => Some(0),
        ts => points.iter().rposition(|(_, modified)| *modified <= ts),
    };
    let mut offsets: Vec<i64> = match start {
        Some(start) => points[..=start]
            .iter()
            .rev()
            .take(p.max_num_offsets as usize)
            .map(|(offset, _)| *offset)
            .collect(),
        None => Vec::new(),
    };
    if from_consumer {
        let high_watermark = log.high_watermark();
        if offsets.iter().any(|o| *o > high_watermark) {
            offsets.retain(|o| *o <= high_watermark);
            offsets.insert(0, high_watermark);
        }
    }
    Ok(offsets)
}
