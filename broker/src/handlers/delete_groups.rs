//! DeleteGroups (API key 42), versions 0–2.
//!
//! Deletes Empty groups with their committed offsets; a group with members gets
//! NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND, as Kafka's
//! `GroupCoordinator.handleDeleteGroups`; a group named twice is answered once (Kafka 4.4,
//! conformance case `delete_groups_same_group_twice`). NOT_COORDINATOR on any broker but the group's
//! coordinator.
//!
//! Deviations from Apache Kafka: none known.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;

/// Versions implemented.
pub const VERSIONS: VersionRange = DeleteGroupsRequest::VERSIONS;

/// Deletes each group.
pub fn handle(ctx: &Ctx<'_>, request: DeleteGroupsRequest, _version: i16) -> DeleteGroupsResponse {
    // A group named twice is deleted and answered once: Kafka's results are a collection keyed
    // by group id.
    let mut seen = std::collections::HashSet::new();
    let results = request
        .groups_names
        .iter()
        .filter(|id| seen.insert(id.0.as_str()))
        .map(|id| {
            let mut state = ctx.shared.state();
            let result = if !ctx.coordinates_group(&state, id.0.as_str()) {
                Err(ResponseError::NotCoordinator)
            } else {
                state.groups.delete(id.0.as_str())
            };
            DeletableGroupResult::default()
                .with_group_id(id.clone())
                .with_error_code(result.err().map_or(0, |e| e.code()))
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}
