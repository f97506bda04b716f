//! Classic consumer groups: JoinGroup, SyncGroup, Heartbeat and LeaveGroup errors (unknown
//! member, illegal generation, rebalance in progress, empty group id), OffsetCommit (simple
//! commits at generation -1, members and generations) and OffsetFetch of unknown groups and
//! topics.
//!
//! Kafka answers COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR
//! while its `__consumer_offsets` partition loads; the cases ask again, as clients do, so those
//! answers never reach a line.

use std::time::Duration;

use anyhow::{bail, Result};
use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, FindCoordinatorRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::ResponseError;
use kmock_client::Client;

use super::{case, err, text, Case};

pub(super) mod admin;
pub(super) mod classic;
pub(super) mod classic_admin;
mod commits;
mod consumer;
pub(super) mod coordinators;
pub(super) mod kip848;
mod members;
pub(super) mod migration;
pub(super) mod offset_edges;
pub(super) mod offset_fetch_edges;
pub(super) mod states;
pub(super) mod statics;

pub(super) use commits::commit as commit_as;

use commits::{
    offset_commit_and_fetch_unknown_group_and_topic, offset_commit_members_and_generations,
};
use consumer::{
    consumer_group_heartbeat_errors, consumer_group_reconciliation_and_commits,
    consumer_group_regex_subscriptions,
};
use members::{group_member_lifecycle, group_rebalance_in_progress, join_group_errors};

pub const CASES: &[Case] = &[
    case!(join_group_errors),
    case!(group_member_lifecycle),
    case!(group_rebalance_in_progress),
    case!(offset_commit_members_and_generations),
    case!(offset_commit_and_fetch_unknown_group_and_topic),
    case!(consumer_group_heartbeat_errors),
    case!(consumer_group_reconciliation_and_commits),
    case!(consumer_group_regex_subscriptions),
];

/// Whether `code` says "the coordinator is loading or elsewhere: ask again".
fn retriable(code: i16) -> bool {
    [
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::CoordinatorNotAvailable,
        ResponseError::NotCoordinator,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// Sends what `request` makes until its answer's error (`code` of it) is not retriable
/// ([`retriable`]), pausing as a client's retry backoff does; the case's hang guard bounds it.
async fn until_served<R, F>(client: &Client, version: i16, request: F) -> Result<R::Response>
where
    R: kafka_protocol::protocol::Request,
    F: Fn() -> R,
    R::Response: ErrorCode,
{
    loop {
        let answer = client.send(request(), version).await?;
        if !retriable(answer.code()) {
            return Ok(answer);
        }
        // A client's retry backoff; the hang guard bounds the loop.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The error code an answer's retriability is read from.
trait ErrorCode {
    fn code(&self) -> i16;
}

impl ErrorCode for kafka_protocol::messages::FindCoordinatorResponse {
    fn code(&self) -> i16 {
        self.coordinators
            .first()
            .map_or(self.error_code, |c| c.error_code)
    }
}

impl ErrorCode for JoinGroupResponse {
    fn code(&self) -> i16 {
        self.error_code
    }
}

impl ErrorCode for kafka_protocol::messages::OffsetCommitResponse {
    fn code(&self) -> i16 {
        self.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .find(|c| retriable(*c))
            .unwrap_or(0)
    }
}

impl ErrorCode for kafka_protocol::messages::OffsetFetchResponse {
    fn code(&self) -> i16 {
        self.groups
            .first()
            .map_or(self.error_code, |g| g.error_code)
    }
}

/// FindCoordinator v4 for `group` until a coordinator is named.
pub(super) async fn coordinator(client: &Client, group: &str) -> Result<()> {
    let answer = until_served(client, 4, || {
        FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![text(group)])
    })
    .await?;
    let code = answer.code();
    if code != 0 {
        bail!("FindCoordinator {group}: {}", err(code));
    }
    Ok(())
}

/// A consumer protocol subscription (v0) to no topic: what the coordinator may parse.
fn subscription() -> Bytes {
    Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff])
}

/// JoinGroup v9 of `member` (empty: a new member) to `group`, session timeout `session_ms`,
/// with `protocols` (name, metadata); asked again while the coordinator loads.
async fn join_with(
    client: &Client,
    group: &str,
    member: &str,
    session_ms: i32,
    protocols: &[&str],
) -> Result<JoinGroupResponse> {
    until_served(client, 9, || {
        JoinGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_session_timeout_ms(session_ms)
            .with_rebalance_timeout_ms(30_000)
            .with_member_id(text(member))
            .with_protocol_type(text("consumer"))
            .with_protocols(
                protocols
                    .iter()
                    .map(|p| {
                        JoinGroupRequestProtocol::default()
                            .with_name(text(p))
                            .with_metadata(subscription())
                    })
                    .collect(),
            )
    })
    .await
}

/// JoinGroup of `member` with the usual session timeout and the `range` protocol.
async fn join(client: &Client, group: &str, member: &str) -> Result<JoinGroupResponse> {
    join_with(client, group, member, 30_000, &["range"]).await
}

/// A member of `group` joined (after MEMBER_ID_REQUIRED) but not synced: its member id and
/// generation.
pub(super) async fn joined_member(client: &Client, group: &str) -> Result<(String, i32)> {
    coordinator(client, group).await?;
    let first = join(client, group, "").await?;
    let joined = join(client, group, first.member_id.as_str()).await?;
    if joined.error_code != 0 {
        bail!("JoinGroup {group}: {}", err(joined.error_code));
    }
    Ok((joined.member_id.to_string(), joined.generation_id))
}

/// A member of `group` in a stable group of one: joined (after MEMBER_ID_REQUIRED) and synced.
/// Its member id and generation.
pub(super) async fn stable_member(client: &Client, group: &str) -> Result<(String, i32)> {
    coordinator(client, group).await?;
    let first = join(client, group, "").await?;
    let joined = join(client, group, first.member_id.as_str()).await?;
    if joined.error_code != 0 {
        bail!("JoinGroup {group}: {}", err(joined.error_code));
    }
    let member = joined.member_id.to_string();
    let synced = sync(client, group, &member, joined.generation_id, true).await?;
    if synced != "NONE" {
        bail!("SyncGroup {group}: {synced}");
    }
    Ok((member, joined.generation_id))
}

/// SyncGroup v5 of `member` at `generation`, with an assignment for itself when `leader`: the
/// error name.
pub(super) async fn sync(
    client: &Client,
    group: &str,
    member: &str,
    generation: i32,
    leader: bool,
) -> Result<String> {
    let assignments = if leader {
        vec![SyncGroupRequestAssignment::default()
            .with_member_id(text(member))
            .with_assignment(Bytes::from_static(&[
                0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
            ]))]
    } else {
        Vec::new()
    };
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member))
        .with_protocol_type(Some(text("consumer")))
        .with_protocol_name(Some(text("range")))
        .with_assignments(assignments);
    Ok(err(client.send(request, 5).await?.error_code))
}

/// Heartbeat v4 of `member` at `generation`: the error name.
pub(super) async fn heartbeat(
    client: &Client,
    group: &str,
    member: &str,
    generation: i32,
) -> Result<String> {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member));
    Ok(err(client.send(request, 4).await?.error_code))
}

/// LeaveGroup v5 of `member`: the request's error and the member's.
pub(super) async fn leave(client: &Client, group: &str, member: &str) -> Result<String> {
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_members(vec![MemberIdentity::default().with_member_id(text(member))]);
    let answer = client.send(request, 5).await?;
    let members: Vec<String> = answer.members.iter().map(|m| err(m.error_code)).collect();
    Ok(format!(
        "{} members [{}]",
        err(answer.error_code),
        members.join(" ")
    ))
}

/// A ConsumerGroupHeartbeat at `version`, asked again while the coordinator loads.
pub(super) async fn consumer_heartbeat(
    client: &Client,
    version: i16,
    request: ConsumerGroupHeartbeatRequest,
) -> Result<ConsumerGroupHeartbeatResponse> {
    until_served(client, version, || request.clone()).await
}

/// The line of a ConsumerGroupHeartbeat answer without error: the member epoch relative to
/// `base` and how many partitions it assigns.
fn assigned_line(what: &str, answer: &ConsumerGroupHeartbeatResponse, base: i32) -> String {
    format!(
        "{what}: NONE epoch {:+} {:?} partitions",
        answer.member_epoch - base,
        answer.assignment.as_ref().map(|a| a
            .topic_partitions
            .iter()
            .map(|t| t.partitions.len())
            .sum::<usize>())
    )
}

/// The line of a JoinGroup answer: error, whether a member id came back, generation, whether the
/// member leads, how many members the leader is told of.
fn joined_line(what: &str, answer: &JoinGroupResponse) -> String {
    format!(
        "join {what}: {} member id {} generation {} leader {} members {}",
        err(answer.error_code),
        if answer.member_id.is_empty() {
            "empty"
        } else {
            "given"
        },
        answer.generation_id,
        !answer.member_id.is_empty() && answer.leader == answer.member_id,
        answer.members.len()
    )
}
