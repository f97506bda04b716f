//! Whether a request reaches a group coordinator's load check: the group APIs go through
//! Kafka's `CoordinatorRuntime`, which answers NOT_COORDINATOR for a group whose
//! `__consumer_offsets` partition this broker does not lead, and `GroupCoordinatorService`
//! answers INVALID_GROUP_ID for an empty group id, both before the runtime looks at whether
//! the partition is still loading (COORDINATOR_LOAD_IN_PROGRESS). Fault rules made with
//! [`crate::faults::Rule::at_group_coordinator`] (the `coordinator_load` rules) fire only on
//! requests that reach it ([`reaches_group_load`]).

use kafka_protocol::messages::{GroupId, RequestKind};

use crate::state::ClusterState;

/// The group ids `request` names, or `None` when it is not a request of a group API that goes
/// through the group coordinator's runtime.
fn group_ids(request: &RequestKind) -> Option<Vec<&str>> {
    fn one(g: &GroupId) -> Vec<&str> {
        vec![g.0.as_str()]
    }
    Some(match request {
        RequestKind::JoinGroup(r) => one(&r.group_id),
        RequestKind::SyncGroup(r) => one(&r.group_id),
        RequestKind::Heartbeat(r) => one(&r.group_id),
        RequestKind::LeaveGroup(r) => one(&r.group_id),
        RequestKind::OffsetCommit(r) => one(&r.group_id),
        RequestKind::OffsetDelete(r) => one(&r.group_id),
        RequestKind::ConsumerGroupHeartbeat(r) => one(&r.group_id),
        RequestKind::OffsetFetch(r) if r.groups.is_empty() => one(&r.group_id),
        RequestKind::OffsetFetch(r) => r.groups.iter().map(|g| g.group_id.0.as_str()).collect(),
        RequestKind::DescribeGroups(r) => r.groups.iter().map(|g| g.0.as_str()).collect(),
        RequestKind::DeleteGroups(r) => r.groups_names.iter().map(|g| g.0.as_str()).collect(),
        RequestKind::ConsumerGroupDescribe(r) => r.group_ids.iter().map(|g| g.0.as_str()).collect(),
        _ => return None,
    })
}

/// Whether `request`, arriving at broker `node_id`, reaches the group coordinator's load
/// check: always for a request of no group API; for one of a group API, when one of its
/// group ids is not empty and `node_id` coordinates it. A batch naming groups of several
/// coordinators reaches it when one of them is here (Kafka answers each group on its own: the
/// others NOT_COORDINATOR).
pub(crate) fn reaches_group_load(
    state: &ClusterState,
    node_id: i32,
    request: &RequestKind,
) -> bool {
    group_ids(request).is_none_or(|ids| {
        ids.iter()
            .any(|g| !g.is_empty() && state.group_coordinator(g) == node_id)
    })
}

/// Whether [`reaches_group_load`] can say anything but `true` of `request` (it names groups).
pub(crate) fn names_groups(request: &RequestKind) -> bool {
    group_ids(request).is_some()
}
