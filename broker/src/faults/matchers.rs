//! Which matcher can match requests of which API, and the matching of the fields that differ
//! from one API to another (topics, producer ids).
//!
//! A matcher names a request field (`topic`, `partition`, `group`, `transactional_id`,
//! `producer_id`). kmock reads each from the journal entry of the APIs listed in [`READ`];
//! a rule whose matcher names a field its API does not carry, or one kmock does not read yet,
//! could never fire, and is refused when added, with the matcher and the API named. So is a
//! `versions` matcher outside the versions kmock implements (a request at another version
//! closes its connection before rules see it), and a rule on an API kmock does not implement.
//!
//! A Metadata request for all topics (`topics` null, or empty at v0, which Kafka answers with
//! every topic) names every topic: a `topic` matcher matches it, whatever its topic.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::VersionRange;

use super::Rule;
use crate::journal::{Entry, RequestSummary};

/// The matchers that depend on the API, with the APIs whose requests kmock reads the field
/// from, and those whose requests carry it in Kafka's protocol but kmock does not read it yet.
const READ: &[(&str, &[ApiKey], &[ApiKey])] = {
    use ApiKey::*;
    &[
        (
            "topic",
            &[
                Produce,
                Fetch,
                ListOffsets,
                OffsetCommit,
                Metadata,
                DeleteTopics,
                AddPartitionsToTxn,
                TxnOffsetCommit,
            ],
            &[
                OffsetFetch,
                CreateTopics,
                CreatePartitions,
                DescribeConfigs,
                OffsetForLeaderEpoch,
                OffsetDelete,
                DescribeProducers,
            ],
        ),
        (
            "partition",
            &[
                Produce,
                Fetch,
                ListOffsets,
                OffsetCommit,
                AddPartitionsToTxn,
                TxnOffsetCommit,
            ],
            &[
                OffsetFetch,
                OffsetForLeaderEpoch,
                OffsetDelete,
                DescribeProducers,
            ],
        ),
        (
            "group",
            &[
                OffsetCommit,
                OffsetFetch,
                JoinGroup,
                SyncGroup,
                Heartbeat,
                LeaveGroup,
                AddOffsetsToTxn,
                TxnOffsetCommit,
            ],
            &[FindCoordinator, DescribeGroups, DeleteGroups, OffsetDelete],
        ),
        (
            "transactional_id",
            &[
                Produce,
                InitProducerId,
                AddPartitionsToTxn,
                AddOffsetsToTxn,
                TxnOffsetCommit,
                EndTxn,
            ],
            &[FindCoordinator, DescribeTransactions],
        ),
        ("producer_id", &[Produce, InitProducerId], &[]),
    ]
};

/// Refuses a rule whose matchers can never match a request of its API, given the versions kmock
/// implements of each API (`handlers::supported_versions`).
pub(super) fn check(
    rule: &Rule,
    versions: fn(ApiKey) -> Option<VersionRange>,
) -> Result<(), String> {
    let api = rule.api;
    let Some(implemented) = versions(api) else {
        return Err(format!(
            "kmock does not implement {api:?}: its requests close their connection before \
             any rule sees them, so a rule on {api:?} would never fire"
        ));
    };
    if let Some((min, max)) = rule.versions {
        // ApiVersions at any version is answered (with its v0 answer past the range).
        let reachable =
            api == ApiKey::ApiVersions || (min.max(implemented.min) <= max.min(implemented.max));
        if min > max || !reachable {
            return Err(format!(
                "the `versions` matcher ({min}..={max}) can never match {api:?}: kmock \
                 implements {api:?} {}–{}, and a request at another version closes its \
                 connection before any rule sees it",
                implemented.min, implemented.max
            ));
        }
    }
    let set = [
        ("topic", rule.topic.is_some()),
        ("partition", rule.partition.is_some()),
        ("group", rule.group.is_some()),
        ("transactional_id", rule.transactional_id.is_some()),
        ("producer_id", rule.producer_id.is_some()),
    ];
    for (field, _) in set.iter().filter(|(_, on)| *on) {
        let (_, read, unread) = READ
            .iter()
            .find(|(f, _, _)| f == field)
            .expect("every matcher is listed");
        if read.contains(&api) {
            continue;
        }
        return Err(if unread.contains(&api) {
            format!(
                "the `{field}` matcher can never match {api:?}: kmock does not read the \
                 {field} of {api:?} requests yet (it does for {})",
                names(read)
            )
        } else {
            format!(
                "the `{field}` matcher can never match {api:?}: {api:?} requests carry no \
                 {field} (it matches {})",
                names(read)
            )
        });
    }
    Ok(())
}

fn names(apis: &[ApiKey]) -> String {
    apis.iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether the request names `topic`: one of its partitions' topics, a topic DeleteTopics
/// deletes, a topic Metadata asks about, or any topic for a Metadata request for all topics.
pub(super) fn names_topic(entry: &Entry, topic: &str) -> bool {
    match &entry.request {
        Some(RequestSummary::Metadata(m)) => m
            .topics
            .as_ref()
            .is_none_or(|topics| topics.iter().any(|t| t == topic)),
        _ => entry.topics().contains(&topic),
    }
}

/// Whether the request carries `producer_id`: in one of a Produce request's batches, or as an
/// InitProducerId request's producer id (a producer bumping its epoch, KIP-360).
pub(super) fn carries_producer_id(entry: &Entry, producer_id: i64) -> bool {
    match &entry.request {
        Some(RequestSummary::InitProducerId(s)) => s.producer_id == producer_id,
        _ => entry.producer_ids().contains(&producer_id),
    }
}
