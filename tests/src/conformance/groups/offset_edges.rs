//! OffsetCommit and OffsetFetch edges of simple commits (generation -1, no member): offsets
//! below zero, metadata at and past `offset.metadata.max.bytes`, partitions and topics that are
//! not there, a partition twice, no topics, the retention time of v2–v4, leader epochs through
//! versions, the offsets topic itself, and the order of the answer's topics and partitions.

use anyhow::Result;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetFetchRequest};
use kmock_client::Client;

use super::commits::fetch_offsets;
use super::{coordinator, until_served};
use crate::conformance::{answered, case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(offset_commit_offsets_below_zero),
    case!(offset_commit_metadata_at_and_past_the_limit),
    case!(offset_commit_unknown_partition_and_empty_topic_name),
    case!(offset_commit_same_partition_twice),
    case!(offset_commit_no_topics),
    case!(offset_commit_retention_time_at_v2_to_v4),
    case!(offset_commit_leader_epoch_through_versions),
    case!(offset_commit_to_the_offsets_topic),
    case!(offset_commit_answer_order),
];

/// One partition of a simple commit: (topic, partition, offset, leader epoch, metadata).
type Part<'a> = (&'a str, i32, i64, i32, Option<&'a str>);

/// OffsetCommit at `version` of `parts` as a simple commit (each part its own topic entry,
/// retention -1): `T/P ERROR` per answered partition, sorted.
pub(super) async fn commit(
    cx: &Ctx,
    client: &Client,
    group: &str,
    version: i16,
    parts: &[Part<'_>],
) -> Result<String> {
    commit_retained(cx, client, group, version, -1, parts).await
}

/// [`commit`] with a retention time (v2–v4).
async fn commit_retained(
    cx: &Ctx,
    client: &Client,
    group: &str,
    version: i16,
    retention_ms: i64,
    parts: &[Part<'_>],
) -> Result<String> {
    let request = || {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(text(""))
            .with_retention_time_ms(retention_ms)
            .with_topics(
                parts
                    .iter()
                    .map(|(t, p, offset, epoch, metadata)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(name(t))
                            .with_partitions(vec![OffsetCommitRequestPartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(*offset)
                                .with_committed_leader_epoch(*epoch)
                                .with_committed_metadata(metadata.map(text))])
                    })
                    .collect(),
            )
    };
    let Some(answer) = answered(client.send(request(), version).await)? else {
        return Ok("connection closed".to_owned());
    };
    let answer = if super::retriable(super::ErrorCode::code(&answer)) {
        until_served(client, version, request).await?
    } else {
        answer
    };
    let mut parts: Vec<String> = answer
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                format!(
                    "{}/{} {}",
                    cx.short(&t.name.0),
                    p.partition_index,
                    err(p.error_code)
                )
            })
        })
        .collect();
    // Sorted: these lines are about errors; the answer's order is the case
    // `offset_commit_answer_order`'s.
    parts.sort();
    Ok(format!("[{}]", parts.join(", ")))
}

/// OffsetFetch v8 of `group`'s partitions of `topic`: `P offset O epoch E metadata M ERROR`.
async fn fetch_detailed(
    client: &Client,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Result<String> {
    let answer = until_served(client, 8, || {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(name(topic))
                .with_partition_indexes(partitions.to_vec())]))])
    })
    .await?;
    let mut parts = Vec::new();
    for g in &answer.groups {
        parts.push(err(g.error_code));
        for t in &g.topics {
            for p in &t.partitions {
                parts.push(format!(
                    "{} offset {} epoch {} metadata {:?} {}",
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata.as_ref().map(|m| m.len()),
                    err(p.error_code)
                ));
            }
        }
    }
    Ok(parts.join(", "))
}

/// A group (coordinator found) and a topic of `partitions` partitions.
pub(super) async fn group_and_topic(
    cx: &Ctx,
    client: &Client,
    partitions: i32,
) -> Result<(String, String)> {
    let group = cx.topic("g");
    coordinator(client, &group).await?;
    let topic = cx.create(client, "t", partitions, &[]).await?;
    Ok((group, topic))
}

async fn offset_commit_offsets_below_zero(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (group, topic) = group_and_topic(&cx, &client, 1).await?;
    let mut lines = Vec::new();
    for offset in [5, -1, -2, i64::MIN] {
        lines.push(format!(
            "commit {offset}: {}",
            commit(&cx, &client, &group, 8, &[(&topic, 0, offset, -1, None)]).await?
        ));
        lines.push(format!(
            "fetch: {}",
            fetch_detailed(&client, &group, &topic, &[0]).await?
        ));
    }
    Ok(lines)
}

async fn offset_commit_metadata_at_and_past_the_limit(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (group, topic) = group_and_topic(&cx, &client, 1).await?;
    let at = "m".repeat(4096);
    let past = "m".repeat(4097);
    let mut lines = Vec::new();
    for (what, metadata) in [
        ("4096 bytes", Some(at.as_str())),
        ("4097 bytes", Some(past.as_str())),
        ("null", None),
        ("empty", Some("")),
    ] {
        lines.push(format!(
            "commit with metadata {what}: {}",
            commit(&cx, &client, &group, 8, &[(&topic, 0, 1, -1, metadata)]).await?
        ));
        lines.push(format!(
            "fetch: {}",
            fetch_detailed(&client, &group, &topic, &[0]).await?
        ));
    }
    Ok(lines)
}

async fn offset_commit_unknown_partition_and_empty_topic_name(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (group, topic) = group_and_topic(&cx, &client, 1).await?;
    Ok(vec![
        format!(
            "partition 5 of 1: {}",
            commit(&cx, &client, &group, 8, &[(&topic, 5, 1, -1, None)]).await?
        ),
        format!(
            "partition -1: {}",
            commit(&cx, &client, &group, 8, &[(&topic, -1, 1, -1, None)]).await?
        ),
        format!(
            "empty topic name: {}",
            commit(&cx, &client, &group, 8, &[("", 0, 1, -1, None)]).await?
        ),
        format!(
            "a known and an unknown partition: {}",
            commit(
                &cx,
                &client,
                &group,
                8,
                &[(&topic, 0, 1, -1, None), (&topic, 3, 1, -1, None)]
            )
            .await?
        ),
        format!(
            "fetch partitions 0, 5, -1: {}",
            fetch_detailed(&client, &group, &topic, &[0, 5, -1]).await?
        ),
    ])
}

async fn offset_commit_same_partition_twice(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (group, topic) = group_and_topic(&cx, &client, 1).await?;
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(&group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(text(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(&topic))
            .with_partitions(
                [3, 5]
                    .into_iter()
                    .map(|o| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(o)
                            .with_committed_leader_epoch(-1)
                    })
                    .collect(),
            )]);
    let answer = until_served(&client, 8, || request.clone()).await?;
    let codes: Vec<String> = answer
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| format!("{} {}", p.partition_index, err(p.error_code)))
        })
        .collect();
    Ok(vec![
        format!("commit 3 then 5 in one request: {}", codes.join(", ")),
        format!(
            "fetch: {}",
            fetch_detailed(&client, &group, &topic, &[0]).await?
        ),
        format!(
            "same topic in two entries: {}",
            commit(
                &cx,
                &client,
                &group,
                8,
                &[(&topic, 0, 7, -1, None), (&topic, 0, 9, -1, None)]
            )
            .await?
        ),
        format!(
            "fetch: {}",
            fetch_detailed(&client, &group, &topic, &[0]).await?
        ),
    ])
}

async fn offset_commit_no_topics(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let mut lines = vec![format!(
        "v8 no topics to a new group: {}",
        commit(&cx, &client, &group, 8, &[]).await?
    )];
    lines.push(format!(
        "fetch all: {}",
        fetch_offsets(&cx, &client, &group, None).await?
    ));
    let request = kafka_protocol::messages::DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(text(&group))]);
    let g = &client.send(request, 5).await?.groups[0];
    lines.push(format!(
        "describe: {} {}",
        err(g.error_code),
        g.group_state.as_str()
    ));
    Ok(lines)
}

/// Commits at v2, v3 and v4 with retention times -1, 0, 1 hour and -2: each answer, and the
/// offsets fetched right after.
async fn offset_commit_retention_time_at_v2_to_v4(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (group, topic) = group_and_topic(&cx, &client, 4).await?;
    let mut lines = Vec::new();
    for (partition, (version, retention)) in [(2, -1), (3, 0), (4, 3_600_000), (2, -2)]
        .into_iter()
        .enumerate()
    {
        let p = partition as i32;
        lines.push(format!(
            "v{version} retention {retention}: {}",
            commit_retained(
                &cx,
                &client,
                &group,
                version,
                retention,
                &[(&topic, p, 10 + i64::from(p), -1, None)]
            )
            .await?
        ));
    }
    lines.push(format!(
        "fetch: {}",
        fetch_detailed(&client, &group, &topic, &[0, 1, 2, 3]).await?
    ));
    Ok(lines)
}

/// A leader epoch committed at v8 and at v5 (which has none), fetched at v5 (none) and v8.
async fn offset_commit_leader_epoch_through_versions(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (group, topic) = group_and_topic(&cx, &client, 2).await?;
    let mut lines = vec![
        format!(
            "v8 partition 0 epoch 5: {}",
            commit(&cx, &client, &group, 8, &[(&topic, 0, 1, 5, None)]).await?
        ),
        format!(
            "v5 partition 1 epoch 5: {}",
            commit(&cx, &client, &group, 5, &[(&topic, 1, 1, 5, None)]).await?
        ),
        format!(
            "fetch v8: {}",
            fetch_detailed(&client, &group, &topic, &[0, 1]).await?
        ),
    ];
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(&group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(&topic))
            .with_partition_indexes(vec![0, 1])]));
    let answer = client.send(request, 4).await?;
    let parts: Vec<String> = answer
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            format!(
                "{} offset {} epoch {}",
                p.partition_index, p.committed_offset, p.committed_leader_epoch
            )
        })
        .collect();
    lines.push(format!(
        "fetch v4: {} {}",
        err(answer.error_code),
        parts.join(", ")
    ));
    Ok(lines)
}

async fn offset_commit_to_the_offsets_topic(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    Ok(vec![
        format!(
            "__consumer_offsets/0: {}",
            commit(
                &cx,
                &client,
                &group,
                8,
                &[("__consumer_offsets", 0, 1, -1, None)]
            )
            .await?
        ),
        format!(
            "fetch: {}",
            fetch_detailed(&client, &group, "__consumer_offsets", &[0]).await?
        ),
    ])
}

/// The order of an OffsetCommit v8 answer (a simple commit to a fresh group), printed as it
/// comes: a topic named twice around an unknown partition, an unknown topic and a known one;
/// the same known partitions with nothing refused; only unknown topics, one named twice.
async fn offset_commit_answer_order(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let a = cx.create(&client, "a", 2, &[]).await?;
    let b = cx.create(&client, "b", 1, &[]).await?;
    let (x, y) = (cx.topic("x"), cx.topic("y"));
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let mut lines = Vec::new();
    for entries in [
        &[
            (&a, &[0, 9][..]),
            (&x, &[0][..]),
            (&b, &[0][..]),
            (&a, &[1][..]),
        ][..],
        &[(&a, &[0][..]), (&b, &[0][..]), (&a, &[1][..])][..],
        &[(&x, &[0][..]), (&y, &[1][..]), (&x, &[2][..])][..],
    ] {
        let request = || {
            OffsetCommitRequest::default()
                .with_group_id(GroupId(text(&group)))
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(text(""))
                .with_topics(
                    entries
                        .iter()
                        .map(|(t, partitions)| {
                            OffsetCommitRequestTopic::default()
                                .with_name(name(t))
                                .with_partitions(
                                    partitions
                                        .iter()
                                        .map(|p| {
                                            OffsetCommitRequestPartition::default()
                                                .with_partition_index(*p)
                                                .with_committed_offset(1)
                                                .with_committed_leader_epoch(-1)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                )
        };
        let answer = until_served(&client, 8, request).await?;
        let topics: Vec<String> = answer
            .topics
            .iter()
            .map(|t| {
                let partitions: Vec<String> = t
                    .partitions
                    .iter()
                    .map(|p| format!("{} {}", p.partition_index, err(p.error_code)))
                    .collect();
                format!("{} [{}]", cx.short(&t.name.0), partitions.join(", "))
            })
            .collect();
        lines.push(topics.join(" | "));
    }
    Ok(lines)
}
