//! OffsetDelete (API key 47), version 0.
//!
//! Deletes committed offsets of a group, as Kafka's `GroupCoordinator.handleDeleteOffsets`
//! (KIP-496): an unknown group gets GROUP_ID_NOT_FOUND; a partition of a topic the group's
//! consumers subscribe to (or may: metadata that does not decode counts as every topic) gets
//! GROUP_SUBSCRIBED_TO_TOPIC; a non-empty group of another
//! protocol type gets NON_EMPTY_GROUP; partitions of unknown topics get
//! UNKNOWN_TOPIC_OR_PARTITION, partition by partition; the empty group id is INVALID_GROUP_ID before any of these.
//! NOT_COORDINATOR on any broker but the group's coordinator.
//!
//! Deviations from Apache Kafka: none known.

use std::collections::BTreeSet;

use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::offset_answers::{answer_each, partition_exists};
use super::Ctx;
use crate::state::groups::GroupState;

/// Versions implemented.
pub const VERSIONS: VersionRange = OffsetDeleteRequest::VERSIONS;

/// Deletes the offsets that may be deleted.
pub fn handle(ctx: &Ctx<'_>, request: OffsetDeleteRequest, _version: i16) -> OffsetDeleteResponse {
    let group_id = request.group_id.0.as_str();
    if group_id.is_empty() {
        // Before any routing, as Kafka's `GroupCoordinatorService.deleteOffsets`.
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::InvalidGroupId.code());
    }
    let mut state = ctx.shared.state();
    if !ctx.coordinates_group(&state, group_id) {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::NotCoordinator.code());
    }
    // A set of the request's own names: a request may name millions of partitions, and each
    // is looked up once, neither copied nor searched for in a list.
    let existing: BTreeSet<(&str, i32)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.as_str(), p.partition_index))
        })
        .filter(|&(t, p)| partition_exists(&state, t, p))
        .collect();
    let Some(group) = state
        .groups
        .get_mut(group_id)
        .filter(|g| g.state() != GroupState::Dead)
    else {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupIdNotFound.code());
    };
    let empty = group.state() == GroupState::Empty;
    if !empty && group.protocol_type() != Some("consumer") {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::NonEmptyGroup.code());
    }
    let topics = answer_each(&request.topics, |name, p| {
        if !existing.contains(&(name, p.partition_index)) {
            Some(ResponseError::UnknownTopicOrPartition)
        } else if !empty && group.is_subscribed_to(name) {
            Some(ResponseError::GroupSubscribedToTopic)
        } else {
            group.offsets.remove(&(name.to_owned(), p.partition_index));
            None
        }
    });
    OffsetDeleteResponse::default().with_topics(topics)
}
