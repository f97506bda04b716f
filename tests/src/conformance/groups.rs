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
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest,
};
use kafka_protocol::ResponseError;
use kmock_client::Client;

use super::{case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(join_group_errors),
    case!(group_member_lifecycle),
    case!(group_rebalance_in_progress),
    case!(offset_commit_members_and_generations),
    case!(offset_commit_and_fetch_unknown_group_and_topic),
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
async fn coordinator(client: &Client, group: &str) -> Result<()> {
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

/// A member of `group` in a stable group of one: joined (after MEMBER_ID_REQUIRED) and synced.
/// Its member id and generation.
async fn stable_member(client: &Client, group: &str) -> Result<(String, i32)> {
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
async fn sync(
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
async fn heartbeat(client: &Client, group: &str, member: &str, generation: i32) -> Result<String> {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member));
    Ok(err(client.send(request, 4).await?.error_code))
}

/// LeaveGroup v5 of `member`: the request's error and the member's.
async fn leave(client: &Client, group: &str, member: &str) -> Result<String> {
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

/// JoinGroup refusals: an empty group id, an unknown member id, a session timeout below the
/// broker's minimum, no protocols, and the first join of a new member (MEMBER_ID_REQUIRED).
async fn join_group_errors(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let mut lines = Vec::new();
    let answer = join(&client, "", "").await?;
    lines.push(joined_line("empty group id", &answer));
    let answer = join(&client, &group, "ghost").await?;
    lines.push(joined_line("unknown member", &answer));
    let answer = join_with(&client, &group, "", 1, &["range"]).await?;
    lines.push(joined_line("session timeout 1 ms", &answer));
    let answer = join_with(&client, &group, "", 30_000, &[]).await?;
    lines.push(joined_line("no protocols", &answer));
    let answer = join(&client, &group, "").await?;
    lines.push(joined_line("new member", &answer));
    let again = join(&client, &group, answer.member_id.as_str()).await?;
    lines.push(joined_line("with its member id", &again));
    Ok(lines)
}

/// One member through a generation: SyncGroup and Heartbeat at wrong generations, by unknown
/// members and with an empty group id, LeaveGroup of an unknown member, of an empty group id
/// and of itself, then Heartbeat after it left.
async fn group_member_lifecycle(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (member, generation) = stable_member(&client, &group).await?;
    let mut lines = vec![format!("stable at generation {generation}")];
    for (what, m, g) in [
        ("heartbeat", member.as_str(), generation),
        ("heartbeat next generation", member.as_str(), generation + 1),
        ("heartbeat generation -1", member.as_str(), -1),
        ("heartbeat unknown member", "ghost", generation),
    ] {
        lines.push(format!(
            "{what}: {}",
            heartbeat(&client, &group, m, g).await?
        ));
    }
    for (what, m, g) in [
        ("sync generation 0", member.as_str(), 0),
        ("sync unknown member", "ghost", generation),
        ("sync again", member.as_str(), generation),
    ] {
        lines.push(format!(
            "{what}: {}",
            sync(&client, &group, m, g, false).await?
        ));
    }
    lines.push(format!(
        "heartbeat empty group id: {}",
        heartbeat(&client, "", &member, generation).await?
    ));
    lines.push(format!(
        "sync empty group id: {}",
        sync(&client, "", &member, generation, false).await?
    ));
    lines.push(format!(
        "leave empty group id: {}",
        leave(&client, "", &member).await?
    ));
    lines.push(format!(
        "leave unknown member: {}",
        leave(&client, &group, "ghost").await?
    ));
    lines.push(format!("leave: {}", leave(&client, &group, &member).await?));
    lines.push(format!(
        "heartbeat after leaving: {}",
        heartbeat(&client, &group, &member, generation).await?
    ));
    Ok(lines)
}

/// A second member joins a stable group: the first one's Heartbeat and OffsetCommit say
/// REBALANCE_IN_PROGRESS until it joins again; then both are at the next generation and the
/// old generation is ILLEGAL_GENERATION.
async fn group_rebalance_in_progress(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let full = cx.create(&client, "t", 1, &[]).await?;
    let (first, generation) = stable_member(&client, &group).await?;
    let other = cx.connect().await?;
    let second_id = join(&other, &group, "").await?.member_id.to_string();
    let second_join = {
        let group = group.clone();
        let second_id = second_id.clone();
        // Its JoinGroup waits until the first member joins again.
        tokio::spawn(async move { join(&other, &group, &second_id).await })
    };
    let mut lines = Vec::new();
    // Polling as a member's heartbeat does, until the second member's JoinGroup has reached
    // the coordinator; the case's hang guard bounds it.
    let seen = loop {
        let answer = heartbeat(&client, &group, &first, generation).await?;
        if answer != "NONE" {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    lines.push(format!("heartbeat while the second joins: {seen}"));
    let committed = commit(&client, &group, generation, &first, &full).await?;
    lines.push(format!("commit while the second joins: {committed}"));
    let rejoined = join(&client, &group, &first).await?;
    lines.push(joined_line("first again", &rejoined));
    let second = second_join.await??;
    lines.push(joined_line("second", &second));
    lines.push(format!(
        "sync at the old generation: {}",
        sync(&client, &group, &first, generation, false).await?
    ));
    lines.push(format!(
        "commit at the old generation: {}",
        commit(&client, &group, generation, &first, &full).await?
    ));
    Ok(lines)
}

/// OffsetCommit v8 of offset 1 on partition 0 of `full` by `member` at `generation`: the
/// partition's error name.
async fn commit(
    client: &Client,
    group: &str,
    generation: i32,
    member: &str,
    full: &str,
) -> Result<String> {
    let answer = until_served(client, 8, || {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(text(member))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name(full))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1)
                    .with_committed_leader_epoch(-1)])])
    })
    .await?;
    let codes: Vec<String> = answer
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| err(p.error_code))
        .collect();
    Ok(codes.join(" "))
}

/// OffsetFetch v8 of `group` for partition 0 of `full` (every committed offset for `None`):
/// the group's error and `P offset O ERROR` per partition.
async fn fetch_offsets(
    cx: &Ctx,
    client: &Client,
    group: &str,
    full: Option<&str>,
) -> Result<String> {
    let topics = full.map(|f| {
        vec![OffsetFetchRequestTopics::default()
            .with_name(name(f))
            .with_partition_indexes(vec![0])]
    });
    let answer = until_served(client, 8, || {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(topics.clone())])
    })
    .await?;
    let mut parts = Vec::new();
    for g in &answer.groups {
        parts.push(err(g.error_code));
        for t in &g.topics {
            for p in &t.partitions {
                parts.push(format!(
                    "{}/{} offset {} {}",
                    cx.short(&t.name.0),
                    p.partition_index,
                    p.committed_offset,
                    err(p.error_code)
                ));
            }
        }
    }
    Ok(parts.join(", "))
}

/// Commits to a group with a member: the simple commit (generation -1, no member id), unknown
/// members, wrong generations, the member's own; and simple commits once the group is empty.
async fn offset_commit_members_and_generations(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let full = cx.create(&client, "t", 1, &[]).await?;
    let (member, generation) = stable_member(&client, &group).await?;
    let mut lines = Vec::new();
    for (what, g, m) in [
        ("simple commit", -1, ""),
        ("generation -1 with the member id", -1, member.as_str()),
        ("unknown member", generation, "ghost"),
        ("next generation", generation + 1, member.as_str()),
        ("generation 0", 0, member.as_str()),
        ("no member id at the generation", generation, ""),
        ("the member", generation, member.as_str()),
    ] {
        lines.push(format!(
            "{what}: {}",
            commit(&client, &group, g, m, &full).await?
        ));
    }
    lines.push(format!(
        "fetch: {}",
        fetch_offsets(&cx, &client, &group, Some(&full)).await?
    ));
    lines.push(format!("leave: {}", leave(&client, &group, &member).await?));
    lines.push(format!(
        "simple commit to the empty group: {}",
        commit(&client, &group, -1, "", &full).await?
    ));
    lines.push(format!(
        "old member to the empty group: {}",
        commit(&client, &group, generation, &member, &full).await?
    ));
    Ok(lines)
}

/// Simple commits to a group nobody joined, to an unknown topic and with an empty group id;
/// OffsetFetch of unknown groups, topics and partitions.
async fn offset_commit_and_fetch_unknown_group_and_topic(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let full = cx.create(&client, "t", 1, &[]).await?;
    coordinator(&client, &group).await?;
    let nobody = cx.topic("nobody");
    let mut lines = vec![
        format!(
            "fetch before any commit: {}",
            fetch_offsets(&cx, &client, &group, Some(&full)).await?
        ),
        format!(
            "fetch all before any commit: {}",
            fetch_offsets(&cx, &client, &group, None).await?
        ),
        format!(
            "commit to a new group: {}",
            commit(&client, &group, -1, "", &full).await?
        ),
        format!(
            "commit to an unknown topic: {}",
            commit(&client, &group, -1, "", &nobody).await?
        ),
        format!(
            "commit with an empty group id: {}",
            commit(&client, "", -1, "", &full).await?
        ),
        format!(
            "fetch: {}",
            fetch_offsets(&cx, &client, &group, Some(&full)).await?
        ),
        format!(
            "fetch all: {}",
            fetch_offsets(&cx, &client, &group, None).await?
        ),
        format!(
            "fetch an unknown topic: {}",
            fetch_offsets(&cx, &client, &group, Some(&nobody)).await?
        ),
        format!(
            "fetch an empty group id: {}",
            fetch_offsets(&cx, &client, "", Some(&full)).await?
        ),
    ];
    let other = cx.topic("other");
    lines.push(format!(
        "fetch another unknown group: {}",
        fetch_offsets(&cx, &client, &other, Some(&full)).await?
    ));
    Ok(lines)
}
