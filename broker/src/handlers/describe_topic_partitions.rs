//! DescribeTopicPartitions (API key 75), version 0 (KIP-966).
//!
//! Describes topics in name order, paged by partitions, as Kafka's
//! `DescribeTopicPartitionsRequestHandler` and `KRaftMetadataCache
//! .getTopicMetadataForDescribeTopicResponse`: the topics asked for (each once), or every topic
//! when none is asked; only names at or after the cursor's topic, the cursor's topic from its
//! partition. At most `response_partition_limit` partitions (bounded to 1..=2000, Kafka's
//! `max.request.partition.size.limit`) are answered; when a topic is cut short, or the limit is
//! reached before the next topic, `next_cursor` names where to go on. A named topic that does
//! not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name); when
//! every topic is asked, there are none such. A cursor whose topic is not among those asked, or
//! whose partition is negative, makes every asked topic INVALID_REQUEST. Each partition: leader
//! (-1 while offline), leader epoch, replicas, ISR, offline replicas, and empty eligible leader
//! replicas (ELR) and last known ELR; each topic its authorized operations as a broker without
//! an authorizer gives them (every topic operation).
//!
//! Deviations from Apache Kafka: when every topic is asked, `__consumer_offsets` and
//! `__transaction_state` are not listed (kmock keeps them apart from the topics, as in
//! Metadata); the eligible leader replicas are always empty (kmock's ISR never shrinks below a
//! live replica).

use std::collections::BTreeSet;

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::{topic_name, Ctx};
use crate::state::topics::{is_internal, validate_name, Topic};

/// Versions implemented.
pub const VERSIONS: VersionRange = DescribeTopicPartitionsRequest::VERSIONS;

/// Kafka's `max.request.partition.size.limit` default: the most partitions one answer holds.
pub const MAX_PARTITIONS: i32 = 2000;

/// The operations a broker without an authorizer answers for a topic: READ, WRITE, CREATE,
/// DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS and ALTER_CONFIGS (`AclEntry.supportedOperations`)
/// as a bit field.
const TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);

/// Describes the topics asked for, a page at a time.
pub fn handle(
    ctx: &Ctx<'_>,
    request: DescribeTopicPartitionsRequest,
    _version: i16,
) -> DescribeTopicPartitionsResponse {
    let every = request.topics.is_empty();
    let cursor = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let from = cursor.as_ref().map_or("", |(t, _)| t.as_str()).to_owned();
    // The names asked for, sorted before the lock is taken (n log n for a request of n names).
    let asked: BTreeSet<String> = request
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|n| n.as_str() >= from.as_str())
        .collect();
    let state = ctx.shared.state();
    let names: BTreeSet<String> = if every {
        state
            .topics
            .keys()
            .filter(|n| n.as_str() >= from.as_str())
            .cloned()
            .collect()
    } else {
        asked
    };
    let cursor_missing = !every && cursor.as_ref().is_some_and(|(t, _)| !names.contains(t));
    if cursor_missing || cursor.as_ref().is_some_and(|(_, p)| *p < 0) {
        return DescribeTopicPartitionsResponse::default().with_topics(
            request
                .topics
                .iter()
                .map(|t| {
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(t.name.clone()))
                        .with_error_code(ResponseError::InvalidRequest.code())
                })
                .collect(),
        );
    }
    let down = &state.down;
    let mut remaining = request.response_partition_limit.clamp(1, MAX_PARTITIONS) as usize;
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in &names {
        if remaining == 0 {
            response.next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(name))
                    .with_partition_index(0),
            );
            break;
        }
        let Some(topic) = state.topics.get(name) else {
            if !every {
                let error = match validate_name(name) {
                    Ok(()) => ResponseError::UnknownTopicOrPartition,
                    Err(_) => ResponseError::InvalidTopicException,
                };
                response.topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(topic_name(name)))
                        .with_error_code(error.code())
                        .with_is_internal(is_internal(name))
                        .with_topic_authorized_operations(TOPIC_OPERATIONS),
                );
            }
            continue;
        };
        let start = match &cursor {
            Some((t, p)) if t == name => *p as usize,
            _ => 0,
        };
        let count = topic.partitions.len();
        let upper = count.min(start + remaining);
        let partitions: Vec<_> = (start..upper).map(|i| partition(topic, i, down)).collect();
        remaining = remaining.saturating_sub(partitions.len());
        response.topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(name)))
                .with_topic_id(topic.id)
                .with_is_internal(is_internal(name))
                .with_partitions(partitions)
                .with_topic_authorized_operations(TOPIC_OPERATIONS),
        );
        if upper < count {
            response.next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(name))
                    .with_partition_index(upper as i32),
            );
            break;
        }
    }
    response
}

fn partition(
    topic: &Topic,
    index: usize,
    down: &BTreeSet<i32>,
) -> DescribeTopicPartitionsResponsePartition {
    let p = &topic.partitions[index];
    let ids = |nodes: &[i32]| nodes.iter().map(|&n| BrokerId(n)).collect::<Vec<_>>();
    let offline: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| down.contains(r))
        .collect();
    DescribeTopicPartitionsResponsePartition::default()
        .with_partition_index(index as i32)
        .with_leader_id(BrokerId(p.leader))
        .with_leader_epoch(p.leader_epoch)
        .with_replica_nodes(ids(&p.replicas))
        .with_isr_nodes(ids(&p.isr))
        .with_offline_replicas(ids(&offline))
        .with_eligible_leader_replicas(Some(Vec::new()))
        .with_last_known_elr(Some(Vec::new()))
}
