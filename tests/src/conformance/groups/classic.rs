//! Classic groups, one refusal or edge per case: JoinGroup's timeouts, protocols and member
//! ids, SyncGroup's assignments and versions, Heartbeat of a member not yet synced or of a
//! group that does not exist.

use anyhow::Result;
use bytes::Bytes;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DescribeGroupsRequest, GroupId, JoinGroupRequest, SyncGroupRequest,
};
use kmock_client::Client;

use super::{
    coordinator, heartbeat, join, join_with, joined_line, joined_member, stable_member,
    until_served,
};
use crate::conformance::{answered, case, err, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(join_group_rebalance_timeouts),
    case!(join_group_session_timeout_zero_negative_and_max),
    case!(join_group_unknown_member_in_a_stable_group),
    case!(join_group_member_id_of_another_group),
    case!(join_group_protocol_choice_of_one_member),
    // No case names one protocol twice in a JoinGroup: Kafka 4.4 answers the first join of v4+
    // MEMBER_ID_REQUIRED, then never answers the join that lets the member in (its protocol
    // choice throws "Member does not support any of the candidate protocols": seen for 150 s
    // at v3, v5 and v9). kmock closes that connection (`handlers::join_group::answer`).
    case!(join_group_unparsable_consumer_metadata),
    case!(join_group_v0_session_timeout_as_rebalance_timeout),
    case!(heartbeat_joined_not_synced),
    case!(heartbeat_and_sync_of_a_group_that_does_not_exist),
    case!(sync_group_assignment_for_an_unknown_member),
    case!(sync_group_without_protocol_type_and_name),
    case!(sync_group_at_each_version),
];

/// JoinGroup v9 with rebalance timeouts 0, -1 and below the session timeout, each the first
/// join of a new member to a group of its own, then the join with the given member id.
async fn join_group_rebalance_timeouts(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for (i, rebalance) in [0, -1, 1_000].into_iter().enumerate() {
        let group = cx.topic(&format!("g{i}"));
        coordinator(&client, &group).await?;
        let request = |member: &str| {
            JoinGroupRequest::default()
                .with_group_id(GroupId(text(&group)))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(rebalance)
                .with_member_id(text(member))
                .with_protocol_type(text("consumer"))
                .with_protocols(vec![protocol("range")])
        };
        let first = until_served(&client, 9, || request("")).await?;
        lines.push(joined_line(&format!("rebalance {rebalance} ms"), &first));
        let member = first.member_id.to_string();
        let again = until_served(&client, 9, || request(&member)).await?;
        lines.push(joined_line(
            &format!("rebalance {rebalance} ms again"),
            &again,
        ));
    }
    Ok(lines)
}

/// A protocol of the consumer protocol type with an empty subscription.
fn protocol(name: &str) -> kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol {
    kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
        .with_name(text(name))
        .with_metadata(super::subscription())
}

async fn join_group_session_timeout_zero_negative_and_max(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let mut lines = Vec::new();
    for ms in [0, -1, i32::MAX, i32::MIN] {
        let answer = join_with(&client, &group, "", ms, &["range"]).await?;
        lines.push(joined_line(&format!("session {ms} ms"), &answer));
    }
    Ok(lines)
}

async fn join_group_unknown_member_in_a_stable_group(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (member, generation) = stable_member(&client, &group).await?;
    let answer = join(&client, &group, "ghost").await?;
    let mut lines = vec![joined_line("unknown member", &answer)];
    lines.push(format!(
        "the member's heartbeat after it: {}",
        heartbeat(&client, &group, &member, generation).await?
    ));
    Ok(lines)
}

async fn join_group_member_id_of_another_group(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (a, b) = (cx.topic("a"), cx.topic("b"));
    let (member, generation) = stable_member(&client, &a).await?;
    stable_member(&client, &b).await?;
    let answer = join(&client, &b, &member).await?;
    Ok(vec![
        joined_line("a's member joins b", &answer),
        format!(
            "a's member heartbeats to b: {}",
            heartbeat(&client, &b, &member, generation).await?
        ),
    ])
}

/// One member naming `roundrobin` then `range`: the protocol the group chooses.
async fn join_group_protocol_choice_of_one_member(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let first = join_with(&client, &group, "", 30_000, &["roundrobin", "range"]).await?;
    let member = first.member_id.to_string();
    let answer = join_with(&client, &group, &member, 30_000, &["roundrobin", "range"]).await?;
    Ok(vec![
        joined_line("joined", &answer),
        format!(
            "protocol type {:?} name {:?}",
            answer.protocol_type.as_ref().map(|p| p.as_str()),
            answer.protocol_name.as_ref().map(|p| p.as_str())
        ),
    ])
}

/// Protocol type `consumer` with metadata that is no consumer subscription.
async fn join_group_unparsable_consumer_metadata(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let request = |member: &str| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(text(&group)))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_member_id(text(member))
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![
                kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(text("range"))
                    .with_metadata(Bytes::from_static(b"\xff\xff\x01")),
            ])
    };
    let first = until_served(&client, 9, || request("")).await?;
    let mut lines = vec![joined_line("first", &first)];
    let member = first.member_id.to_string();
    let answer = until_served(&client, 9, || request(&member)).await?;
    lines.push(joined_line("with its id", &answer));
    let synced = super::sync(&client, &group, &member, answer.generation_id, true).await?;
    lines.push(format!("sync: {synced}"));
    Ok(lines)
}

/// JoinGroup v0 (no rebalance timeout: the session timeout serves as both) of a new member.
async fn join_group_v0_session_timeout_as_rebalance_timeout(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(text(&group)))
        .with_session_timeout_ms(10_000)
        .with_member_id(text(""))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![protocol("range")]);
    let answer = until_served(&client, 0, || request.clone()).await?;
    let mut lines = vec![joined_line("v0", &answer)];
    let member = answer.member_id.to_string();
    let synced = super::sync(&client, &group, &member, answer.generation_id, true).await?;
    lines.push(format!("sync: {synced}"));
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(&group))]);
    let described = client.send(request, 5).await?;
    let g = &described.groups[0];
    lines.push(format!(
        "describe: {} {} members {}",
        err(g.error_code),
        g.group_state.as_str(),
        g.members.len()
    ));
    Ok(lines)
}

/// A member joined but not synced (the group completing its rebalance): Heartbeat at its
/// generation, the next, and of an unknown member; then the leader's SyncGroup.
async fn heartbeat_joined_not_synced(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (member, generation) = joined_member(&client, &group).await?;
    let mut lines = Vec::new();
    for (what, m, g) in [
        ("its generation", member.as_str(), generation),
        ("the next generation", member.as_str(), generation + 1),
        ("an unknown member", "ghost", generation),
    ] {
        lines.push(format!(
            "heartbeat {what}: {}",
            heartbeat(&client, &group, m, g).await?
        ));
    }
    let synced = super::sync(&client, &group, &member, generation, true).await?;
    lines.push(format!("sync: {synced}"));
    lines.push(format!(
        "heartbeat after sync: {}",
        heartbeat(&client, &group, &member, generation).await?
    ));
    Ok(lines)
}

async fn heartbeat_and_sync_of_a_group_that_does_not_exist(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let mut lines = Vec::new();
    for generation in [-1, 0, 1] {
        lines.push(format!(
            "heartbeat generation {generation}: {}",
            heartbeat(&client, &group, "ghost", generation).await?
        ));
    }
    lines.push(format!(
        "heartbeat no member id: {}",
        heartbeat(&client, &group, "", -1).await?
    ));
    lines.push(format!(
        "sync: {}",
        super::sync(&client, &group, "ghost", 1, true).await?
    ));
    lines.push(format!(
        "sync no member id: {}",
        super::sync(&client, &group, "", 1, false).await?
    ));
    Ok(lines)
}

/// SyncGroup v5 of `member` with `assignments` (member id, assignment bytes): error and the
/// length of the assignment it gets.
async fn sync_with(
    client: &Client,
    group: &str,
    (member, generation): (&str, i32),
    assignments: &[(&str, &'static [u8])],
) -> Result<String> {
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member))
        .with_protocol_type(Some(text("consumer")))
        .with_protocol_name(Some(text("range")))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(text(m))
                        .with_assignment(Bytes::from_static(a))
                })
                .collect(),
        );
    let answer = client.send(request, 5).await?;
    Ok(format!(
        "{} assignment {} bytes",
        err(answer.error_code),
        answer.assignment.len()
    ))
}

/// The leader's SyncGroup assigning to a member that is not in the group, then to itself
/// twice, then nothing.
async fn sync_group_assignment_for_an_unknown_member(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (member, generation) = joined_member(&client, &group).await?;
    let me = (member.as_str(), generation);
    Ok(vec![
        format!(
            "to a ghost only: {}",
            sync_with(&client, &group, me, &[("ghost", b"abc")]).await?
        ),
        format!(
            "to itself twice: {}",
            sync_with(&client, &group, me, &[(&member, b"ab"), (&member, b"abcd")]).await?
        ),
        format!("nothing: {}", sync_with(&client, &group, me, &[]).await?),
    ])
}

async fn sync_group_without_protocol_type_and_name(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (member, generation) = joined_member(&client, &group).await?;
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(text(&group)))
        .with_generation_id(generation)
        .with_member_id(text(&member))
        .with_protocol_type(None)
        .with_protocol_name(None)
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(text(&member))
            .with_assignment(Bytes::from_static(b"xy"))]);
    let answer = client.send(request, 5).await?;
    Ok(vec![format!(
        "null type and name: {} type {:?} name {:?} assignment {} bytes",
        err(answer.error_code),
        answer.protocol_type.as_ref().map(|p| p.as_str()),
        answer.protocol_name.as_ref().map(|p| p.as_str()),
        answer.assignment.len()
    )])
}

/// SyncGroup at v0 to v5, the leader of a group of one at each (a new group each).
async fn sync_group_at_each_version(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for version in 0..=5 {
        let client = cx.connect().await?;
        let group = cx.topic(&format!("g{version}"));
        let (member, generation) = joined_member(&client, &group).await?;
        let mut request = SyncGroupRequest::default()
            .with_group_id(GroupId(text(&group)))
            .with_generation_id(generation)
            .with_member_id(text(&member))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(text(&member))
                .with_assignment(Bytes::from_static(b"xyz"))]);
        if version >= 5 {
            request = request
                .with_protocol_type(Some(text("consumer")))
                .with_protocol_name(Some(text("range")));
        }
        lines.push(match answered(client.send(request, version).await)? {
            Some(a) => format!(
                "v{version}: {} assignment {} bytes",
                err(a.error_code),
                a.assignment.len()
            ),
            None => format!("v{version}: connection closed"),
        });
    }
    Ok(lines)
}
