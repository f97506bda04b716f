//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup: refusals, one member's life, a rebalance.

use std::time::Duration;

use anyhow::Result;

use super::commits::commit;
use super::{coordinator, heartbeat, join, join_with, joined_line, leave, stable_member, sync};
use crate::conformance::{Ctx, Lines};

/// JoinGroup refusals: an empty group id, an unknown member id, a session timeout below the
/// broker's minimum, no protocols, and the first join of a new member (MEMBER_ID_REQUIRED).
pub(super) async fn join_group_errors(cx: Ctx) -> Result<Lines> {
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
pub(super) async fn group_member_lifecycle(cx: Ctx) -> Result<Lines> {
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
pub(super) async fn group_rebalance_in_progress(cx: Ctx) -> Result<Lines> {
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
