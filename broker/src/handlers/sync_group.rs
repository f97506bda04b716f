//! SyncGroup (API key 14), versions 0–5.
//!
//! As Kafka's `GroupCoordinator.handleSyncGroup` ([`crate::state::groups`]): the leader's
//! assignment is stored and handed to every member; followers wait for it. UNKNOWN_MEMBER_ID,
//! FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS and (v5) a protocol type or
//! name missing or other than the group's, INCONSISTENT_GROUP_PROTOCOL; an empty group id,
//! INVALID_GROUP_ID (`GroupCoordinatorService.syncGroup`). NOT_COORDINATOR on any broker but
//! the group's coordinator.
//!
//! A classic-protocol member of a KIP-848 consumer group (KIP-848's online migration,
//! [`crate::state::groups::consumer::classic`]) gets its current assignment at once, in the
//! consumer protocol version of its metadata, as Kafka's `classicGroupSyncToConsumerGroup`:
//! ILLEGAL_GENERATION for a generation other than its member epoch, REBALANCE_IN_PROGRESS when
//! the group epoch moved past it (unless it is revoking), UNKNOWN_MEMBER_ID for a member of the
//! consumer protocol; it must sync within its rebalance timeout of joining or be fenced.
//!
//! Deviations from Apache Kafka: a member that never sends SyncGroup is not removed after the
//! rebalance timeout (Kafka's pending-sync expiry); its session timeout still removes it.

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::groups::Pending;

/// Versions implemented.
pub const VERSIONS: VersionRange = SyncGroupRequest::VERSIONS;

/// Stores the leader's assignment, or waits for it, and answers the member's own.
pub async fn handle(ctx: &Ctx<'_>, request: SyncGroupRequest, version: i16) -> SyncGroupResponse {
    let group_id = request.group_id.0.as_str();
    let result =
        if version >= 5 && (request.protocol_type.is_none() || request.protocol_name.is_none()) {
            // Kafka's KafkaApis.handleSyncGroupRequest: both are mandatory from v5.
            Err(ResponseError::InconsistentGroupProtocol)
        } else if group_id.is_empty() {
            // `GroupCoordinatorService.syncGroup`.
            Err(ResponseError::InvalidGroupId)
        } else {
            // Checked and synced under one lock, so a coordinator move cannot fall in between.
            let pending = {
                let mut state = ctx.shared.state();
                if !ctx.coordinates_group(&state, group_id) {
                    Pending::Now(Err(ResponseError::NotCoordinator))
                } else {
                    state.groups.sync(
                        group_id,
                        request.generation_id,
                        request.member_id.as_str(),
                        request.group_instance_id.as_ref().map(StrBytes::as_str),
                        request.protocol_type.as_ref().map(StrBytes::as_str),
                        request.protocol_name.as_ref().map(StrBytes::as_str),
                        request
                            .assignments
                            .iter()
                            .map(|a| (a.member_id.as_str().to_owned(), a.assignment.clone()))
                            .collect(),
                        tokio::time::Instant::now(),
                    )
                }
            };
            match pending {
                Pending::Now(result) => result,
                Pending::Wait(rx) => rx.await.unwrap_or(Err(ResponseError::UnknownMemberId)),
            }
        };
    match result {
        Ok(answer) => SyncGroupResponse::default()
            .with_protocol_type(
                (version >= 5)
                    .then_some(answer.protocol_type)
                    .flatten()
                    .map(StrBytes::from_string),
            )
            .with_protocol_name(
                (version >= 5)
                    .then_some(answer.protocol_name)
                    .flatten()
                    .map(StrBytes::from_string),
            )
            .with_assignment(answer.assignment),
        Err(error) => SyncGroupResponse::default().with_error_code(error.code()),
    }
}
