//! OffsetFetch (API key 9), versions 1–9.
//!
//! The committed offset, leader epoch and metadata of each asked partition of a group (v8+:
//! of several groups), or of every committed partition when the topics are null (v2+);
//! offset -1 for a partition with no commit, and for a group that does not exist.
//! NOT_COORDINATOR on any broker but the group's coordinator.
//!
//! Deviations from Apache Kafka: `require_stable` has nothing to wait for (no transactional
//! offsets yet); the KIP-848 member id and epoch (v9) are not checked.

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

/// `(topic, [(partition, committed)])`, in the order asked.
type Fetched = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

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
                match fetch(ctx, &g.group_id, asked) {
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
                                                let (offset, epoch, metadata) = parts(c);
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(p)
                                                    .with_committed_offset(offset)
                                                    .with_committed_leader_epoch(epoch)
                                                    .with_metadata(Some(metadata))
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
    match fetch(ctx, &request.group_id, asked) {
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
                                    let (offset, epoch, metadata) = parts(c);
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
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

fn parts(committed: Option<CommittedOffset>) -> (i64, i32, StrBytes) {
    match committed {
        Some(c) => (
            c.offset,
            c.leader_epoch,
            StrBytes::from_string(c.metadata.unwrap_or_default()),
        ),
        None => (-1, -1, StrBytes::default()),
    }
}

/// The committed offsets asked (`None`: every committed partition).
fn fetch(
    ctx: &Ctx<'_>,
    group_id: &GroupId,
    asked: Option<Vec<(String, Vec<i32>)>>,
) -> Result<Fetched, ResponseError> {
    let group_id = group_id.0.as_str();
    let state = ctx.shared.state();
    if !ctx.coordinates_group(&state, group_id) {
        return Err(ResponseError::NotCoordinator);
    }
    let offsets = state.groups.get(group_id).map(|g| &g.offsets);
    let lookup = |topic: &str, p: i32| offsets.and_then(|o| o.get(&(topic.to_owned(), p)).cloned());
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
                match all.last_mut() {
                    Some((t, list)) if t == topic => list.push((*p, Some(c.clone()))),
                    _ => all.push((topic.clone(), vec![(*p, Some(c.clone()))])),
                }
            }
            all
        }
    })
}
