//! ListOffsets (API key 2), versions 1–10.
//!
//! Per partition, by `timestamp`: -2 earliest (log start offset), -1 latest (high watermark, or
//! the last stable offset for `read_committed`), -3 the record with the largest timestamp
//! (KIP-734), -4 earliest local (KIP-405; kmock has no remote tier, so the log start offset),
//! -5 latest tiered (no remote tier: offset -1), any other value the first record whose
//! timestamp is at least it (-1 offset when none is). Partition leader and
//! `current_leader_epoch` are checked as for Fetch.
//!
//! Deviations from Apache Kafka: those below.
//!
//! Differences the conformance cases show against Kafka 4.4.0 (`kmock_tests::conformance`,
//! recordings in `fixtures/conformance/`): a partition named twice is answered per entry, where
//! Kafka answers it once with INVALID_REQUEST; the special timestamps -3, -4, -5 and -6 are
//! accepted below the version that brought each (v7, v8, v9, v11), and -6/-7 at v10 are read as
//! timestamps, where Kafka answers UNSUPPORTED_VERSION (`list_offsets_*` cases).

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

/// Looks up each partition's offset for the timestamp asked.
pub fn handle(ctx: &Ctx<'_>, request: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
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
                    match lookup(ctx, topic, p, request.isolation_level) {
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
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
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
