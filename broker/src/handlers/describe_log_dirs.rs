//! DescribeLogDirs (API key 35), versions 1–4.
//!
//! One log directory per broker, `/kmock/broker-<node id>/data`, holding a replica of every
//! partition this broker is a replica of, as Kafka's `ReplicaManager.describeLogDirs`: null
//! `topics` lists every one, else the partitions asked that this broker holds (others are left
//! out, unknown topics included). Each partition: its size (the bytes of its stored batches, the
//! records below a DeleteRecords' log start offset included until retention deletes their
//! segment, as Kafka keeps it; shrinking as retention deletes segments), an
//! offset lag of 0 (followers are never behind), not a future replica. Top-level error NONE.
//!
//! Deviations from Apache Kafka: the log directory's `total_bytes` and `usable_bytes` (v4) are
//! -1 (unknown), where Kafka measures the disk; Kafka 4.4 serves v5, kafka-protocol stops at
//! v4; a Kafka batch's size on disk and kmock's agree, but a segment's index files are not
//! counted in either.

use std::collections::HashSet;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};
use kafka_protocol::protocol::{Message, VersionRange};

use super::{str_bytes, topic_name, Ctx};

/// Versions implemented.
pub const VERSIONS: VersionRange = DescribeLogDirsRequest::VERSIONS;

/// The log directory of broker `node`.
pub fn log_dir(node: i32) -> String {
    format!("/kmock/broker-{node}/data")
}

/// Describes this broker's one log directory.
pub fn handle(
    ctx: &Ctx<'_>,
    request: DescribeLogDirsRequest,
    _version: i16,
) -> DescribeLogDirsResponse {
    let asked: Option<HashSet<(&str, i32)>> = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.as_str(), *p)))
            .collect()
    });
    let state = ctx.shared.state();
    let topics = state
        .topics
        .values()
        .filter_map(|topic| {
            let partitions: Vec<DescribeLogDirsPartition> = topic
                .partitions
                .iter()
                .enumerate()
                .filter(|(i, p)| {
                    p.replicas.contains(&ctx.node_id)
                        && asked
                            .as_ref()
                            .is_none_or(|a| a.contains(&(topic.name.as_str(), *i as i32)))
                })
                .map(|(i, p)| {
                    DescribeLogDirsPartition::default()
                        .with_partition_index(i as i32)
                        .with_partition_size(p.log.size() as i64)
                        .with_offset_lag(0)
                })
                .collect();
            (!partitions.is_empty()).then(|| {
                DescribeLogDirsTopic::default()
                    .with_name(topic_name(&topic.name))
                    .with_partitions(partitions)
            })
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(vec![DescribeLogDirsResult::default()
        .with_log_dir(str_bytes(&log_dir(ctx.node_id)))
        .with_topics(topics)
        .with_total_bytes(-1)
        .with_usable_bytes(-1)])
}
