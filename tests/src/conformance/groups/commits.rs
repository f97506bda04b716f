//! OffsetCommit by members, generations and from outside the group; OffsetFetch of unknown
//! groups and topics.

use anyhow::Result;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetFetchRequest};
use kmock_client::Client;

use super::{coordinator, leave, stable_member, until_served};
use crate::conformance::{err, name, text, Ctx, Lines};

/// OffsetCommit v8 of offset 1 on partition 0 of `full` by `member` at `generation`: the
/// partition's error name.
pub(crate) async fn commit(
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
pub(super) async fn fetch_offsets(
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
pub(super) async fn offset_commit_members_and_generations(cx: Ctx) -> Result<Lines> {
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
pub(super) async fn offset_commit_and_fetch_unknown_group_and_topic(cx: Ctx) -> Result<Lines> {
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
