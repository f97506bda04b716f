//! DescribeGroups (API key 15), versions 0–6.
//!
//! State, protocol type, protocol and members (ids, client id and host, metadata, assignment)
//! of each group; protocol, metadata and assignment only while Stable, as Kafka's
//! `GroupMetadata.summary`. A group that does not exist is described as Dead, with GROUP_ID_NOT_FOUND
//! from v6 (KIP-1043), as Kafka; so is a KIP-848 consumer group (Kafka 4's
//! `GroupMetadataManager.describeGroups` describes classic groups only: ConsumerGroupDescribe
//! describes the others). NOT_COORDINATOR on any broker but the group's coordinator. With
//! `include_authorized_operations` (v3+), a group answered without error carries the
//! operations a broker without an authorizer allows on a group ([`GROUP_OPERATIONS`]), also a
//! Dead one, as Kafka 4.4.0 answers (`describe_groups_authorized_operations`); otherwise the
//! field is left at `i32::MIN` (omitted).

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::groups::GroupState;

/// Versions implemented.
pub const VERSIONS: VersionRange = DescribeGroupsRequest::VERSIONS;

/// The operations a broker without an authorizer answers for a group: READ, DELETE, DESCRIBE,
/// DESCRIBE_CONFIGS and ALTER_CONFIGS (`AclEntry.supportedOperations(GROUP)`) as a bit field
/// (3400, as Kafka 4.4.0 answers).
pub const GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);

/// The authorized operations of a group answered with `error_code`: [`GROUP_OPERATIONS`] when
/// asked for and the group was answered without error, else omitted (`i32::MIN`).
pub fn authorized_operations(include: bool, error_code: i16) -> i32 {
    if include && error_code == 0 {
        GROUP_OPERATIONS
    } else {
        i32::MIN
    }
}

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
            // Kafka's `describeGroups` takes classic groups only: a consumer group is not
            // found, as one that does not exist.
            let Some(group) = state
                .groups
                .get(id.0.as_str())
                .filter(|g| g.consumer.is_none())
            else {
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
        .map(|g: DescribedGroup| {
            let ops = authorized_operations(request.include_authorized_operations, g.error_code);
            g.with_authorized_operations(ops)
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}
