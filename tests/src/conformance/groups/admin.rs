//! Group administration: DescribeGroups, ListGroups (state and type filters), DeleteGroups,
//! OffsetDelete, and JoinGroup /
//! SyncGroup refusals of a second member (protocol type and protocol mismatches, static
//! members).

use anyhow::Result;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, JoinGroupRequest, JoinGroupResponse,
    ListGroupsRequest, OffsetDeleteRequest, SyncGroupRequest,
};
use kmock_client::Client;

use super::commits::{commit, fetch_offsets};
use super::{coordinator, joined_line, leave, stable_member, until_served};
use crate::conformance::{case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(describe_groups_unknown_group),
    case!(describe_groups_stable_empty_and_left),
    case!(describe_groups_empty_list_and_duplicates),
    case!(list_groups_state_filters),
    case!(list_groups_type_filters),
    case!(delete_groups_unknown_empty_and_non_empty),
    case!(delete_groups_same_group_twice),
    case!(delete_groups_empty_list),
    case!(offset_delete_unknown_group_and_topic),
    case!(offset_delete_of_an_empty_group),
    case!(offset_delete_subscribed_topic),
    case!(join_group_protocol_type_mismatch),
    case!(join_group_protocol_mismatch),
    case!(join_group_session_timeout_above_max),
    case!(join_group_static_member),
    case!(sync_group_protocol_mismatch),
];

/// DescribeGroups v5 of `groups`: one line per group, `G: ERROR state S type T protocol P
/// members N`, group ids shortened.
async fn describe(cx: &Ctx, client: &Client, groups: &[&str]) -> Result<Lines> {
    let request = DescribeGroupsRequest::default()
        .with_groups(groups.iter().map(|g| GroupId(text(g))).collect());
    let answer = client.send(request, 5).await?;
    Ok(answer
        .groups
        .iter()
        .map(|g| {
            format!(
                "describe {:?}: {} state {} type {:?} protocol {:?} members {}",
                cx.short(&g.group_id.0),
                err(g.error_code),
                g.group_state.as_str(),
                g.protocol_type.as_str(),
                g.protocol_data.as_str(),
                g.members.len()
            )
        })
        .collect())
}

/// A group with one committed offset (partition 0 of a new topic `t`) and no member: its
/// topic's full name.
async fn committed_group(cx: &Ctx, client: &Client, group: &str) -> Result<String> {
    coordinator(client, group).await?;
    let full = cx.create(client, "t", 1, &[]).await?;
    let code = commit(client, group, -1, "", &full).await?;
    anyhow::ensure!(code == "NONE", "committing to {group}: {code}");
    Ok(full)
}

async fn describe_groups_unknown_group(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    // Not the empty group id: Kafka 4.4 described it as Dead in one run and as Empty in
    // others (offsets committed under it by an earlier case), so no stable line.
    describe(&cx, &client, &[&group]).await
}

async fn describe_groups_stable_empty_and_left(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (stable, empty) = (cx.topic("stable"), cx.topic("empty"));
    let (member, _) = stable_member(&client, &stable).await?;
    committed_group(&cx, &client, &empty).await?;
    let mut lines = describe(&cx, &client, &[&stable, &empty]).await?;
    lines.push(format!(
        "leave: {}",
        leave(&client, &stable, &member).await?
    ));
    lines.extend(describe(&cx, &client, &[&stable]).await?);
    Ok(lines)
}

async fn describe_groups_empty_list_and_duplicates(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    stable_member(&client, &group).await?;
    let mut lines = vec!["empty list:".to_owned()];
    lines.extend(describe(&cx, &client, &[]).await?);
    lines.push("twice:".to_owned());
    lines.extend(describe(&cx, &client, &[&group, &group]).await?);
    Ok(lines)
}

/// ListGroups v5 with `states` and `types` filters: the error, then this case's groups as
/// `G state S type T protocol P`, sorted.
async fn list(cx: &Ctx, client: &Client, states: &[&str], types: &[&str]) -> Result<String> {
    let request = ListGroupsRequest::default()
        .with_states_filter(states.iter().map(|s| text(s)).collect())
        .with_types_filter(types.iter().map(|s| text(s)).collect());
    let Some(answer) = crate::conformance::answered(client.send(request, 5).await)? else {
        return Ok(format!("list {states:?} {types:?}: connection closed"));
    };
    let mut groups: Vec<String> = answer
        .groups
        .iter()
        .filter(|g| cx.short(&g.group_id.0) != g.group_id.0.as_str())
        .map(|g| {
            format!(
                "{} {} {} {:?}",
                cx.short(&g.group_id.0),
                g.group_state.as_str(),
                g.group_type.as_str(),
                g.protocol_type.as_str()
            )
        })
        .collect();
    groups.sort();
    Ok(format!(
        "list {states:?} {types:?}: {} [{}]",
        err(answer.error_code),
        groups.join(", ")
    ))
}

async fn list_groups_state_filters(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    stable_member(&client, &cx.topic("stable")).await?;
    committed_group(&cx, &client, &cx.topic("empty")).await?;
    let mut lines = Vec::new();
    for states in [
        &[][..],
        &["Stable"],
        &["Empty"],
        &["stable"],
        &["Stable", "Empty"],
        &["PreparingRebalance"],
        &["NoSuchState"],
    ] {
        lines.push(list(&cx, &client, states, &[]).await?);
    }
    Ok(lines)
}

async fn list_groups_type_filters(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    stable_member(&client, &cx.topic("stable")).await?;
    let mut lines = Vec::new();
    for types in [
        &["classic"][..],
        &["Classic"],
        &["consumer"],
        &["share"],
        &["nosuchtype"],
    ] {
        let client = cx.connect().await?;
        lines.push(list(&cx, &client, &[], types).await?);
    }
    Ok(lines)
}

/// DeleteGroups v2 of `groups`: `delete [G: ERROR, ...]` in the order answered.
async fn delete(cx: &Ctx, client: &Client, groups: &[&str]) -> Result<String> {
    let request = DeleteGroupsRequest::default()
        .with_groups_names(groups.iter().map(|g| GroupId(text(g))).collect());
    let answer = client.send(request, 2).await?;
    let mut results: Vec<String> = answer
        .results
        .iter()
        .map(|r| format!("{:?}: {}", cx.short(&r.group_id.0), err(r.error_code)))
        .collect();
    results.sort();
    Ok(format!("delete [{}]", results.join(", ")))
}

async fn delete_groups_unknown_empty_and_non_empty(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (stable, empty, unknown) = (cx.topic("stable"), cx.topic("empty"), cx.topic("unknown"));
    stable_member(&client, &stable).await?;
    let full = committed_group(&cx, &client, &empty).await?;
    coordinator(&client, &unknown).await?;
    // Not the empty group id: see `describe_groups_unknown_group`.
    let mut lines = vec![delete(&cx, &client, &[&stable, &empty, &unknown]).await?];
    lines.extend(describe(&cx, &client, &[&stable, &empty]).await?);
    lines.push(format!(
        "fetch deleted: {}",
        fetch_offsets(&cx, &client, &empty, Some(&full)).await?
    ));
    lines.push(delete(&cx, &client, &[&empty]).await?);
    Ok(lines)
}

async fn delete_groups_same_group_twice(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    committed_group(&cx, &client, &group).await?;
    Ok(vec![delete(&cx, &client, &[&group, &group]).await?])
}

async fn delete_groups_empty_list(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    Ok(vec![delete(&cx, &client, &[]).await?])
}

/// OffsetDelete v0 of partitions of topics from `group`: `offset delete: ERROR [T/P ERROR ...]`.
async fn offset_delete(
    cx: &Ctx,
    client: &Client,
    group: &str,
    topics: &[(&str, &[i32])],
) -> Result<String> {
    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(
            topics
                .iter()
                .map(|(t, ps)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(name(t))
                        .with_partitions(
                            ps.iter()
                                .map(|p| {
                                    OffsetDeleteRequestPartition::default().with_partition_index(*p)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let answer = client.send(request, 0).await?;
    let mut parts: Vec<String> = answer
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                format!(
                    "{}/{} {}",
                    cx.short(&t.name.0),
                    p.partition_index,
                    err(p.error_code)
                )
            })
        })
        .collect();
    parts.sort();
    Ok(format!(
        "offset delete: {} [{}]",
        err(answer.error_code),
        parts.join(" ")
    ))
}

async fn offset_delete_unknown_group_and_topic(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (unknown, group) = (cx.topic("unknown"), cx.topic("g"));
    coordinator(&client, &unknown).await?;
    let full = committed_group(&cx, &client, &group).await?;
    Ok(vec![
        offset_delete(&cx, &client, &unknown, &[(&full, &[0])]).await?,
        offset_delete(&cx, &client, "", &[(&full, &[0])]).await?,
        offset_delete(&cx, &client, &group, &[(&cx.topic("nobody"), &[0])]).await?,
        offset_delete(&cx, &client, &group, &[(&full, &[7])]).await?,
        offset_delete(&cx, &client, &group, &[]).await?,
    ])
}

async fn offset_delete_of_an_empty_group(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let full = committed_group(&cx, &client, &group).await?;
    Ok(vec![
        offset_delete(&cx, &client, &group, &[(&full, &[0])]).await?,
        format!(
            "fetch: {}",
            fetch_offsets(&cx, &client, &group, Some(&full)).await?
        ),
        offset_delete(&cx, &client, &group, &[(&full, &[0])]).await?,
        describe(&cx, &client, &[&group]).await?.join(" "),
    ])
}

/// A consumer protocol subscription (v0) to `topics`.
pub(super) fn subscribing(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for t in topics {
        b.put_i16(t.len() as i16);
        b.put_slice(t.as_bytes());
    }
    b.put_i32(-1);
    b.freeze()
}

/// JoinGroup v9 with a subscription to `topics`, protocol type `kind` and `protocols`, as
/// `member` (with `instance` as its group instance id when given).
pub(super) async fn join_as(
    client: &Client,
    group: &str,
    member: &str,
    instance: Option<&str>,
    kind: &str,
    protocols: &[&str],
    topics: &[&str],
) -> Result<JoinGroupResponse> {
    until_served(client, 9, || {
        JoinGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_member_id(text(member))
            .with_group_instance_id(instance.map(text))
            .with_protocol_type(text(kind))
            .with_protocols(
                protocols
                    .iter()
                    .map(|p| {
                        JoinGroupRequestProtocol::default()
                            .with_name(text(p))
                            .with_metadata(subscribing(topics))
                    })
                    .collect(),
            )
    })
    .await
}

/// A member of `group` subscribed to `full`, joined and synced; it commits offset 1 of `full`
/// and of `other` (subscribed to by nobody), then OffsetDelete of both.
async fn offset_delete_subscribed_topic(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let other = cx.create(&client, "other", 1, &[]).await?;
    let first = join_as(&client, &group, "", None, "consumer", &["range"], &[&full]).await?;
    let joined = join_as(
        &client,
        &group,
        first.member_id.as_str(),
        None,
        "consumer",
        &["range"],
        &[&full],
    )
    .await?;
    let member = joined.member_id.to_string();
    let synced = super::sync(&client, &group, &member, joined.generation_id, true).await?;
    let mut lines = vec![
        joined_line("subscribed", &joined),
        format!("sync: {synced}"),
    ];
    for t in [&full, &other] {
        let code = commit(&client, &group, joined.generation_id, &member, t).await?;
        lines.push(format!("commit {}: {code}", cx.short(t)));
    }
    lines.push(offset_delete(&cx, &client, &group, &[(&full, &[0]), (&other, &[0])]).await?);
    Ok(lines)
}

async fn join_group_protocol_type_mismatch(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    stable_member(&client, &group).await?;
    let answer = join_as(&client, &group, "", None, "connect", &["range"], &[]).await?;
    Ok(vec![joined_line("another protocol type", &answer)])
}

async fn join_group_protocol_mismatch(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    stable_member(&client, &group).await?;
    let answer = join_as(&client, &group, "", None, "consumer", &["roundrobin"], &[]).await?;
    let mut lines = vec![joined_line("no common protocol", &answer)];
    let empty = cx.topic("empty");
    coordinator(&client, &empty).await?;
    let answer = join_as(&client, &empty, "", None, "", &["range"], &[]).await?;
    lines.push(joined_line("empty protocol type", &answer));
    Ok(lines)
}

async fn join_group_session_timeout_above_max(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let mut lines = Vec::new();
    for ms in [1_800_000, 1_800_001, 5_999, 6_000] {
        let answer = super::join_with(&client, &group, "", ms, &["range"]).await?;
        lines.push(joined_line(&format!("session {ms} ms"), &answer));
    }
    Ok(lines)
}

async fn join_group_static_member(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let first = join_as(&client, &group, "", Some("i1"), "consumer", &["range"], &[]).await?;
    let mut lines = vec![joined_line("static, no member id", &first)];
    let member = first.member_id.to_string();
    let synced = super::sync(&client, &group, &member, first.generation_id, true).await?;
    lines.push(format!("sync: {synced}"));
    let fenced = join_as(
        &client,
        &group,
        "ghost",
        Some("i1"),
        "consumer",
        &["range"],
        &[],
    )
    .await?;
    lines.push(joined_line("static, unknown member id", &fenced));
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(text(&group)))
        .with_generation_id(first.generation_id)
        .with_member_id(text("ghost"))
        .with_group_instance_id(Some(text("i1")));
    lines.push(format!(
        "sync, unknown member id: {}",
        err(client.send(request, 5).await?.error_code)
    ));
    Ok(lines)
}

async fn sync_group_protocol_mismatch(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let first = super::join(&client, &group, "").await?;
    let joined = super::join(&client, &group, first.member_id.as_str()).await?;
    let mut lines = Vec::new();
    for (kind, protocol) in [("connect", "range"), ("consumer", "roundrobin")] {
        let request = SyncGroupRequest::default()
            .with_group_id(GroupId(text(&group)))
            .with_generation_id(joined.generation_id)
            .with_member_id(joined.member_id.clone())
            .with_protocol_type(Some(text(kind)))
            .with_protocol_name(Some(text(protocol)));
        lines.push(format!(
            "sync {kind} {protocol}: {}",
            err(client.send(request, 5).await?.error_code)
        ));
    }
    Ok(lines)
}
