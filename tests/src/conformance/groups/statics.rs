//! Static members (`group.instance.id`) of classic groups: a static member rejoining with its
//! id, replaced by a new instance, fenced in Heartbeat, OffsetCommit and LeaveGroup; and of
//! KIP-848 groups: a static member leaving for a while (epoch -2) and replaced, and an
//! instance id still held (UNRELEASED_INSTANCE_ID).

use anyhow::Result;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, HeartbeatRequest,
    JoinGroupResponse, LeaveGroupRequest, OffsetCommitRequest,
};
use kmock_client::Client;

use super::admin::join_as;
use super::{assigned_line, consumer_heartbeat, coordinator, joined_line, until_served};
use crate::conformance::{case, err, name, text, Case, Ctx, Lines};
use crate::consumer_group;

pub const CASES: &[Case] = &[
    case!(join_group_static_member_rejoins_with_its_id),
    case!(join_group_static_member_replaced_by_a_new_instance),
    case!(heartbeat_static_member_fencing),
    case!(offset_commit_static_member_fencing),
    case!(leave_group_static_members),
    case!(consumer_group_heartbeat_static_member_replacing),
    case!(consumer_group_heartbeat_unreleased_instance_id),
];

/// JoinGroup v9 of static `instance` as `member` (empty: new), range, no subscription.
async fn join_static(
    client: &Client,
    group: &str,
    member: &str,
    instance: &str,
) -> Result<JoinGroupResponse> {
    join_as(
        client,
        group,
        member,
        Some(instance),
        "consumer",
        &["range"],
        &[],
    )
    .await
}

/// A static member `instance` of `group`, joined and synced: its member id and generation.
async fn stable_static(client: &Client, group: &str, instance: &str) -> Result<(String, i32)> {
    coordinator(client, group).await?;
    let joined = join_static(client, group, "", instance).await?;
    anyhow::ensure!(
        joined.error_code == 0,
        "JoinGroup {group}: {}",
        err(joined.error_code)
    );
    let member = joined.member_id.to_string();
    let synced = super::sync(client, group, &member, joined.generation_id, true).await?;
    anyhow::ensure!(synced == "NONE", "SyncGroup {group}: {synced}");
    Ok((member, joined.generation_id))
}

/// Heartbeat v4 of `member` as `instance` at `generation`: the error name.
async fn static_heartbeat(
    client: &Client,
    group: &str,
    (member, instance): (&str, Option<&str>),
    generation: i32,
) -> Result<String> {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member))
        .with_group_instance_id(instance.map(text));
    Ok(err(client.send(request, 4).await?.error_code))
}

async fn join_group_static_member_rejoins_with_its_id(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (member, generation) = stable_static(&client, &group, "i1").await?;
    let again = join_static(&client, &group, &member, "i1").await?;
    Ok(vec![
        joined_line("rejoins with its id", &again),
        format!(
            "same id {}, generation {:+}",
            again.member_id.as_str() == member,
            again.generation_id - generation
        ),
    ])
}

async fn join_group_static_member_replaced_by_a_new_instance(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (old, generation) = stable_static(&client, &group, "i1").await?;
    let new = join_static(&client, &group, "", "i1").await?;
    let new_id = new.member_id.to_string();
    Ok(vec![
        joined_line("a new instance with the same instance id", &new),
        format!(
            "a new member id {}, generation {:+}",
            new_id != old,
            new.generation_id - generation
        ),
        format!(
            "old member's heartbeat: {}",
            static_heartbeat(&client, &group, (&old, Some("i1")), generation).await?
        ),
        format!(
            "new member's heartbeat: {}",
            static_heartbeat(&client, &group, (&new_id, Some("i1")), new.generation_id).await?
        ),
    ])
}

async fn heartbeat_static_member_fencing(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (member, generation) = stable_static(&client, &group, "i1").await?;
    let mut lines = Vec::new();
    for (what, m, i) in [
        ("its id and instance", member.as_str(), Some("i1")),
        ("its id, no instance", member.as_str(), None),
        ("another id, its instance", "ghost", Some("i1")),
        ("its id, another instance", member.as_str(), Some("i2")),
        ("another id, another instance", "ghost", Some("i2")),
    ] {
        lines.push(format!(
            "{what}: {}",
            static_heartbeat(&client, &group, (m, i), generation).await?
        ));
    }
    Ok(lines)
}

async fn offset_commit_static_member_fencing(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let full = cx.create(&client, "t", 1, &[]).await?;
    let (member, generation) = stable_static(&client, &group, "i1").await?;
    let mut lines = Vec::new();
    for (what, m, i) in [
        ("another id, its instance", "ghost", Some("i1")),
        ("its id, another instance", member.as_str(), Some("i2")),
        ("its id and instance", member.as_str(), Some("i1")),
    ] {
        let answer = until_served(&client, 8, || {
            OffsetCommitRequest::default()
                .with_group_id(GroupId(text(&group)))
                .with_generation_id_or_member_epoch(generation)
                .with_member_id(text(m))
                .with_group_instance_id(i.map(text))
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(name(&full))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(3)])])
        })
        .await?;
        let codes: Vec<String> = answer
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| err(p.error_code))
            .collect();
        lines.push(format!("{what}: {}", codes.join(" ")));
    }
    Ok(lines)
}

/// LeaveGroup v5 of static members: by instance id with another member id, by instance id
/// alone, then the group described.
async fn leave_group_static_members(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    stable_static(&client, &group, "i1").await?;
    let mut lines = Vec::new();
    for (what, m) in [("another member id", "ghost"), ("no member id", "")] {
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(text(&group)))
            .with_members(vec![MemberIdentity::default()
                .with_member_id(text(m))
                .with_group_instance_id(Some(text("i1")))]);
        let answer = client.send(request, 5).await?;
        let members: Vec<String> = answer.members.iter().map(|m| err(m.error_code)).collect();
        lines.push(format!(
            "leave i1 with {what}: {} [{}]",
            err(answer.error_code),
            members.join(" ")
        ));
    }
    let request = kafka_protocol::messages::DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(text(&group))]);
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

/// A ConsumerGroupHeartbeat v1, asked again while the coordinator loads.
async fn send(
    client: &Client,
    request: ConsumerGroupHeartbeatRequest,
) -> Result<ConsumerGroupHeartbeatResponse> {
    consumer_heartbeat(client, 1, request).await
}

/// A heartbeat answer as a line: error, or epoch relative to `base` and how
/// many partitions it assigns.
fn beat_line(what: &str, answer: &ConsumerGroupHeartbeatResponse, base: i32) -> String {
    if answer.error_code != 0 {
        return format!("{what}: {}", err(answer.error_code));
    }
    assigned_line(what, answer, base)
}

async fn consumer_group_heartbeat_static_member_replacing(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 2, &[]).await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let t = client.metadata(Some(&[topic.as_str()])).await?.topics[0].topic_id;
    let a = send(
        &client,
        consumer_group::join(&group, "a", &[&topic]).with_instance_id(Some(text("i1"))),
    )
    .await?;
    let base = a.member_epoch;
    let mut lines = vec![beat_line("A joins as i1", &a, base)];
    let leave = consumer_group::beat(&group, "a", -2, t, None).with_instance_id(Some(text("i1")));
    lines.push(beat_line(
        "A leaves for a while (epoch -2)",
        &send(&client, leave).await?,
        base,
    ));
    let b = send(
        &client,
        consumer_group::join(&group, "b", &[&topic]).with_instance_id(Some(text("i1"))),
    )
    .await?;
    lines.push(beat_line("B joins as i1", &b, base));
    let old = consumer_group::beat(&group, "a", base, t, None).with_instance_id(Some(text("i1")));
    lines.push(beat_line("A heartbeats", &send(&client, old).await?, base));
    let b_beat = consumer_group::beat(&group, "b", b.member_epoch, t, None)
        .with_instance_id(Some(text("i1")));
    lines.push(beat_line(
        "B heartbeats",
        &send(&client, b_beat).await?,
        base,
    ));
    Ok(lines)
}

async fn consumer_group_heartbeat_unreleased_instance_id(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let a = send(
        &client,
        consumer_group::join(&group, "a", &[&topic]).with_instance_id(Some(text("i1"))),
    )
    .await?;
    let base = a.member_epoch;
    let mut lines = vec![beat_line("A joins as i1", &a, base)];
    let b = send(
        &client,
        consumer_group::join(&group, "b", &[&topic]).with_instance_id(Some(text("i1"))),
    )
    .await?;
    lines.push(beat_line("B joins as i1 while A holds it", &b, base));
    let a_again = send(
        &client,
        consumer_group::join(&group, "a", &[&topic]).with_instance_id(Some(text("i2"))),
    )
    .await?;
    lines.push(beat_line("A rejoins (epoch 0) as i2", &a_again, base));
    Ok(lines)
}
