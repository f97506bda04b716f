//! KIP-848 consumer groups: ConsumerGroupHeartbeat refusals, two members reconciling (the
//! second gets partitions only once the first revoked them), OffsetCommit and OffsetFetch
//! judged by member epoch (Kafka 4.4 with KIP-1251's assignment epochs), and how
//! ConsumerGroupDescribe, DescribeGroups and ListGroups show the group. Lines carry counts of
//! partitions, not which ones: the assignors may choose differently.

use std::collections::BTreeSet;

use anyhow::Result;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::*;
use kmock_client::Client;

use super::{coordinator, until_served, ErrorCode};
use crate::conformance::{err, text, Ctx, Lines};
use crate::consumer_group::{self, beat, offset_commit, offset_fetch};

impl ErrorCode for ConsumerGroupHeartbeatResponse {
    fn code(&self) -> i16 {
        self.error_code
    }
}

/// A first heartbeat of `member` subscribing to `topic`.
fn join(group: &str, member: &str, topic: &str) -> ConsumerGroupHeartbeatRequest {
    consumer_group::join(group, member, &[topic])
}

/// Sends a heartbeat at v1, again while the coordinator loads.
async fn send(
    client: &Client,
    request: ConsumerGroupHeartbeatRequest,
) -> Result<ConsumerGroupHeartbeatResponse> {
    until_served(client, 1, || request.clone()).await
}

/// The partitions of the answer's assignment (`None`: no assignment in the answer).
fn assigned(answer: &ConsumerGroupHeartbeatResponse) -> Option<BTreeSet<i32>> {
    answer.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().copied())
            .collect()
    })
}

/// An answer as a line: error, epoch, and how many partitions it assigns.
fn line(what: &str, answer: &ConsumerGroupHeartbeatResponse) -> String {
    if answer.error_code != 0 {
        return format!("{what}: {}", err(answer.error_code));
    }
    let assignment = match assigned(answer) {
        Some(ps) => format!("{} partitions", ps.len()),
        None => "assignment absent".to_owned(),
    };
    format!(
        "{what}: NONE epoch {} interval {} {assignment}",
        answer.member_epoch, answer.heartbeat_interval_ms
    )
}

/// A refusal as a line, with Kafka's message (these name no group or member).
fn refusal(what: &str, answer: &ConsumerGroupHeartbeatResponse) -> String {
    format!(
        "{what}: {} {:?}",
        err(answer.error_code),
        answer.error_message.as_ref().map(|m| m.as_str())
    )
}

/// Heartbeats Kafka refuses, and one member's life from join to leave.
pub(super) async fn consumer_group_heartbeat_errors(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 2, &[]).await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let t = client.metadata(Some(&[topic.as_str()])).await?.topics[0].topic_id;
    let mut lines = Vec::new();
    let base = || join(&group, "m", &topic);
    for (what, request) in [
        ("v1 without a member id", join(&group, "", &topic)),
        ("no rebalance timeout", base().with_rebalance_timeout_ms(-1)),
        ("no subscription", base().with_subscribed_topic_names(None)),
        (
            "owned partitions when joining",
            base().with_topic_partitions(Some(vec![TopicPartitions::default()
                .with_topic_id(t)
                .with_partitions(vec![0])])),
        ),
        ("epoch -3", beat(&group, "m", -3, t, None)),
        (
            "epoch -2 without an instance id",
            beat(&group, "m", -2, t, None),
        ),
        (
            "an unknown assignor",
            base().with_server_assignor(Some(text("sticky"))),
        ),
        (
            "an empty instance id",
            base().with_instance_id(Some(text(""))),
        ),
    ] {
        lines.push(refusal(what, &send(&client, request).await?));
    }
    let answer = send(&client, beat(&group, "m", 1, t, None)).await?;
    lines.push(line("epoch 1 to a group that does not exist", &answer));
    let answer = send(&client, base()).await?;
    lines.push(line("join", &answer));
    let e = answer.member_epoch;
    for (what, request) in [
        ("an unknown member", beat(&group, "ghost", e, t, None)),
        (
            "an epoch above the member's",
            beat(&group, "m", e + 1, t, None),
        ),
        ("the member's epoch", beat(&group, "m", e, t, None)),
        (
            "epoch 0, owning nothing",
            beat(&group, "m", 0, t, Some(&BTreeSet::new())),
        ),
        (
            "an unknown member leaving",
            beat(&group, "ghost", -1, t, None),
        ),
        ("leaving", beat(&group, "m", -1, t, None)),
        ("after leaving", beat(&group, "m", e, t, None)),
    ] {
        lines.push(line(what, &send(&client, request).await?));
    }
    Ok(lines)
}

/// A v9 OffsetCommit of `partitions` at `epoch`, as the partitions' error names.
async fn commit(
    client: &Client,
    group: &str,
    (member, epoch): (&str, i32),
    topic: &str,
    partitions: &[i32],
) -> Result<String> {
    let request = || offset_commit(group, (member, epoch), topic, partitions, 1);
    let answer = until_served(client, 9, request).await?;
    let codes: Vec<String> = answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| err(p.error_code)))
        .collect();
    Ok(codes.join(" "))
}

/// A v9 OffsetFetch of partition 0 by `member` at `epoch`: the group's error name.
async fn fetch(
    client: &Client,
    group: &str,
    member: &str,
    epoch: i32,
    topic: &str,
) -> Result<String> {
    let request = || offset_fetch(group, (member, epoch), topic);
    Ok(err(until_served(client, 9, request).await?.code()))
}

/// ConsumerGroupDescribe of `group` as a line: state and epochs, members and their epochs.
async fn described(client: &Client, group: &str) -> Result<String> {
    let described = client
        .send(
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]),
            1,
        )
        .await?;
    let g = &described.groups[0];
    let mut members: Vec<String> = g
        .members
        .iter()
        .map(|m| {
            format!(
                "{}@{}/{}",
                m.member_id.as_str(),
                m.member_epoch,
                m.member_type
            )
        })
        .collect();
    members.sort();
    Ok(format!(
        "{} {} group epoch {} assignment epoch {} assignor {} members {members:?}",
        err(g.error_code),
        g.group_state.as_str(),
        g.group_epoch,
        g.assignment_epoch,
        g.assignor_name.as_str(),
    ))
}

/// Heartbeats of `member` at `epoch` owning `owned` until `done` holds for the answer, as a
/// client heartbeats at its interval (Kafka 4.4 computes a new target at most once a second,
/// `group.consumer.assignment.interval.ms`); the case's hang guard bounds it.
async fn beat_until(
    client: &Client,
    request: impl Fn() -> ConsumerGroupHeartbeatRequest,
    done: impl Fn(&ConsumerGroupHeartbeatResponse) -> bool,
) -> Result<ConsumerGroupHeartbeatResponse> {
    loop {
        let answer = send(client, request()).await?;
        if answer.error_code != 0 || done(&answer) {
            return Ok(answer);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Two members share four partitions; commits at each epoch; the group described.
pub(super) async fn consumer_group_reconciliation_and_commits(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 4, &[]).await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let t = client.metadata(Some(&[topic.as_str()])).await?.topics[0].topic_id;
    let mut lines = Vec::new();
    let a = send(&client, join(&group, "a", &topic)).await?;
    lines.push(line("A joins", &a));
    lines.push(format!("described: {}", described(&client, &group).await?));
    let all: BTreeSet<i32> = (0..4).collect();
    let a1 = a.member_epoch;
    let b = send(&client, join(&group, "b", &topic)).await?;
    lines.push(format!(
        "B joins: {} epoch {} {:?} partitions",
        err(b.error_code),
        if b.member_epoch == a1 { "A's" } else { "other" },
        assigned(&b).map(|p| p.len())
    ));
    // A keeps its epoch and is asked to give two up (once the broker computed the target).
    let a = beat_until(
        &client,
        || beat(&group, "a", a1, t, Some(&all)),
        |r| assigned(r).is_some_and(|p| p.len() < 4),
    )
    .await?;
    lines.push(format!(
        "A asked to revoke: {} epoch {} keeps {:?}",
        err(a.error_code),
        if a.member_epoch == a1 {
            "unchanged"
        } else {
            "changed"
        },
        assigned(&a).map(|p| p.len())
    ));
    let kept = assigned(&a).unwrap_or_default();
    let revoked: Vec<i32> = all.difference(&kept).copied().collect();
    let kept_one = kept.iter().next().copied().unwrap_or(0);
    let b = send(
        &client,
        beat(&group, "b", b.member_epoch, t, Some(&BTreeSet::new())),
    )
    .await?;
    let b2 = b.member_epoch;
    lines.push(format!(
        "B before A revoked: {} {:?} partitions",
        err(b.error_code),
        assigned(&b).map(|p| p.len())
    ));
    let c = commit(&client, &group, ("a", a1), &topic, &revoked[..1]).await?;
    lines.push(format!(
        "A commits a partition it is revoking, at its epoch: {c}"
    ));
    let a = send(&client, beat(&group, "a", a1, t, Some(&kept))).await?;
    let a2 = a.member_epoch;
    lines.push(format!(
        "A revoked: {} epoch {} {:?}",
        err(a.error_code),
        if a2 > a1 { "up" } else { "not up" },
        assigned(&a).map(|p| p.len())
    ));
    for (what, epoch, partitions) in [
        ("a kept partition, previous epoch", a1, vec![kept_one]),
        (
            "a kept and a revoked partition, previous epoch",
            a1,
            vec![kept_one, revoked[0]],
        ),
        ("a revoked partition, its epoch", a2, vec![revoked[1]]),
        (
            "a kept partition, an epoch above its own",
            a2 + 1,
            vec![kept_one],
        ),
    ] {
        let c = commit(&client, &group, ("a", epoch), &topic, &partitions).await?;
        lines.push(format!("A commits {what}: {c}"));
    }
    let c = commit(&client, &group, ("ghost", a2), &topic, &[kept_one]).await?;
    lines.push(format!("an unknown member commits: {c}"));
    for (what, epoch) in [("previous", a1), ("its", a2), ("above its", a2 + 1)] {
        let f = fetch(&client, &group, "a", epoch, &topic).await?;
        lines.push(format!("A fetches offsets at {what} epoch: {f}"));
    }
    let f = fetch(&client, &group, "ghost", a2, &topic).await?;
    lines.push(format!("an unknown member fetches offsets: {f}"));
    let b = beat_until(
        &client,
        || beat(&group, "b", b2, t, Some(&BTreeSet::new())),
        |r| assigned(r).is_some_and(|p| !p.is_empty()),
    )
    .await?;
    lines.push(format!(
        "B after A revoked: {} epoch {} {:?} partitions",
        err(b.error_code),
        if b.member_epoch == a2 { "A's" } else { "other" },
        assigned(&b).map(|p| p.len())
    ));
    let b3 = b.member_epoch;
    let d = described(&client, &group).await?;
    lines.push(format!(
        "described: {}",
        d.replace(&format!("@{a2}/"), "@A's/")
    ));
    for v in [5, 6] {
        let d = client
            .send(
                DescribeGroupsRequest::default().with_groups(vec![GroupId(text(&group))]),
                v,
            )
            .await?;
        let g = &d.groups[0];
        lines.push(format!(
            "DescribeGroups v{v}: {} state {} protocol type {:?}",
            err(g.error_code),
            g.group_state.as_str(),
            g.protocol_type.as_str()
        ));
    }
    let listed = client
        .send(
            ListGroupsRequest::default().with_types_filter(vec![text("consumer")]),
            5,
        )
        .await?;
    for l in listed
        .groups
        .iter()
        .filter(|l| l.group_id.as_str() == group)
    {
        lines.push(format!(
            "ListGroups type consumer: {} {} {}",
            l.protocol_type.as_str(),
            l.group_state.as_str(),
            l.group_type.as_str()
        ));
    }
    let left = send(&client, beat(&group, "a", -1, t, None)).await?;
    lines.push(line("A leaves", &left));
    let b = beat_until(
        &client,
        || beat(&group, "b", b3, t, None),
        |r| assigned(r).is_some_and(|p| p.len() == 4),
    )
    .await?;
    lines.push(format!(
        "B after A left: {} epoch {} {:?} partitions",
        err(b.error_code),
        if b.member_epoch > b3 { "up" } else { "not up" },
        assigned(&b).map(|p| p.len())
    ));
    Ok(lines)
}

/// A member subscribing by regex: one that does not compile (Kafka's error and the start of
/// its message: the description after it is RE2/J's), then one matching the case's topic, whose
/// resolution the join starts and a later heartbeat sees.
pub(super) async fn consumer_group_regex_subscriptions(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "r", 2, &[]).await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let t = client.metadata(Some(&[topic.as_str()])).await?.topics[0].topic_id;
    let regex = topic.replace('.', "\\.");
    let by_regex = |regex: &str| {
        consumer_group::join(&group, "a", &[])
            .with_subscribed_topic_names(None)
            .with_subscribed_topic_regex(Some(text(regex)))
    };
    let mut lines = Vec::new();
    let bad = format!("{regex}(");
    let answer = send(&client, by_regex(&bad)).await?;
    let message = answer.error_message.as_ref().map(|m| m.to_string());
    lines.push(format!(
        "a regex that does not compile: {} {:?}",
        err(answer.error_code),
        message.map(|m| {
            let m = m.replace(&bad, "<regex>");
            m.split_once(": ")
                .map_or(m.clone(), |(head, _)| head.to_owned())
        })
    ));
    let described = client
        .send(
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(&group))]),
            0,
        )
        .await?;
    lines.push(format!(
        "the group after it: {}",
        err(described.groups[0].error_code)
    ));
    let a = send(&client, by_regex(&regex)).await?;
    lines.push(line("A joins by regex", &a));
    let epoch = a.member_epoch;
    let a = beat_until(
        &client,
        || beat(&group, "a", epoch, t, None),
        |answer| assigned(answer).is_some_and(|p| p.len() == 2),
    )
    .await?;
    lines.push(line("A once the regex is resolved", &a));
    Ok(lines)
}
