//! Heartbeat (API key 12), versions 0–4.
//!
//! As Kafka's `GroupCoordinator.handleHeartbeat`: keeps the member's session alive; answers
//! REBALANCE_IN_PROGRESS while the group waits for members to rejoin, and UNKNOWN_MEMBER_ID,
//! FENCED_INSTANCE_ID or ILLEGAL_GENERATION to a member that is not current. NOT_COORDINATOR on
//! any broker but the group's coordinator; INVALID_GROUP_ID for an empty group id, before
//! anything else (`GroupCoordinatorService.heartbeat`). While the coordinator loads
//! ([`crate::ClusterBuilder::coordinator_load`]: its `coordinator_load` rule on Heartbeat, in
//! force until its window ends or it is removed, and named in the entry's faults) a Heartbeat
//! to the group's coordinator is answered NONE without looking at the group, as Kafka's
//! `GroupCoordinatorService.heartbeat` answers the COORDINATOR_LOAD_IN_PROGRESS of its runtime
//! ("the group is still loading, so blindly respond"; `fault_answers`), where the other group
//! APIs get that error.
//!
//! A classic-protocol member of a KIP-848 consumer group ([`crate::state::groups::consumer::classic`])
//! is told REBALANCE_IN_PROGRESS when the group epoch moved past its member epoch, when it has
//! partitions to revoke, or when partitions it waits for were released (Kafka's
//! `classicGroupHeartbeatToConsumerGroup`); it must then rejoin within its rebalance timeout or
//! be fenced.
//!
//! Deviations from Apache Kafka: none known.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;

/// Versions implemented.
pub const VERSIONS: VersionRange = HeartbeatRequest::VERSIONS;

/// Records the heartbeat.
pub fn handle(ctx: &Ctx<'_>, request: HeartbeatRequest, _version: i16) -> HeartbeatResponse {
    let group_id = request.group_id.0.as_str();
    // `GroupCoordinatorService.heartbeat`: an empty group id before anything else.
    if group_id.is_empty() {
        return HeartbeatResponse::default().with_error_code(ResponseError::InvalidGroupId.code());
    }
    let mut state = ctx.shared.state();
    let result = if !ctx.coordinates_group(&state, group_id) {
        Err(ResponseError::NotCoordinator)
    } else {
        state.groups.heartbeat(
            group_id,
            request.generation_id,
            request.member_id.as_str(),
            request.group_instance_id.as_ref().map(StrBytes::as_str),
            tokio::time::Instant::now(),
        )
    };
    HeartbeatResponse::default().with_error_code(result.err().map_or(0, |e| e.code()))
}
