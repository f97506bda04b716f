//! A classic group's states as DescribeGroups shows them through a rebalance, and each group
//! API at every version the codec has (JoinGroup, Heartbeat, LeaveGroup, OffsetCommit,
//! OffsetFetch, DescribeGroups), and OffsetDelete of a non-consumer group.

use std::time::Duration;

use anyhow::Result;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    DescribeGroupsRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    OffsetCommitRequest, OffsetFetchRequest,
};
use kmock_client::Client;

use super::{coordinator, heartbeat, join, joined_line, stable_member, subscription, sync};
use crate::conformance::{answered, case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(describe_groups_through_a_rebalance),
    case!(describe_groups_at_each_version),
    case!(join_group_at_each_version),
    case!(heartbeat_and_leave_group_at_each_version),
    case!(offset_commit_and_fetch_at_each_version),
];

/// DescribeGroups v5 of one group: `describe: state S protocol P members N`.
async fn state(client: &Client, group: &str) -> Result<String> {
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
    let answer = client.send(request, 5).await?;
    let g = &answer.groups[0];
    Ok(format!(
        "describe: {} state {} protocol {:?} members {}",
        err(g.error_code),
        g.group_state.as_str(),
        g.protocol_data.as_str(),
        g.members.len()
    ))
}

async fn describe_groups_through_a_rebalance(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (first, generation) = stable_member(&client, &group).await?;
    let mut lines = vec![state(&client, &group).await?];
    let other = cx.connect().await?;
    let second_id = join(&other, &group, "").await?.member_id.to_string();
    let second_join = {
        let group = group.clone();
        let second_id = second_id.clone();
        // Its JoinGroup waits until the first member joins again.
        tokio::spawn(async move {
            let answer = join(&other, &group, &second_id).await;
            (other, answer)
        })
    };
    // Polling as a member's heartbeat does, until the second member's JoinGroup has reached
    // the coordinator; the case's hang guard bounds it.
    loop {
        if heartbeat(&client, &group, &first, generation).await? != "NONE" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lines.push(state(&client, &group).await?);
    let rejoined = join(&client, &group, &first).await?;
    lines.push(joined_line("first again", &rejoined));
    let (other, second) = second_join.await?;
    let second = second?;
    lines.push(joined_line("second", &second));
    lines.push(state(&client, &group).await?);
    let leader_sync = sync(&client, &group, &first, rejoined.generation_id, true).await?;
    lines.push(format!("leader sync: {leader_sync}"));
    let follower_sync = sync(&other, &group, &second_id, second.generation_id, false).await?;
    lines.push(format!("follower sync: {follower_sync}"));
    lines.push(state(&client, &group).await?);
    Ok(lines)
}

async fn describe_groups_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (unknown, stable) = (cx.topic("unknown"), cx.topic("stable"));
    coordinator(&client, &unknown).await?;
    stable_member(&client, &stable).await?;
    let mut lines = Vec::new();
    for version in 0..=6 {
        let request = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(text(&unknown)), GroupId(text(&stable))]);
        let answer = client.send(request, version).await?;
        let groups: Vec<String> = answer
            .groups
            .iter()
            .map(|g| {
                format!(
                    "{} {} {} members {}",
                    cx.short(&g.group_id.0),
                    err(g.error_code),
                    g.group_state.as_str(),
                    g.members.len()
                )
            })
            .collect();
        lines.push(format!("v{version}: {}", groups.join(", ")));
    }
    Ok(lines)
}

/// A new member (empty member id) joining a group of its own at each version: before v4 the
/// coordinator gives it an id at once, from v4 it asks for MEMBER_ID_REQUIRED.
async fn join_group_at_each_version(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for version in 0..=9 {
        let client = cx.connect().await?;
        let group = cx.topic(&format!("g{version}"));
        coordinator(&client, &group).await?;
        let mut request = JoinGroupRequest::default()
            .with_group_id(GroupId(text(&group)))
            .with_session_timeout_ms(30_000)
            .with_member_id(text(""))
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![
                kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(text("range"))
                    .with_metadata(subscription()),
            ]);
        if version >= 1 {
            request = request.with_rebalance_timeout_ms(30_000);
        }
        match answered(client.send(request, version).await)? {
            Some(answer) => lines.push(joined_line(&format!("v{version}"), &answer)),
            None => lines.push(format!("join v{version}: connection closed")),
        }
    }
    Ok(lines)
}

async fn heartbeat_and_leave_group_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (member, generation) = stable_member(&client, &group).await?;
    let mut lines = Vec::new();
    for version in 0..=4 {
        let client = cx.connect().await?;
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(text(&group)))
            .with_generation_id(generation)
            .with_member_id(text(&member));
        lines.push(match answered(client.send(request, version).await)? {
            Some(answer) => format!("heartbeat v{version}: {}", err(answer.error_code)),
            None => format!("heartbeat v{version}: connection closed"),
        });
    }
    // LeaveGroup v0–v2 name one member (an unknown one here, so the group stays).
    for version in 0..=2 {
        let client = cx.connect().await?;
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(text(&group)))
            .with_member_id(text("ghost"));
        lines.push(match answered(client.send(request, version).await)? {
            Some(answer) => format!("leave v{version} ghost: {}", err(answer.error_code)),
            None => format!("leave v{version}: connection closed"),
        });
    }
    Ok(lines)
}

/// OffsetCommit at every codec version (a simple commit, generation -1, of offset = version)
/// each followed by OffsetFetch at the same-numbered version where it has one.
async fn offset_commit_and_fetch_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for version in 2..=9 {
        let client = cx.connect().await?;
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(&group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(text(""))
            .with_retention_time_ms(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name(&full))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(i64::from(version))
                    .with_committed_leader_epoch(-1)])]);
        let line = match answered(client.send(request, version).await)? {
            Some(answer) => {
                let codes: Vec<String> = answer
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| err(p.error_code))
                    .collect();
                format!("commit v{version}: {}", codes.join(" "))
            }
            None => format!("commit v{version}: connection closed"),
        };
        lines.push(line);
        lines.push(fetch_at(&cx, &group, &full, version).await?);
    }
    lines.push(fetch_at(&cx, &group, &full, 1).await?);
    Ok(lines)
}

/// OffsetFetch of partition 0 of `full` at `version` (v1–v7 one group, v8+ batched): `fetch
/// vN: ERROR, P offset O ERROR`.
async fn fetch_at(cx: &Ctx, group: &str, full: &str, version: i16) -> Result<String> {
    let client = cx.connect().await?;
    let request = if version < 8 {
        OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(name(full))
                .with_partition_indexes(vec![0])]))
    } else {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(name(full))
                .with_partition_indexes(vec![0])]))])
    };
    let Some(answer) = answered(client.send(request, version).await)? else {
        return Ok(format!("fetch v{version}: connection closed"));
    };
    let mut parts = Vec::new();
    if version < 8 {
        parts.push(err(answer.error_code));
        for t in &answer.topics {
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
    } else {
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
    }
    Ok(format!("fetch v{version}: {}", parts.join(", ")))
}
