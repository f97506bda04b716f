//! DescribeGroups (API key 15), versions 0–6.
//!
//! State, protocol type, protocol and members (ids, client id and host, metadata, assignment)
//! of each group; protocol, metadata and assignment only while Stable, as Kafka's
//! `GroupMetadata.summary`. A group that does not exist is described as Dead, with GROUP_ID_NOT_FOUND
//! from v6 (KIP-1043), as Kafka. NOT_COORDINATOR on any broker but the group's coordinator.
//!
//! Deviations from Apache Kafka: no authorized operations are reported.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::groups::GroupState;

/// Versions implemented.
pub const VERSIONS: VersionRange = DescribeGroupsRequest::VERSIONS;

/// Describes each group.
pub fn handle(
    ctx: &Ctx<'_>,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let text = StrBytes::from_string;
    let groups = request
        .groups
        .iter()
        .map(|id| {
            let described = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(i32::MIN);
            let state = ctx.shared.state();
            if !ctx.coordinates_group(&state, id.0.as_str()) {
                return described.with_error_code(ResponseError::NotCoordinator.code());
            }
            let Some(group) = state.groups.get(id.0.as_str()) else {
                let dead = described.with_group_state(text(GroupState::Dead.name().to_owned()));
                return if version >= 6 {
                    dead.with_error_code(ResponseError::GroupIdNotFound.code())
                } else {
                    dead
                };
            };
            let members = group
                .described_members()
                .into_iter()
                .map(
                    |(member_id, instance, client_id, client_host, metadata, assignment)| {
                        DescribedGroupMember::default()
                            .with_member_id(text(member_id))
                            .with_group_instance_id(if version >= 4 {
                                instance.map(text)
                            } else {
                                None
                            })
                            .with_client_id(text(client_id))
                            .with_client_host(text(client_host))
                            .with_member_metadata(metadata)
                            .with_member_assignment(assignment)
                    },
                )
                .collect();
            described
                .with_group_state(text(group.state().name().to_owned()))
                .with_protocol_type(text(group.protocol_type().unwrap_or_default().to_owned()))
                .with_protocol_data(text(if group.state() == GroupState::Stable {
                    group.protocol_name().unwrap_or_default().to_owned()
                } else {
                    String::new()
                }))
                .with_members(members)
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}
