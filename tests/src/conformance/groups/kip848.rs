//! KIP-848 consumer groups, one refusal or edge per case: first-heartbeat fields Kafka
//! refuses, v0's member ids made by the broker, epochs below the member's, ConsumerGroupDescribe
//! of unknown and classic groups and at each version, OffsetCommit by a member at a version
//! before member epochs, simple commits and DeleteGroups while members are in the group, and
//! OffsetFetch with a member epoch of a classic group.

use anyhow::Result;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatResponse, DeleteGroupsRequest, GroupId,
};
use kmock_client::Client;

use super::{
    assigned_line, consumer_heartbeat, coordinator, stable_member, until_served, ErrorCode,
};
use crate::conformance::{answered, case, err, text, Case, Ctx, Lines};
use crate::consumer_group::{self, beat, offset_commit, offset_fetch};

pub const CASES: &[Case] = &[
    case!(consumer_group_heartbeat_first_heartbeat_fields),
    case!(consumer_group_heartbeat_v0_member_id_from_the_broker),
    case!(consumer_group_heartbeat_epoch_below_the_members),
    case!(consumer_group_describe_unknown_and_classic_groups),
    case!(consumer_group_describe_at_each_version),
    case!(offset_commit_v8_by_a_consumer_group_member),
    case!(offset_commit_simple_to_a_consumer_group_with_a_member),
    case!(delete_groups_of_a_consumer_group),
    case!(offset_fetch_with_a_member_epoch_of_a_classic_group),
];

/// An answer as a line: error and message (with `group` shortened), or the epoch relative to
/// `base` and how many partitions it assigns.
fn line(cx: &Ctx, what: &str, answer: &ConsumerGroupHeartbeatResponse, base: i32) -> String {
    if answer.error_code != 0 {
        return format!(
            "{what}: {} {:?}",
            err(answer.error_code),
            answer
                .error_message
                .as_ref()
                .map(|m| m.as_str().replace(&cx.topic("g"), "<g>"))
        );
    }
    assigned_line(what, answer, base)
}

/// First heartbeats Kafka refuses (or takes) beyond those of `consumer_group_heartbeat_errors`,
/// each to a new group.
async fn consumer_group_heartbeat_first_heartbeat_fields(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let base = || consumer_group::join(&group, "m", &[&topic]);
    let mut lines = Vec::new();
    for (i, (what, request)) in [
        (
            "an empty group id",
            consumer_group::join("", "m", &[&topic]),
        ),
        ("rebalance timeout 0", base().with_rebalance_timeout_ms(0)),
        (
            "an empty subscription",
            base().with_subscribed_topic_names(Some(Vec::new())),
        ),
        (
            "names and a regex",
            base().with_subscribed_topic_regex(Some(text("x.*"))),
        ),
        (
            "an empty regex",
            base()
                .with_subscribed_topic_names(None)
                .with_subscribed_topic_regex(Some(text(""))),
        ),
        ("null owned partitions", base().with_topic_partitions(None)),
        (
            "owned partitions of an unknown topic id",
            base().with_topic_partitions(Some(vec![TopicPartitions::default()
                .with_topic_id(uuid::Uuid::from_u128(7))
                .with_partitions(vec![0])])),
        ),
        (
            "assignor range",
            base().with_server_assignor(Some(text("range"))),
        ),
        (
            "an empty assignor",
            base().with_server_assignor(Some(text(""))),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        // Each a first heartbeat to a group of its own (the empty id aside), so that no answer
        // depends on an earlier one (Kafka computes a new target at most once a second).
        let own = cx.topic(&format!("g{i}"));
        coordinator(&client, &own).await?;
        let request = if request.group_id.is_empty() {
            request
        } else {
            request.with_group_id(GroupId(text(&own)))
        };
        let answer = consumer_heartbeat(&client, 1, request).await?;
        lines.push(line(&cx, what, &answer, 0).replace('+', ""));
    }
    Ok(lines)
}

/// ConsumerGroupHeartbeat v0 with an empty member id: Kafka makes one.
async fn consumer_group_heartbeat_v0_member_id_from_the_broker(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let answer =
        consumer_heartbeat(&client, 0, consumer_group::join(&group, "", &[&topic])).await?;
    let member = answer.member_id.as_ref().map(|m| m.to_string());
    let mut lines = vec![format!(
        "v0 join without a member id: {} member id {}",
        err(answer.error_code),
        match &member {
            None => "null",
            Some(m) if m.is_empty() => "empty",
            Some(_) => "given",
        }
    )];
    let own = consumer_group::join(&group, "mine", &[&topic]);
    let answer = consumer_heartbeat(&client, 0, own).await?;
    lines.push(format!(
        "v0 join with its own member id: {} kept {}",
        err(answer.error_code),
        answer
            .member_id
            .as_ref()
            .is_some_and(|m| m.as_str() == "mine")
    ));
    Ok(lines)
}

/// A member at epoch e heartbeats at e-1 (owning nothing listed, owning nothing, owning its
/// partition) and at e.
async fn consumer_group_heartbeat_epoch_below_the_members(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let t = client.metadata(Some(&[topic.as_str()])).await?.topics[0].topic_id;
    let a = consumer_heartbeat(&client, 1, consumer_group::join(&group, "a", &[&topic])).await?;
    let e = a.member_epoch;
    let mut lines = vec![line(&cx, "joins", &a, e)];
    let own: std::collections::BTreeSet<i32> = [0].into();
    for (what, request) in [
        ("epoch e-1, owned null", beat(&group, "a", e - 1, t, None)),
        (
            "epoch e-1, owning nothing",
            beat(&group, "a", e - 1, t, Some(&Default::default())),
        ),
        (
            "epoch e-1, owning its partition",
            beat(&group, "a", e - 1, t, Some(&own)),
        ),
        ("epoch e", beat(&group, "a", e, t, Some(&own))),
    ] {
        lines.push(line(
            &cx,
            what,
            &consumer_heartbeat(&client, 1, request).await?,
            e,
        ));
    }
    Ok(lines)
}

/// ConsumerGroupDescribe v`version` of `groups`: a line each, error and message (group names
/// shortened), state and member count.
async fn consumer_describe(
    cx: &Ctx,
    client: &Client,
    version: i16,
    groups: &[&str],
) -> Result<Lines> {
    let request = ConsumerGroupDescribeRequest::default()
        .with_group_ids(groups.iter().map(|g| GroupId(text(g))).collect());
    let Some(answer) = answered(client.send(request, version).await)? else {
        return Ok(vec![format!("v{version}: connection closed")]);
    };
    Ok(answer
        .groups
        .iter()
        .map(|g| {
            let short = cx.short(&g.group_id.0).to_owned();
            format!(
                "v{version} {short:?}: {} {:?} state {:?} members {}",
                err(g.error_code),
                g.error_message
                    .as_ref()
                    .map(|m| m.as_str().replace(g.group_id.0.as_str(), "<group>")),
                g.group_state.as_str(),
                g.members.len()
            )
        })
        .collect())
}

async fn consumer_group_describe_unknown_and_classic_groups(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (classic, unknown) = (cx.topic("classic"), cx.topic("unknown"));
    stable_member(&client, &classic).await?;
    coordinator(&client, &unknown).await?;
    consumer_describe(&cx, &client, 1, &[&unknown, &classic, ""]).await
}

async fn consumer_group_describe_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let a = consumer_heartbeat(&client, 1, consumer_group::join(&group, "a", &[&topic])).await?;
    let mut lines = vec![line(&cx, "joins", &a, a.member_epoch)];
    for version in 0..=1 {
        lines.extend(consumer_describe(&cx, &client, version, &[&group]).await?);
        let request = ConsumerGroupDescribeRequest::default()
            .with_include_authorized_operations(true)
            .with_group_ids(vec![GroupId(text(&group))]);
        let answer = client.send(request, version).await?;
        lines.push(format!(
            "v{version} authorized operations {}",
            answer.groups[0].authorized_operations
        ));
    }
    Ok(lines)
}

/// OffsetCommit at `version` of partition 0 of `topic` by (member, epoch): the error names.
async fn commit_at(
    client: &Client,
    version: i16,
    group: &str,
    who: (&str, i32),
    topic: &str,
) -> Result<String> {
    let request = || offset_commit(group, who, topic, &[0], 1);
    let answer = until_served(client, version, request).await?;
    let codes: Vec<String> = answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| err(p.error_code)))
        .collect();
    Ok(codes.join(" "))
}

/// A consumer group of one member `a` on a one-partition topic: the topic and the epoch.
async fn consumer_group_of_one(cx: &Ctx, client: &Client, group: &str) -> Result<(String, i32)> {
    let topic = cx.create(client, "t", 1, &[]).await?;
    coordinator(client, group).await?;
    let a = consumer_heartbeat(client, 1, consumer_group::join(group, "a", &[&topic])).await?;
    anyhow::ensure!(a.error_code == 0, "joining: {}", err(a.error_code));
    Ok((topic, a.member_epoch))
}

async fn offset_commit_v8_by_a_consumer_group_member(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (topic, e) = consumer_group_of_one(&cx, &client, &group).await?;
    let mut lines = Vec::new();
    for version in [8, 9] {
        lines.push(format!(
            "v{version} by the member at its epoch: {}",
            commit_at(&client, version, &group, ("a", e), &topic).await?
        ));
    }
    Ok(lines)
}

async fn offset_commit_simple_to_a_consumer_group_with_a_member(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (topic, _) = consumer_group_of_one(&cx, &client, &group).await?;
    let mut lines = Vec::new();
    for version in [8, 9] {
        lines.push(format!(
            "v{version} simple commit: {}",
            commit_at(&client, version, &group, ("", -1), &topic).await?
        ));
    }
    lines.push(format!(
        "v9 no member id at epoch 1: {}",
        commit_at(&client, 9, &group, ("", 1), &topic).await?
    ));
    Ok(lines)
}

/// DeleteGroups v2 of a consumer group with a member, then after it left.
async fn delete_groups_of_a_consumer_group(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (topic, _) = consumer_group_of_one(&cx, &client, &group).await?;
    let t = client.metadata(Some(&[topic.as_str()])).await?.topics[0].topic_id;
    let delete = || DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(&group))]);
    let mut lines = Vec::new();
    let answer = client.send(delete(), 2).await?;
    lines.push(format!(
        "with a member: {}",
        err(answer.results[0].error_code)
    ));
    let left = consumer_heartbeat(&client, 1, beat(&group, "a", -1, t, None)).await?;
    lines.push(format!("the member leaves: {}", err(left.error_code)));
    let answer = client.send(delete(), 2).await?;
    lines.push(format!("empty: {}", err(answer.results[0].error_code)));
    lines.extend(consumer_describe(&cx, &client, 1, &[&group]).await?);
    Ok(lines)
}

/// OffsetFetch v9 with a member id and epoch, of a classic group with a stable member.
async fn offset_fetch_with_a_member_epoch_of_a_classic_group(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let (member, generation) = stable_member(&client, &group).await?;
    let mut lines = Vec::new();
    for (what, m, e) in [
        ("no member, epoch -1", "", -1),
        ("the member at its generation", member.as_str(), generation),
        ("the member at epoch 99", member.as_str(), 99),
        ("an unknown member", "ghost", generation),
    ] {
        let request = || offset_fetch(&group, (m, e), &topic);
        let answer = until_served(&client, 9, request).await?;
        lines.push(format!("{what}: {}", err(answer.code())));
    }
    Ok(lines)
}
