//! ListGroups (API key 16), versions 0–5.
//!
//! The groups this broker coordinates, with protocol type and (v4+) state, filtered by
//! `states_filter` (v4+) and `types_filter` (v5+): `classic`, or `consumer` for a KIP-848
//! group, whose protocol type is `consumer` and whose states are Kafka's `Empty`,
//! `Assigning`, `Reconciling` and `Stable`.
//!
//! Deviations from Apache Kafka: none known.

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};

use super::Ctx;

/// Versions implemented.
pub const VERSIONS: VersionRange = ListGroupsRequest::VERSIONS;

/// Lists the groups.
pub fn handle(ctx: &Ctx<'_>, request: ListGroupsRequest, version: i16) -> ListGroupsResponse {
    let wanted = |filter: &[StrBytes], value: &str| {
        filter.is_empty()
            || filter
                .iter()
                .any(|f| f.as_str().eq_ignore_ascii_case(value))
    };
    let state = ctx.shared.state();
    let groups = state
        .groups
        .iter()
        .filter(|(id, _)| ctx.coordinates_group(&state, id))
        .filter(|(_, g)| version < 4 || wanted(&request.states_filter, g.state_name()))
        .filter(|(_, g)| version < 5 || wanted(&request.types_filter, g.group_type()))
        .map(|(id, g)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id.clone())))
                .with_protocol_type(StrBytes::from_string(
                    g.protocol_type().unwrap_or_default().to_owned(),
                ))
                .with_group_state(StrBytes::from_static_str(g.state_name()))
                .with_group_type(StrBytes::from_static_str(g.group_type()))
        })
        .map(|g| match version {
            0..=3 => g
                .with_group_state(StrBytes::default())
                .with_group_type(StrBytes::default()),
            4 => g.with_group_type(StrBytes::default()),
            _ => g,
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
