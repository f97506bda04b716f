//! Large and hostile KIP-848 consumer groups on the wire, with kmock-client: a thousand members
//! joining a group on two 5,000-partition topics (Kafka creates at most 10,000 records per
//! request, so no single topic has 10,000 partitions), a member subscribing to a million topic
//! names, and a member sending a new large regex on each heartbeat while a member of another group
//! heartbeats (the regex is compiled before the state lock). The coordinator works under the
//! cluster's state lock, so its cost is every connection's wait: each case checks the group's
//! answers exactly and that a second connection's Metadata is answered while it runs (not asserted
//! to interleave: that would be timing). Only hangs are guarded (generously, 10 minutes on a
//! loaded 2-core machine); how long the cases take is printed for the record, never asserted.

mod common;

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::consumer_group::{assigned, said, send};
use common::same;
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, GroupId};
use kmock::Cluster;
use kmock_client::Client;
use kmock_tests::consumer_group::{beat, join};
use tokio::sync::watch;
use uuid::Uuid;

const GROUP: &str = "g";
const TOPIC: &str = "t";
const OTHER_TOPIC: &str = "u";

/// Catches a hang only: far above what either case takes on a loaded machine.
const HANG_GUARD: Duration = Duration::from_secs(600);

/// Sends Metadata (brokers only, so that it costs the broker little of its own) on its own
/// connection, one after another, until `done`; returns how many were answered (at least
/// one: the first is sent before `done` is looked at).
async fn metadata_meanwhile(client: Client, mut done: watch::Receiver<bool>) -> Result<usize> {
    let mut answered = 0;
    loop {
        let answer = client.metadata(Some(&[])).await?;
        same("Metadata's brokers", answer.brokers.len(), 1)?;
        answered += 1;
        if *done.borrow_and_update() {
            return Ok(answered);
        }
    }
}

#[tokio::test]
async fn a_thousand_members_join_ten_thousand_partitions_and_the_target_is_balanced() -> Result<()>
{
    // Kafka's assignment interval (1 s): the joins mostly fall within one, so the target
    // after them is computed at once for a thousand members. Members that join and never
    // heartbeat again must stay: sessions of an hour.
    let cluster = Cluster::builder()
        .topic(TOPIC, 5_000)
        .topic(OTHER_TOPIC, 5_000)
        .consumer_group_session_timeout(Duration::from_secs(3_600))
        .start()
        .await?;
    let addr = cluster.brokers()[0].addr;
    let (c, other) = (Client::connect(addr).await?, Client::connect(addr).await?);
    let (done, watching) = watch::channel(false);
    let meanwhile = tokio::spawn(metadata_meanwhile(other, watching));
    let started = Instant::now();
    let describe = || {
        c.send(
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(common::text(GROUP))]),
            1,
        )
    };
    let case = async {
        let mut last_epoch = 0;
        for i in 0..1_000 {
            let id = format!("member-{i:04}");
            let a = send(&c, join(GROUP, &id, &[TOPIC, OTHER_TOPIC])).await?;
            ensure!(
                a.error_code == 0 && (2..=i + 2).contains(&a.member_epoch),
                "{id}'s join: {}",
                said(&a)
            );
            last_epoch = a.member_epoch;
        }
        eprintln!("1,000 joins: {:?}", started.elapsed());
        // The last member heartbeats until a heartbeat computes the target of all thousand
        // (the first one after the interval): polled, as nothing is journaled for it.
        loop {
            let heartbeat_started = Instant::now();
            let b = send(
                &c,
                beat(GROUP, "member-0999", last_epoch, Uuid::nil(), None),
            )
            .await?;
            let took = heartbeat_started.elapsed();
            ensure!(
                b.error_code == 0,
                "the last member's heartbeat: {}",
                said(&b)
            );
            last_epoch = b.member_epoch;
            let d = describe().await?;
            if d.groups[0].assignment_epoch == 1_001 {
                eprintln!("the heartbeat computing the target of 1,000 members: {took:?}");
                return Ok(d);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let d = tokio::time::timeout(HANG_GUARD, case)
        .await
        .context("hang guard")??;
    done.send(true)?;
    let answered = tokio::time::timeout(HANG_GUARD, meanwhile)
        .await
        .context("hang guard")???;
    eprintln!("Metadata answered meanwhile: {answered}");
    let g = &d.groups[0];
    same(
        "group epochs and members",
        (
            g.error_code,
            g.group_epoch,
            g.assignment_epoch,
            g.members.len(),
        ),
        (0, 1_001, 1_001, 1_000),
    )?;
    let mut counts: Vec<usize> = g
        .members
        .iter()
        .map(|m| {
            m.target_assignment
                .topic_partitions
                .iter()
                .map(|t| t.partitions.len())
                .sum()
        })
        .collect();
    counts.sort();
    same(
        "target partitions per member (fewest, most)",
        (counts[0], counts[999]),
        (10, 10),
    )?;
    let mut every: Vec<(Uuid, i32)> = g
        .members
        .iter()
        .flat_map(|m| m.target_assignment.topic_partitions.iter())
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, *p)))
        .collect();
    every.sort();
    every.dedup();
    same("distinct partitions in the target", every.len(), 10_000)?;
    Ok(())
}

#[tokio::test]
async fn a_member_subscribing_to_a_million_names_leaves_the_others_served() -> Result<()> {
    let cluster = Cluster::builder()
        .topic(TOPIC, 6)
        .consumer_group_assignment_interval(Duration::ZERO)
        .start()
        .await?;
    let addr = cluster.brokers()[0].addr;
    let (c, other) = (Client::connect(addr).await?, Client::connect(addr).await?);
    let t = other.metadata(Some(&[TOPIC])).await?.topics[0].topic_id;
    // A million names that are no topic, and `t`.
    let names: Vec<String> = (0..1_000_000)
        .map(|i| format!("n{i:07}"))
        .chain([TOPIC.to_owned()])
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (done, watching) = watch::channel(false);
    let meanwhile = tokio::spawn(metadata_meanwhile(other, watching));
    let case = async {
        let started = Instant::now();
        let big = send(&c, join(GROUP, "member-big", &refs)).await?;
        eprintln!("the 1,000,001-name join: {:?}", started.elapsed());
        ensure!(
            big.error_code == 0 && big.member_epoch == 2,
            "the big join: {}",
            said(&big)
        );
        same(
            "the big member's assignment",
            assigned(&big, t),
            Some((0..6).collect()),
        )?;
        // Another member's heartbeats: its join, then the big member revokes three and it
        // gets them.
        let started = Instant::now();
        let small = send(&c, join(GROUP, "member-small", &[TOPIC])).await?;
        ensure!(
            small.error_code == 0 && small.member_epoch == 3,
            "the small join: {}",
            said(&small)
        );
        let all = (0..6).collect();
        let big = send(&c, beat(GROUP, "member-big", 2, t, Some(&all))).await?;
        let kept = assigned(&big, t).unwrap_or_default();
        same("partitions the big member keeps", kept.len(), 3)?;
        let big = send(&c, beat(GROUP, "member-big", 2, t, Some(&kept))).await?;
        same("the big member's epoch after revoking", big.member_epoch, 3)?;
        let small = send(
            &c,
            beat(GROUP, "member-small", 3, t, Some(&Default::default())),
        )
        .await?;
        let freed: std::collections::BTreeSet<i32> = (0..6).filter(|p| !kept.contains(p)).collect();
        same(
            "the small member's partitions",
            assigned(&small, t),
            Some(freed),
        )?;
        eprintln!(
            "the other member's join and heartbeats: {:?}",
            started.elapsed()
        );
        Ok(())
    };
    tokio::time::timeout(HANG_GUARD, case)
        .await
        .context("hang guard")??;
    done.send(true)?;
    let answered = tokio::time::timeout(HANG_GUARD, meanwhile)
        .await
        .context("hang guard")???;
    eprintln!("Metadata answered meanwhile: {answered}");
    Ok(())
}

#[tokio::test]
async fn a_member_sending_a_new_large_regex_on_each_heartbeat_leaves_another_group_served(
) -> Result<()> {
    use kafka_protocol::protocol::StrBytes;
    let cluster = Cluster::builder()
        .topic(TOPIC, 6)
        .consumer_group_assignment_interval(Duration::ZERO)
        .start()
        .await?;
    let addr = cluster.brokers()[0].addr;
    let (c, other) = (Client::connect(addr).await?, Client::connect(addr).await?);
    let t = other.metadata(Some(&[TOPIC])).await?.topics[0].topic_id;
    // Each compiles to about 200 KiB, under kmock's 256 KiB limit, and differs from the last.
    let large = |i: usize| {
        Some(StrBytes::from_string(format!(
            "[a-z]{{{}}}|{TOPIC}",
            2_500 + i
        )))
    };
    let hostile = async {
        let first = join("regexes", "member-regex", &[])
            .with_subscribed_topic_names(None)
            .with_subscribed_topic_regex(large(0));
        let mut answer = send(&c, first).await?;
        ensure!(answer.error_code == 0, "the regex join: {}", said(&answer));
        let started = Instant::now();
        for i in 1..=20 {
            let next = beat("regexes", "member-regex", answer.member_epoch, t, None)
                .with_subscribed_topic_regex(large(i));
            answer = send(&c, next).await?;
            ensure!(
                answer.error_code == 0,
                "regex heartbeat {i}: {}",
                said(&answer)
            );
        }
        eprintln!(
            "20 heartbeats with a new large regex: {:?}",
            started.elapsed()
        );
        anyhow::Ok(())
    };
    let served = async {
        let started = Instant::now();
        let mut answer = send(&other, join(GROUP, "member-other", &[TOPIC])).await?;
        ensure!(answer.error_code == 0, "the other join: {}", said(&answer));
        for i in 0..20 {
            let owned = assigned(&answer, t);
            answer = send(
                &other,
                beat(
                    GROUP,
                    "member-other",
                    answer.member_epoch,
                    t,
                    owned.as_ref(),
                ),
            )
            .await?;
            ensure!(
                answer.error_code == 0,
                "other heartbeat {i}: {}",
                said(&answer)
            );
        }
        eprintln!(
            "the other group's join and 20 heartbeats: {:?}",
            started.elapsed()
        );
        anyhow::Ok(())
    };
    // The hang guard only catches a hang.
    let (h, s) = tokio::time::timeout(HANG_GUARD, async { tokio::join!(hostile, served) })
        .await
        .context("hang guard")?;
    h?;
    s?;
    Ok(())
}
