//! OffsetFetch edges of simple commits: `require_stable` without transactions, several groups
//! in one request, and null topics (every committed offset) at each version.

use anyhow::Result;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest};

use super::offset_edges::{commit, group_and_topic};
use super::until_served;
use crate::conformance::{answered, case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(offset_fetch_require_stable_without_transactions),
    case!(offset_fetch_several_groups),
    case!(offset_fetch_every_offset_at_each_version),
];

/// OffsetFetch v7 (one group) with and without `require_stable`, of plain commits and of a
/// group with none.
async fn offset_fetch_require_stable_without_transactions(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (group, topic) = group_and_topic(&cx, &client, 1).await?;
    let code = commit(&cx, &client, &group, 8, &[(&topic, 0, 4, -1, None)]).await?;
    let mut lines = vec![format!("commit: {code}")];
    for (what, g) in [("committed", group.clone()), ("nobody's", cx.topic("none"))] {
        for (version, stable) in [(7, true), (7, false)] {
            let request = OffsetFetchRequest::default()
                .with_group_id(GroupId(text(&g)))
                .with_require_stable(stable)
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(name(&topic))
                    .with_partition_indexes(vec![0])]));
            lines.push(match answered(client.send(request, version).await)? {
                Some(a) => format!(
                    "v{version} require_stable {stable} {what}: {} offset {:?}",
                    err(a.error_code),
                    a.topics
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .map(|p| (p.committed_offset, err(p.error_code)))
                        .collect::<Vec<_>>()
                ),
                None => format!("v{version} {what}: connection closed"),
            });
        }
    }
    Ok(lines)
}

/// OffsetFetch v8 of three groups at once: one with a commit, one unknown, the empty group id,
/// and the first again.
async fn offset_fetch_several_groups(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (group, topic) = group_and_topic(&cx, &client, 1).await?;
    let unknown = cx.topic("unknown");
    let code = commit(&cx, &client, &group, 8, &[(&topic, 0, 4, -1, None)]).await?;
    let mut lines = vec![format!("commit: {code}")];
    let ask = |g: &str| {
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text(g)))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(name(&topic))
                .with_partition_indexes(vec![0])]))
    };
    let request = OffsetFetchRequest::default().with_groups(vec![
        ask(&group),
        ask(&unknown),
        ask(""),
        ask(&group),
    ]);
    let answer = until_served(&client, 8, || request.clone()).await?;
    let mut groups: Vec<String> = answer
        .groups
        .iter()
        .map(|g| {
            let offsets: Vec<String> = g
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| format!("{} {}", p.committed_offset, err(p.error_code)))
                .collect();
            format!(
                "{:?}: {} [{}]",
                cx.short(&g.group_id.0),
                err(g.error_code),
                offsets.join(" ")
            )
        })
        .collect();
    groups.sort();
    lines.extend(groups);
    Ok(lines)
}

/// OffsetFetch with null topics (every committed offset of the group) at v2 to v8.
async fn offset_fetch_every_offset_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (group, topic) = group_and_topic(&cx, &client, 2).await?;
    let code = commit(&cx, &client, &group, 8, &[(&topic, 1, 6, -1, None)]).await?;
    let mut lines = vec![format!("commit: {code}")];
    for version in 2..=8 {
        let request = if version < 8 {
            OffsetFetchRequest::default()
                .with_group_id(GroupId(text(&group)))
                .with_topics(None)
        } else {
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text(&group)))
                .with_topics(None)])
        };
        let Some(answer) = answered(client.send(request, version).await)? else {
            lines.push(format!("v{version}: connection closed"));
            continue;
        };
        let mut parts: Vec<String> = Vec::new();
        let topics = if version < 8 {
            parts.push(err(answer.error_code));
            answer
                .topics
                .iter()
                .map(|t| {
                    (
                        t.name.0.to_string(),
                        t.partitions
                            .iter()
                            .map(|p| (p.partition_index, p.committed_offset))
                            .collect::<Vec<_>>(),
                    )
                })
                .collect::<Vec<_>>()
        } else {
            parts.push(err(answer.groups[0].error_code));
            answer.groups[0]
                .topics
                .iter()
                .map(|t| {
                    (
                        t.name.0.to_string(),
                        t.partitions
                            .iter()
                            .map(|p| (p.partition_index, p.committed_offset))
                            .collect::<Vec<_>>(),
                    )
                })
                .collect()
        };
        for (t, ps) in topics {
            for (p, o) in ps {
                parts.push(format!("{}/{p} {o}", cx.short(&t)));
            }
        }
        lines.push(format!("v{version}: {}", parts.join(", ")));
    }
    Ok(lines)
}
