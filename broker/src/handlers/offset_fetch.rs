//! OffsetFetch (API key 9), versions 1–9.
//!
//! The committed offset, leader epoch and metadata of each asked partition of a group (v8+:
//! of several groups), or of every committed partition when the topics are null (v2+);
//! offset -1 for a partition with no commit, and for a group that does not exist.
//! NOT_COORDINATOR on any broker but the group's coordinator.
//!
//! With `require_stable` (v7+), a partition with an offset pending in an open transaction
//! (TxnOffsetCommit before its EndTxn) is answered UNSTABLE_OFFSET_COMMIT with offset -1, as
//! Kafka's `OffsetMetadataManager.fetchOffsets`.
//!
//! For a KIP-848 consumer group, the member id and epoch (v9) are checked as Kafka's
//! `ConsumerGroup.validateOffsetFetch`: none (null id, epoch -1) passes; an id that is not a
//! member gets UNKNOWN_MEMBER_ID, an epoch other than the member's STALE_MEMBER_EPOCH, for the
//! whole group. A classic group ignores them, as Kafka does.
//!
//! Deviations from Apache Kafka: none known.

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::{topic_name, Ctx};
use crate::state::groups::CommittedOffset;

/// Versions implemented.
pub const VERSIONS: VersionRange = OffsetFetchRequest::VERSIONS;

/// `(topic, [(partition, committed)])`, in the order asked; `Err` for a partition answered
/// with an error (UNSTABLE_OFFSET_COMMIT).
type Fetched = Vec<(
    String,
    Vec<(i32, Result<Option<CommittedOffset>, ResponseError>)>,
)>;

/// Answers each group's committed offsets.
pub fn handle(ctx: &Ctx<'_>, request: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    if version >= 8 {
        let groups = request
            .groups
            .iter()
            .map(|g| {
                let asked = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes.clone()))
                        .collect()
                });
                let answer = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                let member = (g.member_id.as_ref().map(|m| m.as_str()), g.member_epoch);
                match fetch(ctx, &g.group_id, asked, request.require_stable, member) {
                    Err(e) => answer.with_error_code(e.code()),
                    Ok(found) => answer.with_topics(
                        found
                            .into_iter()
                            .map(|(topic, partitions)| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(topic_name(&topic))
                                    .with_partitions(
                                        partitions
                                            .into_iter()
                                            .map(|(p, c)| {
                                                let (offset, epoch, metadata, code) = parts(c);
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(p)
                                                    .with_committed_offset(offset)
                                                    .with_committed_leader_epoch(epoch)
                                                    .with_metadata(Some(metadata))
                                                    .with_error_code(code)
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    ),
                }
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let asked = request.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes.clone()))
            .collect()
    });
    let require_stable = version >= 7 && request.require_stable;
    match fetch(ctx, &request.group_id, asked, require_stable, (None, -1)) {
        Err(e) => error_answer(&request, version, e),
        Ok(found) => OffsetFetchResponse::default().with_topics(
            found
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic)))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(p, c)| {
                                    let (offset, epoch, metadata, code) = parts(c);
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_error_code(code)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(if version >= 5 {
                                            epoch
                                        } else {
                                            -1
                                        })
                                        .with_metadata(Some(metadata))
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
    }
}

/// The answer carrying a group-level `error`: top level from v2; before, on every partition
/// asked, as Kafka's `OffsetFetchRequest.getErrorResponse`. (v8+ answers per group.)
pub fn error_answer(
    request: &OffsetFetchRequest,
    version: i16,
    error: ResponseError,
) -> OffsetFetchResponse {
    if version >= 2 {
        return OffsetFetchResponse::default().with_error_code(error.code());
    }
    OffsetFetchResponse::default().with_topics(
        request
            .topics
            .iter()
            .flatten()
            .map(|t| {
                OffsetFetchResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partition_indexes
                            .iter()
                            .map(|&p| {
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(-1)
                                    .with_metadata(Some(StrBytes::default()))
                                    .with_error_code(error.code())
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// Offset, leader epoch, metadata and error code of one partition's answer.
fn parts(committed: Result<Option<CommittedOffset>, ResponseError>) -> (i64, i32, StrBytes, i16) {
    match committed {
        Ok(Some(c)) => (
            c.offset,
            c.leader_epoch,
            StrBytes::from_string(c.metadata.unwrap_or_default()),
            0,
        ),
        Ok(None) => (-1, -1, StrBytes::default(), 0),
        Err(e) => (-1, -1, StrBytes::default(), e.code()),
    }
}

/// The committed offsets asked (`None`: every committed partition); with `require_stable`,
/// UNSTABLE_OFFSET_COMMIT for a partition with an offset pending in an open transaction;
/// `member` (id, epoch) checked against a consumer group.
fn fetch(
    ctx: &Ctx<'_>,
    group_id: &GroupId,
    asked: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
    (member_id, member_epoch): (Option<&str>, i32),
) -> Result<Fetched, ResponseError> {
    let group_id = group_id.0.as_str();
    let state = ctx.shared.state();
    if !ctx.coordinates_group(&state, group_id) {
        return Err(ResponseError::NotCoordinator);
    }
    if let Some(cg) = state.groups.get(group_id).and_then(|g| g.consumer.as_ref()) {
        cg.check_fetch(member_id, member_epoch)?;
    }
    let offsets = state.groups.get(group_id).map(|g| &g.offsets);
    let unstable = |topic: &str, p: i32| {
        require_stable && state.transactions.has_pending_offset(group_id, topic, p)
    };
    let lookup = |topic: &str, p: i32| {
        if unstable(topic, p) {
            return Err(ResponseError::UnstableOffsetCommit);
        }
        Ok(offsets.and_then(|o| o.get(&(topic.to_owned(), p)).cloned()))
    };
    Ok(match asked {
        Some(asked) => asked
            .into_iter()
            .map(|(topic, partitions)| {
                let found = partitions.iter().map(|&p| (p, lookup(&topic, p))).collect();
                (topic, found)
            })
            .collect(),
        None => {
            let mut all: Fetched = Vec::new();
            for ((topic, p), c) in offsets.into_iter().flatten() {
                let answer = if unstable(topic, *p) {
                    Err(ResponseError::UnstableOffsetCommit)
                } else {
                    Ok(Some(c.clone()))
                };
                match all.last_mut() {
                    Some((t, list)) if t == topic => list.push((*p, answer)),
                    _ => all.push((topic.clone(), vec![(*p, answer)])),
                }
            }
            all
        }
    })
}
