//! ConsumerGroupDescribe (API key 69), versions 0–1: KIP-848 consumer groups as Kafka 4.4's
//! `GroupMetadataManager.consumerGroupDescribe` describes them.
//!
//! Per group: state (`Empty`, `Assigning`, `Reconciling`, `Stable`), group and assignment
//! epochs, the assignor, and each member's ids, epoch, client, subscription, current and
//! target assignments (topic id and name), and (v1) its type, 1 for the consumer protocol.
//! INVALID_GROUP_ID for an empty id, NOT_COORDINATOR on any broker but the group's
//! coordinator, GROUP_ID_NOT_FOUND for a group that does not exist or is a classic one. The
//! empty ids are answered first, then the others in request order (Kafka's
//! `GroupCoordinatorService.consumerGroupDescribe` answers the invalid ids before asking the
//! coordinator shards). With `include_authorized_operations`, a group answered without error
//! carries the operations allowed on a group
//! ([`GROUP_OPERATIONS`](super::describe_groups::GROUP_OPERATIONS)).
//!
//! Emulating a Kafka before 4.0 ([`crate::KafkaVersion`]): every group UNSUPPORTED_VERSION, as
//! Kafka 3.7-3.9 answer while the consumer protocol is off (their default).

use std::collections::BTreeMap;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::{str_bytes, topic_name, Ctx};
use crate::state::groups::consumer::Partitions;

/// Versions implemented.
pub const VERSIONS: VersionRange = ConsumerGroupDescribeRequest::VERSIONS;

/// Describes each group.
pub fn handle(
    ctx: &Ctx<'_>,
    request: ConsumerGroupDescribeRequest,
    version: i16,
) -> ConsumerGroupDescribeResponse {
    if ctx.shared.config.kafka_version < crate::KafkaVersion::V4_0 {
        // As Kafka 3.7-3.9 with their default `group.coordinator.rebalance.protocols=classic`:
        // every group UNSUPPORTED_VERSION (`ConsumerGroupDescribeRequest.getErrorResponse`).
        let unsupported = |id: &kafka_protocol::messages::GroupId| {
            DescribedGroup::default()
                .with_group_id(id.clone())
                .with_error_code(ResponseError::UnsupportedVersion.code())
        };
        return ConsumerGroupDescribeResponse::default()
            .with_groups(request.group_ids.iter().map(unsupported).collect());
    }
    let state = ctx.shared.state();
    let assignors = state.groups.consumer_config.assignors;
    let names: BTreeMap<uuid::Uuid, &str> = state
        .topics
        .iter()
        .map(|(name, t)| (t.id, name.as_str()))
        .collect();
    let assignment = |a: &Partitions| {
        Assignment::default().with_topic_partitions(
            a.iter()
                .map(|(id, ps)| {
                    TopicPartitions::default()
                        .with_topic_id(*id)
                        .with_topic_name(topic_name(names.get(id).copied().unwrap_or_default()))
                        .with_partitions(ps.iter().copied().collect())
                })
                .collect(),
        )
    };
    // The empty (invalid) ids first, as Kafka answers them before the coordinator's.
    let (empty, named): (Vec<_>, Vec<_>) = request.group_ids.iter().partition(|id| id.0.is_empty());
    let groups = empty
        .into_iter()
        .chain(named)
        .map(|id| {
            let group_id = id.0.as_str();
            let described = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(i32::MIN);
            let fail = |e: ResponseError, m: Option<String>| {
                described
                    .clone()
                    .with_error_code(e.code())
                    .with_error_message(m.map(|m| str_bytes(&m)))
            };
            if group_id.is_empty() {
                return fail(ResponseError::InvalidGroupId, None);
            }
            if !ctx.coordinates_group(&state, group_id) {
                return fail(ResponseError::NotCoordinator, None);
            }
            let Some(group) = state.groups.get(group_id) else {
                return fail(
                    ResponseError::GroupIdNotFound,
                    Some(format!("Group {group_id} not found.")),
                );
            };
            let Some(cg) = group.consumer.as_deref() else {
                return fail(
                    ResponseError::GroupIdNotFound,
                    Some(format!("Group {group_id} is not a consumer group.")),
                );
            };
            let members = cg
                .members
                .iter()
                .map(|(member_id, m)| {
                    Member::default()
                        .with_member_id(str_bytes(member_id))
                        .with_instance_id(m.instance_id.as_deref().map(str_bytes))
                        .with_rack_id(m.rack_id.as_deref().map(str_bytes))
                        .with_member_epoch(m.member_epoch)
                        .with_client_id(str_bytes(&m.client_id))
                        .with_client_host(str_bytes(&m.client_host))
                        .with_subscribed_topic_names(
                            m.subscribed_topic_names
                                .iter()
                                .map(|t| topic_name(t))
                                .collect(),
                        )
                        .with_subscribed_topic_regex(
                            m.subscribed_topic_regex.as_deref().map(str_bytes),
                        )
                        .with_assignment(assignment(&m.assigned_partitions()))
                        .with_target_assignment(assignment(
                            &cg.target.get(member_id).cloned().unwrap_or_default(),
                        ))
                        // Kafka's `MemberType`: 0 classic protocol, 1 consumer (v1+).
                        .with_member_type(match (version >= 1, m.classic.is_some()) {
                            (false, _) => -1,
                            (true, true) => 0,
                            (true, false) => 1,
                        })
                })
                .collect();
            described
                .with_group_state(str_bytes(cg.state().name()))
                .with_group_epoch(cg.group_epoch)
                .with_assignment_epoch(cg.assignment_epoch)
                .with_assignor_name(str_bytes(cg.assignor(assignors)))
                .with_members(members)
        })
        .map(|g: DescribedGroup| {
            let ops = super::describe_groups::authorized_operations(
                request.include_authorized_operations,
                g.error_code,
            );
            g.with_authorized_operations(ops)
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}
