//! JoinGroup (API key 11), versions 0–9.
//!
//! The classic group protocol as Kafka's `GroupCoordinator.handleJoinGroup`
//! ([`crate::state::groups`]): a first join from v4 gets MEMBER_ID_REQUIRED with the id to use
//! (KIP-394); a join waits until every member has rejoined or the rebalance timeout passes;
//! the leader gets every member's metadata. NOT_COORDINATOR on any broker but the group's
//! coordinator; session timeouts outside 6 s–30 min get INVALID_SESSION_TIMEOUT.
//!
//! A KIP-848 consumer group with no members becomes a classic group again, as Kafka deletes
//! an empty consumer group on a classic join. A static member's new instance (an empty member
//! id, a known `group.instance.id`) in a Stable group whose protocol stays the one chosen takes
//! the old member's place and assignment with no rebalance: the old id is fenced, and from v9 a
//! replaced leader gets its members with `skip_assignment` (Kafka's
//! `updateStaticMemberThenRebalanceOrCompleteJoin`; conformance case
//! `join_group_static_member_replaced_by_a_new_instance`); otherwise the replacement rebalances.
//!
//! A JoinGroup to a KIP-848 consumer group that has members joins it as a classic-protocol
//! member (Kafka 4's `classicGroupJoinToConsumerGroup`, [`crate::state::groups::consumer::classic`]):
//! INCONSISTENT_GROUP_PROTOCOL when `group.consumer.migration.policy` is `disabled` or no
//! protocol is one every classic member supports, GROUP_MAX_SIZE_REACHED past
//! `group.consumer.max.size`, MEMBER_ID_REQUIRED from v4; otherwise answered at once with the
//! member epoch after its reconciliation as the generation, protocol type `consumer`, its first
//! protocol, no leader and no member list.
//!
//! Deviations from Apache Kafka: a static classic member (`group.instance.id`) replacing the
//! last consumer-protocol member of a consumer group downgrades the group as Kafka does, and its
//! JoinGroup is answered REBALANCE_IN_PROGRESS to rejoin the classic group (Kafka's answer there
//! not verified), without Kafka's `classic.group.max.size` condition on the downgrade; no
//! initial rebalance delay (Kafka waits
//! `group.initial.rebalance.delay.ms`, 3 s, before completing the first rebalance of an empty
//! group). A join whose member has no candidate protocol to vote for when the rebalance
//! completes (protocols are counted with duplicates, as Kafka's `ClassicGroup` counts them, so
//! a lone member naming `[p, p]` has none) closes the connection and the member is removed
//! ([`answer`]): Kafka 4.4.0 (and 3.x's `GroupMetadata`) never answers it (the protocol vote
//! throws "Member does not support any of the candidate protocols" and the group stays
//! preparing a rebalance with the member in it; its other members' joins are not answered
//! either, where kmock's are).

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, ResponseKind};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::{Answer, Ctx};
use crate::state::groups::{JoinRequest, JoinResult, Pending};

/// Versions implemented.
pub const VERSIONS: VersionRange = JoinGroupRequest::VERSIONS;

/// [`handle`], but a join Kafka never answers closes the connection: the rebalance's protocol
/// vote found no candidate protocol the member supports (a lone member naming `[p, p]`, a
/// protocol named twice counting twice as in Kafka's `ClassicGroup.candidateProtocols`), so
/// Kafka's vote throws and the group stays preparing a rebalance. A closed connection is the
/// nearest defined answer; the member is removed from the group. Every other answer is
/// Kafka's (a lone member naming `[p, p, q]` is served with `q`).
pub async fn answer(ctx: &Ctx<'_>, request: JoinGroupRequest, version: i16) -> Answer {
    match handle(ctx, request, version).await {
        (_, Some(reason)) => Answer::Close(reason),
        (answer, None) => Answer::Respond(Box::new(ResponseKind::JoinGroup(answer))),
    }
}

/// Joins (or rejoins) the group, waiting for the rebalance to complete; with the reason to
/// close the connection instead of answering, when Kafka would never answer.
async fn handle(
    ctx: &Ctx<'_>,
    request: JoinGroupRequest,
    version: i16,
) -> (JoinGroupResponse, Option<String>) {
    let group_id = request.group_id.0.as_str().to_owned();
    let result = {
        let join = JoinRequest {
            group_id,
            member_id: request.member_id.as_str().to_owned(),
            group_instance_id: request
                .group_instance_id
                .as_ref()
                .map(|s| s.as_str().to_owned()),
            client_id: ctx.client_id.to_owned(),
            client_host: format!("/{}", ctx.peer.ip()),
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: if version >= 1 {
                request.rebalance_timeout_ms
            } else {
                request.session_timeout_ms
            },
            protocol_type: request.protocol_type.as_str().to_owned(),
            protocols: request
                .protocols
                .iter()
                .map(|p| (p.name.as_str().to_owned(), p.metadata.clone()))
                .collect(),
            require_known_member_id: version >= 4,
            supports_skip_assignment: version >= 9,
        };
        // Checked and joined under one lock, so a coordinator move cannot fall in between.
        let pending = {
            let mut state = ctx.shared.state();
            if ctx.coordinates_group(&state, &join.group_id) {
                let state = &mut *state;
                let topics = super::consumer_group_heartbeat::ClusterTopics(&state.topics);
                state
                    .groups
                    .join_with(join, &topics, tokio::time::Instant::now())
            } else {
                Pending::Now(JoinResult {
                    error: Some(ResponseError::NotCoordinator),
                    generation_id: -1,
                    member_id: join.member_id,
                    ..JoinResult::default()
                })
            }
        };
        match pending {
            Pending::Now(result) => result,
            Pending::Wait(rx) => rx.await.unwrap_or_else(|_| JoinResult {
                error: Some(ResponseError::UnknownMemberId),
                generation_id: -1,
                member_id: request.member_id.as_str().to_owned(),
                ..JoinResult::default()
            }),
        }
    };
    let text = |s: String| StrBytes::from_string(s);
    let closed = result.closed;
    let response = JoinGroupResponse::default()
        .with_error_code(result.error.map_or(0, |e| e.code()))
        .with_generation_id(result.generation_id)
        .with_protocol_type(if version >= 7 {
            result.protocol_type.map(text)
        } else {
            None
        })
        .with_protocol_name(
            result
                .protocol_name
                .map(text)
                .or((version < 7).then(StrBytes::default)),
        )
        .with_leader(text(result.leader))
        .with_skip_assignment(version >= 9 && result.skip_assignment)
        .with_member_id(text(result.member_id))
        .with_members(
            result
                .members
                .into_iter()
                .map(
                    |(id, instance, metadata): (String, Option<String>, Bytes)| {
                        JoinGroupResponseMember::default()
                            .with_member_id(text(id))
                            .with_group_instance_id(if version >= 5 {
                                instance.map(text)
                            } else {
                                None
                            })
                            .with_metadata(metadata)
                    },
                )
                .collect(),
        );
    (response, closed)
}
