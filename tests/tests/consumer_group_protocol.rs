//! The KIP-848 consumer group protocol on the wire, with kmock-client: two members share six
//! partitions through ConsumerGroupHeartbeat (the first revokes before the second gets them),
//! commits for a revoked partition and with stale member epochs get Kafka 4.4's answers, and
//! the errors of joining, fencing and static membership are Kafka's.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{ensure, Result};
use common::consumer_group::{assigned, commit, fetch_error, said, send};
use common::{err, same};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, DescribeGroupsRequest, GroupId, ListGroupsRequest,
};
use kafka_protocol::ResponseError::*;
use kmock::check::{Checks, Severity};
use kmock::Cluster;
use kmock_client::Client;
use kmock_tests::consumer_group::{beat, join};

const GROUP: &str = "g";
const TOPIC: &str = "t";

async fn setup(cluster: Cluster) -> Result<(Cluster, Client, uuid::Uuid)> {
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let topic = client.metadata(Some(&[TOPIC])).await?.topics[0].topic_id;
    Ok((cluster, client, topic))
}

fn all(n: i32) -> BTreeSet<i32> {
    (0..n).collect()
}

#[tokio::test]
async fn a_second_member_gets_partitions_only_after_the_first_revoked_them_and_commits_are_judged_by_member_epoch(
) -> Result<()> {
    // Every change gets its target at once (Kafka 4.4 computes one at most every second).
    let (cluster, c, t) = setup(
        Cluster::builder()
            .topic(TOPIC, 6)
            .consumer_group_assignment_interval(Duration::ZERO)
            .start()
            .await?,
    )
    .await?;
    // A joins alone: epoch 2 (a new group is at epoch 1, as in Kafka 4.4), all six partitions.
    let a = send(&c, join(GROUP, "member-a", &[TOPIC])).await?;
    ensure!(
        a.error_code == 0 && a.member_epoch == 2,
        "A's join: {}",
        said(&a)
    );
    same("A's first assignment", assigned(&a, t), Some(all(6)))?;
    // B joins: group epoch 3; everything is still A's, so B has nothing yet.
    let b = send(&c, join(GROUP, "member-b", &[TOPIC])).await?;
    ensure!(
        b.error_code == 0 && b.member_epoch == 3,
        "B's join: {}",
        said(&b)
    );
    same(
        "B's first assignment",
        assigned(&b, t),
        Some(BTreeSet::new()),
    )?;
    // A, still owning six, is asked to give three up and stays at epoch 2 until it has.
    let a = send(&c, beat(GROUP, "member-a", 2, t, Some(&all(6)))).await?;
    ensure!(
        a.error_code == 0 && a.member_epoch == 2,
        "A revoking: {}",
        said(&a)
    );
    let kept = assigned(&a, t).unwrap_or_default();
    same("partitions A keeps", kept.len(), 3)?;
    let revoked: Vec<i32> = all(6).difference(&kept).copied().collect();
    // B asks again: the three are not released yet.
    let b = send(&c, beat(GROUP, "member-b", 3, t, Some(&BTreeSet::new()))).await?;
    ensure!(
        b.error_code == 0 && b.member_epoch == 3,
        "B waiting: {}",
        said(&b)
    );
    ensure!(
        assigned(&b, t).unwrap_or_default().is_empty(),
        "B got partitions A still owns: {}",
        said(&b)
    );
    // While revoking, A may still commit them at its epoch (its revocation callback does).
    same(
        "A's commit of a partition pending revocation, epoch 2",
        commit(&c, GROUP, "member-a", 2, TOPIC, &revoked[..1], 10).await?,
        vec![err(0)],
    )?;
    // A acknowledges: epoch 3 with the three it keeps.
    let a = send(&c, beat(GROUP, "member-a", 2, t, Some(&kept))).await?;
    ensure!(
        a.error_code == 0 && a.member_epoch == 3,
        "A revoked: {}",
        said(&a)
    );
    // Now a commit at epoch 2 for a revoked partition is stale (KIP-1251), for a kept one
    // it is fine; one stale partition fails the whole request.
    let kept_one = *kept.iter().next().expect("three kept");
    same(
        "A's commit of a kept partition at its previous epoch",
        commit(&c, GROUP, "member-a", 2, TOPIC, &[kept_one], 11).await?,
        vec![err(0)],
    )?;
    same(
        "A's commit of a revoked partition at its previous epoch",
        commit(&c, GROUP, "member-a", 2, TOPIC, &[kept_one, revoked[0]], 12).await?,
        vec![err(StaleMemberEpoch.code()); 2],
    )?;
    same(
        "A's commit at an epoch above its own",
        commit(&c, GROUP, "member-a", 4, TOPIC, &[kept_one], 13).await?,
        vec![err(StaleMemberEpoch.code())],
    )?;
    // At its new epoch, Kafka takes a commit of any partition, also one A gave up: only the
    // journal shows it (below).
    same(
        "A's commit of a revoked partition at its new epoch",
        commit(&c, GROUP, "member-a", 3, TOPIC, &revoked[1..2], 15).await?,
        vec![err(0)],
    )?;
    same(
        "a commit by a member id the group does not have",
        commit(&c, GROUP, "nobody", 3, TOPIC, &[kept_one], 14).await?,
        vec![err(UnknownMemberId.code())],
    )?;
    same(
        "A's OffsetFetch at a stale epoch",
        fetch_error(&c, GROUP, "member-a", 2, TOPIC).await?,
        err(StaleMemberEpoch.code()),
    )?;
    same(
        "A's OffsetFetch at its epoch",
        fetch_error(&c, GROUP, "member-a", 3, TOPIC).await?,
        err(0),
    )?;
    // B gets what A released.
    let b = send(&c, beat(GROUP, "member-b", 3, t, Some(&BTreeSet::new()))).await?;
    ensure!(
        b.error_code == 0 && b.member_epoch == 3,
        "B after release: {}",
        said(&b)
    );
    same(
        "B's assignment",
        assigned(&b, t),
        Some(revoked.iter().copied().collect()),
    )?;
    // The group is Stable at epoch 3, described as Kafka does; DescribeGroups does not know
    // it, ListGroups names its type.
    let d = c
        .send(
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(common::text(GROUP))]),
            1,
        )
        .await?;
    let g = &d.groups[0];
    same(
        "described group",
        (
            g.error_code,
            g.group_state.as_str(),
            g.group_epoch,
            g.assignment_epoch,
            g.members.len(),
        ),
        (0, "Stable", 3, 3, 2),
    )?;
    let classic = c
        .send(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(common::text(GROUP))]),
            6,
        )
        .await?;
    same(
        "DescribeGroups of a consumer group",
        err(classic.groups[0].error_code),
        err(GroupIdNotFound.code()),
    )?;
    let listed = c
        .send(
            ListGroupsRequest::default().with_types_filter(vec![common::text("consumer")]),
            5,
        )
        .await?;
    same(
        "ListGroups of type consumer",
        listed
            .groups
            .iter()
            .map(|l| {
                (
                    l.group_id.as_str(),
                    l.group_type.as_str(),
                    l.group_state.as_str(),
                )
            })
            .collect::<Vec<_>>(),
        vec![(GROUP, "consumer", "Stable")],
    )?;
    // The checks name what happened, and only that: the commit of a partition A had given up
    // (its heartbeat seq no longer listed it), and the refused commit at its old epoch.
    let report = cluster.check(&Checks::default());
    let unassigned: Vec<&str> = report
        .of_kind("commit-for-unassigned-partition")
        .map(|v| v.message.as_str())
        .collect();
    ensure!(
        unassigned.len() == 1
            && unassigned[0].contains(&format!("committed {TOPIC}-{}", revoked[1]))
            && unassigned[0].contains("ConsumerGroupHeartbeat"),
        "commit-for-unassigned-partition: got {unassigned:?}, expected one, of {TOPIC}-{}",
        revoked[1]
    );
    let stale: Vec<(&str, Severity)> = report
        .of_kind("stale-generation-commit")
        .map(|v| (v.message.as_str(), v.severity))
        .collect();
    ensure!(
        stale.len() == 1
            && stale[0].1 == Severity::Warning
            && stale[0]
                .0
                .contains("used member epoch 2 after that member had been answered member epoch 3"),
        "stale-generation-commit: got {stale:?}, expected one warning for the epoch-1 commit"
    );
    same("violations", report.count(Severity::Violation), 1)?;
    // A leaves: epoch -1 answered, and the group epoch moves on.
    let left = send(&c, beat(GROUP, "member-a", -1, t, None)).await?;
    ensure!(
        left.error_code == 0 && left.member_epoch == -1,
        "A leaving: {}",
        said(&left)
    );
    let b = send(&c, beat(GROUP, "member-b", 3, t, None)).await?;
    ensure!(
        b.error_code == 0 && b.member_epoch == 4,
        "B after A left: {}",
        said(&b)
    );
    same("B's assignment after A left", assigned(&b, t), Some(all(6)))?;
    Ok(())
}

#[tokio::test]
async fn heartbeats_that_kafka_refuses_get_its_errors() -> Result<()> {
    let (_cluster, c, t) = setup(
        Cluster::builder()
            .topic(TOPIC, 2)
            .consumer_group_max_size(3)
            .consumer_group_assignment_interval(Duration::ZERO)
            .start()
            .await?,
    )
    .await?;
    let refused = |what: &'static str, expected: kafka_protocol::ResponseError| {
        move |answer: kafka_protocol::messages::ConsumerGroupHeartbeatResponse| {
            ensure!(
                answer.error_code == expected.code(),
                "{what}: got {}, expected {expected:?}",
                said(&answer)
            );
            Ok(())
        }
    };
    refused("v1 join without a member id", InvalidRequest)(
        send(&c, join(GROUP, "", &[TOPIC])).await?,
    )?;
    refused("an assignor Kafka does not have", UnsupportedAssignor)(
        send(
            &c,
            join(GROUP, "m", &[TOPIC]).with_server_assignor(Some(common::text("sticky"))),
        )
        .await?,
    )?;
    refused(
        "a heartbeat to a group that does not exist",
        GroupIdNotFound,
    )(send(&c, beat("nowhere", "m", 1, t, None)).await?)?;
    let m = send(
        &c,
        join(GROUP, "m", &[TOPIC]).with_server_assignor(Some(common::text("range"))),
    )
    .await?;
    ensure!(m.error_code == 0, "m's join: {}", said(&m));
    refused("an epoch above the member's", FencedMemberEpoch)(
        send(&c, beat(GROUP, "m", m.member_epoch + 1, t, None)).await?,
    )?;
    refused("an unknown member", UnknownMemberId)(
        send(&c, beat(GROUP, "stranger", 1, t, None)).await?,
    )?;
    // Static membership: the instance id is held until its member leaves with -2.
    let s = send(
        &c,
        join(GROUP, "s1", &[TOPIC]).with_instance_id(Some(common::text("i"))),
    )
    .await?;
    ensure!(s.error_code == 0, "s1's join: {}", said(&s));
    refused(
        "a second member with a held instance id",
        UnreleasedInstanceId,
    )(
        send(
            &c,
            join(GROUP, "s2", &[TOPIC]).with_instance_id(Some(common::text("i"))),
        )
        .await?,
    )?;
    let away = send(
        &c,
        beat(GROUP, "s1", -2, t, None).with_instance_id(Some(common::text("i"))),
    )
    .await?;
    ensure!(
        away.error_code == 0 && away.member_epoch == -2,
        "s1 leaving for now: {}",
        said(&away)
    );
    let s2 = send(
        &c,
        join(GROUP, "s2", &[TOPIC]).with_instance_id(Some(common::text("i"))),
    )
    .await?;
    ensure!(s2.error_code == 0, "s2 taking instance i: {}", said(&s2));
    refused("the replaced static member", FencedInstanceId)(
        send(
            &c,
            beat(GROUP, "s1", s.member_epoch, t, None).with_instance_id(Some(common::text("i"))),
        )
        .await?,
    )?;
    // The size check comes first (Kafka's order): the group takes a third member, not a fourth.
    let third = send(&c, join(GROUP, "third", &[TOPIC])).await?;
    ensure!(
        third.error_code == 0,
        "the third member's join: {}",
        said(&third)
    );
    refused(
        "a fourth member beyond group.consumer.max.size 3",
        GroupMaxSizeReached,
    )(send(&c, join(GROUP, "fourth", &[TOPIC])).await?)?;
    Ok(())
}
