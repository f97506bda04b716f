//! LeaveGroup (API key 13), versions 0–5.
//!
//! One member (v0–2) or a batch (v3+, KIP-345, by member id or group instance id) leaves; the
//! group rebalances, or becomes Empty. An empty group id is INVALID_GROUP_ID with no member
//! answered (`GroupCoordinatorService.leaveGroup`). NOT_COORDINATOR on any broker but the group's
//! coordinator.
//!
//! In a KIP-848 consumer group a member of either protocol leaves this way (Kafka 4.4's
//! `classicGroupLeaveToConsumerGroup`); the group epoch moves once for the batch, or the group
//! is downgraded when only classic members remain (a `GroupConverted` journal entry).
//!
//! Deviations from Apache Kafka: none known.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;

/// Versions implemented.
pub const VERSIONS: VersionRange = LeaveGroupRequest::VERSIONS;

/// Removes the members.
pub fn handle(ctx: &Ctx<'_>, request: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let group_id = request.group_id.0.as_str();
    let leaving: Vec<(String, Option<String>)> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.as_str().to_owned(),
                    m.group_instance_id.as_ref().map(|s| s.as_str().to_owned()),
                )
            })
            .collect()
    } else {
        vec![(request.member_id.as_str().to_owned(), None)]
    };
    // `GroupCoordinatorService.leaveGroup`: an empty group id, no member answered.
    if group_id.is_empty() {
        return LeaveGroupResponse::default().with_error_code(ResponseError::InvalidGroupId.code());
    }
    let mut state = ctx.shared.state();
    if !ctx.coordinates_group(&state, group_id) {
        return LeaveGroupResponse::default().with_error_code(ResponseError::NotCoordinator.code());
    }
    let results = state
        .groups
        .leave(group_id, &leaving, tokio::time::Instant::now());
    let conversions = state.groups.take_conversions();
    drop(state);
    super::consumer_group_heartbeat::journal_conversions(ctx.shared, ctx.node_id, conversions);
    let code = |r: &Result<(), ResponseError>| r.err().map_or(0, |e| e.code());
    if version < 3 {
        return LeaveGroupResponse::default().with_error_code(results.first().map_or(0, code));
    }
    LeaveGroupResponse::default().with_members(
        leaving
            .into_iter()
            .zip(&results)
            .map(|((member_id, instance), result)| {
                MemberResponse::default()
                    .with_member_id(StrBytes::from_string(member_id))
                    .with_group_instance_id(instance.map(StrBytes::from_string))
                    .with_error_code(code(result))
            })
            .collect(),
    )
}
