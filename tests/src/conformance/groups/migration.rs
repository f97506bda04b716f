//! KIP-848's online migration under Kafka 4.4's default `group.consumer.migration.policy`
//! (`bidirectional`): a ConsumerGroupHeartbeat upgrading a live classic group, its classic
//! member then rejoining, syncing, heartbeating and committing inside the consumer group, the
//! consumer-protocol member leaving (the group downgraded) and the classic member rejoining the
//! classic group; and the classic groups a heartbeat does not upgrade. Lines carry epochs
//! relative to the classic generation and counts of partitions.

use anyhow::{bail, Result};
use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use kmock_client::Client;

use super::{coordinator, heartbeat, leave, until_served};
use crate::conformance::{case, err, text, Case, Ctx, Lines};
use crate::consumer_group::{
    self, classic_assignment as assignment, classic_subscription as subscription, offset_commit,
    offset_fetch,
};

pub const CASES: &[Case] = &[
    case!(consumer_group_heartbeat_upgrades_a_classic_group_and_its_leave_downgrades_it),
    case!(consumer_group_heartbeat_to_classic_groups_it_does_not_upgrade),
    case!(classic_requests_to_a_consumer_group),
];

/// How many partitions assignment bytes name (`malformed` when they do not decode).
fn assigned_count(bytes: &Bytes) -> String {
    if bytes.len() < 2 {
        return format!("{} bytes", bytes.len());
    }
    let mut buf = bytes.slice(2..);
    let version = i16::from_be_bytes([bytes[0], bytes[1]]).min(3);
    match ConsumerProtocolAssignment::decode(&mut buf, version) {
        Ok(a) => format!(
            "{} partitions",
            a.assigned_partitions
                .iter()
                .map(|t| t.partitions.len())
                .sum::<usize>()
        ),
        Err(_) => "malformed".to_owned(),
    }
}

/// JoinGroup v9 of `member` to `group` with the `range` protocol and `metadata`, protocol type
/// `protocol_type`.
async fn join(
    client: &Client,
    group: &str,
    member: &str,
    protocol_type: &str,
    metadata: Bytes,
) -> Result<JoinGroupResponse> {
    until_served(client, 9, || {
        JoinGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_member_id(text(member))
            .with_protocol_type(text(protocol_type))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(metadata.clone())])
    })
    .await
}

/// A join's line: error, generation relative to `base`, protocol, whether it leads, how many
/// members it is told of.
fn joined(what: &str, a: &JoinGroupResponse, base: i32) -> String {
    if a.error_code != 0 {
        return format!("{what}: {}", err(a.error_code));
    }
    format!(
        "{what}: NONE generation {:+} protocol {:?}/{:?} leader {} members {}",
        a.generation_id - base,
        a.protocol_type.as_ref().map(|s| s.to_string()),
        a.protocol_name.as_ref().map(|s| s.to_string()),
        !a.leader.is_empty() && a.leader == a.member_id,
        a.members.len()
    )
}

/// SyncGroup v5 of `member` at `generation`, giving `assignments` (leader): error and what it
/// got.
async fn sync(
    client: &Client,
    group: &str,
    member: &str,
    generation: i32,
    assignments: Vec<SyncGroupRequestAssignment>,
) -> Result<String> {
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member))
        .with_protocol_type(Some(text("consumer")))
        .with_protocol_name(Some(text("range")))
        .with_assignments(assignments);
    let a = client.send(request, 5).await?;
    Ok(format!(
        "{} {:?}/{:?} {}",
        err(a.error_code),
        a.protocol_type.as_ref().map(|s| s.to_string()),
        a.protocol_name.as_ref().map(|s| s.to_string()),
        assigned_count(&a.assignment)
    ))
}

/// A classic member of `group` subscribed to `topic`, alone, synced with every one of
/// `partitions` of it: its member id and generation.
async fn classic_member(
    client: &Client,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Result<(String, i32)> {
    coordinator(client, group).await?;
    let first = join(client, group, "", "consumer", subscription(topic, &[])).await?;
    let id = first.member_id.to_string();
    let joined = join(client, group, &id, "consumer", subscription(topic, &[])).await?;
    if joined.error_code != 0 {
        bail!("JoinGroup {group}: {}", err(joined.error_code));
    }
    let given = vec![SyncGroupRequestAssignment::default()
        .with_member_id(text(&id))
        .with_assignment(assignment(topic, partitions))];
    let synced = sync(client, group, &id, joined.generation_id, given).await?;
    if !synced.starts_with("NONE") {
        bail!("SyncGroup {group}: {synced}");
    }
    Ok((id, joined.generation_id))
}

/// A heartbeat's line: error and message, or epoch relative to `base` and partitions assigned.
fn beat_line(what: &str, a: &ConsumerGroupHeartbeatResponse, base: i32, group: &str) -> String {
    if a.error_code != 0 {
        return format!(
            "{what}: {} {:?}",
            err(a.error_code),
            a.error_message
                .as_ref()
                .map(|m| m.as_str().replace(group, "<g>"))
        );
    }
    format!(
        "{what}: NONE epoch {:+} {:?} partitions",
        a.member_epoch - base,
        a.assignment.as_ref().map(|x| x
            .topic_partitions
            .iter()
            .map(|t| t.partitions.len())
            .sum::<usize>())
    )
}

/// A live classic group of one member owning both partitions; a consumer-protocol member joins
/// (the group is upgraded), the classic member is told to rejoin, rejoins without owned
/// partitions (eager), syncs, heartbeats and commits; the consumer-protocol member gets the
/// partition the classic one released, then leaves (the group is downgraded) and the classic
/// member rejoins the classic group.
async fn consumer_group_heartbeat_upgrades_a_classic_group_and_its_leave_downgrades_it(
    cx: Ctx,
) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 2, &[]).await?;
    let group = cx.topic("g");
    let (classic, generation) = classic_member(&client, &group, &topic, &[0, 1]).await?;
    let mut lines = vec![format!("classic member stable at generation {generation}")];
    let modern = "modern".to_owned();
    let up = until_served(&client, 1, || {
        consumer_group::join(&group, &modern, &[&topic])
    })
    .await?;
    lines.push(beat_line("consumer member joins", &up, generation, &group));
    let epoch = up.member_epoch;
    lines.push(format!(
        "classic heartbeat: {}",
        heartbeat(&client, &group, &classic, generation).await?
    ));
    let listed = client
        .send(
            ListGroupsRequest::default().with_types_filter(vec![text("consumer")]),
            5,
        )
        .await?;
    lines.push(format!(
        "listed as consumer: {}",
        listed
            .groups
            .iter()
            .filter(|g| g.group_id.as_str() == group)
            .map(|g| format!("{} {}", g.group_state, g.group_type))
            .collect::<Vec<_>>()
            .join(",")
    ));
    let rejoined = join(
        &client,
        &group,
        &classic,
        "consumer",
        subscription(&topic, &[]),
    )
    .await?;
    lines.push(joined("classic rejoins", &rejoined, generation));
    let gen2 = rejoined.generation_id;
    lines.push(format!(
        "classic sync: {}",
        sync(&client, &group, &classic, gen2, Vec::new()).await?
    ));
    lines.push(format!(
        "classic sync at the old generation: {}",
        sync(&client, &group, &classic, generation, Vec::new()).await?
    ));
    lines.push(format!(
        "classic heartbeat: {}",
        heartbeat(&client, &group, &classic, gen2).await?
    ));
    let described = client
        .send(
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(&group))]),
            1,
        )
        .await?;
    lines.push(format!(
        "ConsumerGroupDescribe member types: {:?}",
        described
            .groups
            .iter()
            .flat_map(|g| g
                .members
                .iter()
                .map(|m| (m.member_id.to_string() == classic, m.member_type)))
            .collect::<std::collections::BTreeSet<_>>()
    ));
    for (what, version, at) in [
        ("v8 at its generation", 8, gen2),
        ("v9 at its generation", 9, gen2),
        ("v8 at a newer generation", 8, gen2 + 1),
    ] {
        let request = offset_commit(&group, (&classic, at), &topic, &[0], 5);
        let answer = client.send(request, version).await?;
        let codes: Vec<String> = answer
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| err(p.error_code))
            .collect();
        lines.push(format!("classic commit {what}: {}", codes.join(",")));
    }
    let owned: std::collections::BTreeSet<i32> = std::collections::BTreeSet::new();
    let topic_id = client.metadata(Some(&[topic.as_str()])).await?.topics[0].topic_id;
    let again = until_served(&client, 1, || {
        consumer_group::beat(&group, &modern, epoch, topic_id, Some(&owned))
    })
    .await?;
    lines.push(beat_line(
        "consumer member beats",
        &again,
        generation,
        &group,
    ));
    let left = until_served(&client, 1, || {
        consumer_group::beat(&group, &modern, -1, topic_id, None)
    })
    .await?;
    lines.push(beat_line("consumer member leaves", &left, -1, &group));
    lines.push(format!(
        "classic heartbeat after the leave: {}",
        heartbeat(&client, &group, &classic, gen2).await?
    ));
    let back = join(
        &client,
        &group,
        &classic,
        "consumer",
        subscription(&topic, &[]),
    )
    .await?;
    lines.push(joined(
        "classic rejoins the classic group",
        &back,
        generation,
    ));
    Ok(lines)
}

/// Heartbeats (joining, and at an epoch) to classic groups: one whose protocol type is not
/// `consumer`, one whose member has joined but not synced (no assignment yet), one whose
/// member's metadata and assignment are not the consumer protocol's, one stable.
async fn consumer_group_heartbeat_to_classic_groups_it_does_not_upgrade(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    // Two partitions: the member joining the unsynced group gets one whichever way the
    // assignor chooses.
    let topic = cx.create(&client, "t", 2, &[]).await?;
    let mut lines = Vec::new();
    let other = cx.topic("other");
    coordinator(&client, &other).await?;
    let first = join(&client, &other, "", "connect", Bytes::from_static(b"x")).await?;
    let joined_other = join(
        &client,
        &other,
        first.member_id.as_str(),
        "connect",
        Bytes::from_static(b"x"),
    )
    .await?;
    lines.push(joined("connect member joins", &joined_other, 0));
    let unsynced = cx.topic("unsynced");
    coordinator(&client, &unsynced).await?;
    let first = join(
        &client,
        &unsynced,
        "",
        "consumer",
        subscription(&topic, &[]),
    )
    .await?;
    let joined_unsynced = join(
        &client,
        &unsynced,
        first.member_id.as_str(),
        "consumer",
        subscription(&topic, &[]),
    )
    .await?;
    lines.push(joined("consumer member joins", &joined_unsynced, 0));
    let stable = cx.topic("stable");
    classic_member(&client, &stable, &topic, &[0]).await?;
    // A consumer member whose metadata is not a consumer protocol subscription.
    let garbage = cx.topic("garbage");
    coordinator(&client, &garbage).await?;
    let first = join(&client, &garbage, "", "consumer", Bytes::from_static(b"x")).await?;
    let id = first.member_id.to_string();
    let joined_garbage = join(&client, &garbage, &id, "consumer", Bytes::from_static(b"x")).await?;
    let given = vec![SyncGroupRequestAssignment::default()
        .with_member_id(text(&id))
        .with_assignment(Bytes::from_static(b"y"))];
    lines.push(format!(
        "member with unreadable metadata synced: {}",
        sync(&client, &garbage, &id, joined_garbage.generation_id, given).await?
    ));
    for (what, group) in [
        ("protocol type connect", &other),
        ("joined, not synced", &unsynced),
        ("unreadable metadata", &garbage),
    ] {
        let answer =
            until_served(&client, 1, || consumer_group::join(group, "m", &[&topic])).await?;
        lines.push(beat_line(what, &answer, 0, group));
    }
    let at_epoch = until_served(&client, 1, || {
        consumer_group::join(&stable, "m", &[&topic]).with_member_epoch(1)
    })
    .await?;
    lines.push(beat_line("stable, at epoch 1", &at_epoch, 0, &stable));
    Ok(lines)
}

/// Classic requests to a consumer group: those of its consumer-protocol member (SyncGroup and
/// Heartbeat refused, LeaveGroup taken, which downgrades the group to its classic member), a
/// classic member joining it (MEMBER_ID_REQUIRED first, another protocol type refused), its
/// SyncGroup, Heartbeat and OffsetFetch at a generation other than its member epoch, how
/// DescribeGroups and ListGroups show the group, and the classic member leaving. No line
/// depends on whether the broker computed a new target yet (at most once a second).
async fn classic_requests_to_a_consumer_group(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 2, &[]).await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let m = until_served(&client, 1, || consumer_group::join(&group, "m", &[&topic])).await?;
    let mut lines = vec![beat_line("consumer member joins", &m, 0, &group)];
    let epoch = m.member_epoch;
    lines.push(format!(
        "its SyncGroup: {}",
        sync(&client, &group, "m", epoch, Vec::new()).await?
    ));
    lines.push(format!(
        "its Heartbeat: {}",
        heartbeat(&client, &group, "m", epoch).await?
    ));
    let first = join(&client, &group, "", "consumer", subscription(&topic, &[])).await?;
    lines.push(format!(
        "classic join without an id: {} id given {}",
        err(first.error_code),
        !first.member_id.is_empty()
    ));
    let id = first.member_id.to_string();
    let other = join(&client, &group, &id, "connect", subscription(&topic, &[])).await?;
    lines.push(joined("classic join of protocol type connect", &other, 0));
    let joined_answer = join(&client, &group, &id, "consumer", subscription(&topic, &[])).await?;
    let generation = joined_answer.generation_id;
    lines.push(format!(
        "classic join: {} at the consumer member's epoch or later {} protocol {:?}/{:?} leader {:?} members {}",
        err(joined_answer.error_code),
        generation >= epoch,
        joined_answer.protocol_type.as_ref().map(|s| s.to_string()),
        joined_answer.protocol_name.as_ref().map(|s| s.to_string()),
        joined_answer.leader.to_string(),
        joined_answer.members.len()
    ));
    // (Its SyncGroup at its generation is REBALANCE_IN_PROGRESS or NONE, as the broker did or
    // did not compute a new target yet: not a line.)
    lines.push(format!(
        "classic sync at another generation: {}",
        sync(&client, &group, &id, generation + 5, Vec::new()).await?
    ));
    lines.push(format!(
        "classic heartbeat at another generation: {}",
        heartbeat(&client, &group, &id, generation + 5).await?
    ));
    for (what, at) in [("its generation", generation), ("another", generation + 5)] {
        let answer = client
            .send(offset_fetch(&group, (&id, at), &topic), 9)
            .await?;
        lines.push(format!(
            "classic OffsetFetch at {what}: {}",
            answer
                .groups
                .first()
                .map_or("no group".to_owned(), |g| err(g.error_code))
        ));
    }
    let described = client
        .send(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(text(&group))]),
            5,
        )
        .await?;
    lines.push(format!(
        "described: {}",
        described
            .groups
            .iter()
            .map(|g| format!(
                "{} type {:?} members {}",
                err(g.error_code),
                g.protocol_type.to_string(),
                g.members.len()
            ))
            .collect::<Vec<_>>()
            .join(",")
    ));
    lines.push(format!(
        "consumer member's LeaveGroup: {}",
        leave(&client, &group, "m").await?
    ));
    lines.push(format!(
        "classic leaves: {}",
        leave(&client, &group, &id).await?
    ));
    Ok(lines)
}
