//! Consumer groups (classic protocol) through librdkafka against a three-broker kmock cluster:
//! partitions are shared out and taken over when a member leaves (the LeaveGroup, not a session
//! expiry, starts the rebalance), and a member that stops heartbeating (a scripted wire client)
//! is dropped after its session timeout and the survivor takes everything back.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::excerpt::group_excerpt;
use common::groups::{answered_ok, of_group};
use common::member::{describe, partitioned, wait_members, Member};
use common::requests::{
    assigned_partitions, assignment, connect_to_coordinator, fresh_member_id, heartbeat,
    join_group, subscribed_topics, subscription, sync_group, with_protocol,
};
use common::{err, text};
use kafka_protocol::messages::{
    DescribeGroupsRequest, GroupId, JoinGroupRequest, SyncGroupRequest,
};
use kafka_protocol::ResponseError;
use kmock::journal::Entry;
use kmock::Cluster;
use rdkafka::config::ClientConfig;

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
/// The consumers' session timeout: Kafka's `group.min.session.timeout.ms`, the least allowed.
const SESSION_TIMEOUT: Duration = Duration::from_millis(6_000);
/// Hang guard for a group to settle after a change: generous, it only catches a group that
/// never settles.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// A session longer than [`SETTLE_TIMEOUT`], so that no session expires within a wait.
const LEAVING_SESSION: Duration = Duration::from_secs(45);

/// The group requests and cluster operations of the journal, one line each.
fn group_traffic(cluster: &Cluster) -> String {
    group_excerpt(cluster.journal().entries())
}

/// A librdkafka member of `group` subscribed to [`TOPIC`] with the "range" assignor, not
/// committing, with `session` as its session timeout.
fn member(cluster: &Cluster, group: &str, name: &str, session: Duration) -> Result<Member> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", cluster.bootstrap())
        .set("group.id", group)
        .set("session.timeout.ms", session.as_millis().to_string())
        .set("heartbeat.interval.ms", "500")
        .set("enable.auto.commit", "false")
        .set("partition.assignment.strategy", "range");
    Member::start(config, TOPIC, name, None)
}

/// Waits until `members` share out every partition of [`TOPIC`], each some, none twice.
async fn wait_partitioned(cluster: &Cluster, what: &str, members: &[&Member]) -> Result<()> {
    wait_members(what, members, SETTLE_TIMEOUT, |a, _| {
        partitioned(a, PARTITIONS)
    })
    .await
    .with_context(|| format!("group requests:\n{}", group_traffic(cluster)))
}

/// A consumer's JoinGroup for `group` subscribed to [`TOPIC`] with the "range" protocol.
fn consumer_join(
    group: &str,
    member_id: &str,
    session: Duration,
    rebalance: Duration,
) -> JoinGroupRequest {
    join_group(group, member_id, subscription(&[TOPIC]))
        .with_session_timeout_ms(session.as_millis() as i32)
        .with_rebalance_timeout_ms(rebalance.as_millis() as i32)
}

/// A SyncGroup v5 of `member` in `generation`, handing out `assignments` (member id,
/// partitions of [`TOPIC`]) when it is the leader's.
fn consumer_sync(
    group: &str,
    member: &str,
    generation: i32,
    assignments: &[(&str, &[i32])],
) -> SyncGroupRequest {
    let assignments: Vec<(&str, bytes::Bytes)> = assignments
        .iter()
        .map(|&(id, partitions)| (id, assignment(TOPIC, partitions)))
        .collect();
    with_protocol(sync_group(group, generation, member, &assignments))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_consumers_share_six_partitions_and_take_over_when_one_leaves() -> Result<()> {
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .start()
        .await?;
    // Sessions longer than the hang guard: a takeover within it can only be the LeaveGroup's
    // doing, never consumer-3's session expiring.
    let first = member(&cluster, "g", "consumer-1", LEAVING_SESSION)?;
    let second = member(&cluster, "g", "consumer-2", LEAVING_SESSION)?;
    let third = member(&cluster, "g", "consumer-3", LEAVING_SESSION)?;

    wait_partitioned(
        &cluster,
        "three consumers each own some of the 6 partitions, together all, none twice",
        &[&first, &second, &third],
    )
    .await?;
    println!(
        "three consumers settled:\n{}",
        describe(&[&first, &second, &third])
    );

    let errors = third.close();
    ensure!(errors.is_empty(), "consumer-3's client errors: {errors:?}");
    wait_partitioned(
        &cluster,
        "after consumer-3 closed, the other two own all 6 partitions, none twice",
        &[&first, &second],
    )
    .await?;
    println!("the other two took over:\n{}", describe(&[&first, &second]));

    let journal = cluster.journal();
    let left: Vec<&Entry> = journal
        .api("LeaveGroup")
        .filter(|e| e.client_id.as_deref() == Some("consumer-3"))
        .collect();
    ensure!(
        left.len() == 1 && answered_ok(left[0]),
        "consumer-3 closed without one LeaveGroup answered without error; group requests:\n{}",
        group_traffic(&cluster)
    );
    // The LeaveGroup started the rebalance: both others joined again after it, and consumer-3
    // sent nothing more.
    for survivor in ["consumer-1", "consumer-2"] {
        ensure!(
            journal
                .api("JoinGroup")
                .any(|e| e.seq > left[0].seq && e.client_id.as_deref() == Some(survivor)),
            "{survivor} did not join again after consumer-3's LeaveGroup (seq {}):\n{}",
            left[0].seq,
            group_traffic(&cluster)
        );
    }
    ensure!(
        journal
            .client_id("consumer-3")
            .all(|e| e.seq <= left[0].seq || !of_group(e, "g")),
        "consumer-3 sent group requests after its LeaveGroup:\n{}",
        group_traffic(&cluster)
    );

    let errors = [first.close(), second.close()].concat();
    ensure!(
        errors.is_empty(),
        "the survivors' client errors: {errors:?}"
    );
    cluster.check(&kmock::Checks::default()).assert_clean();
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_stops_heartbeating_is_dropped_after_its_session_timeout() -> Result<()> {
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .start()
        .await?;
    let survivor = member(&cluster, "g", "survivor", SESSION_TIMEOUT)?;
    wait_partitioned(
        &cluster,
        "the survivor alone owns all 6 partitions",
        &[&survivor],
    )
    .await?;

    // A scripted member: joins, syncs, and then never heartbeats again.
    let scripted = connect_to_coordinator(&cluster, "g", "scripted").await?;
    let join =
        |member_id: &str| consumer_join("g", member_id, SESSION_TIMEOUT, Duration::from_secs(10));
    let member_id = fresh_member_id(&scripted, join("")).await?;
    let joined = tokio::time::timeout(SETTLE_TIMEOUT, scripted.send(join(&member_id), 5))
        .await
        .with_context(|| {
            format!(
                "the scripted member's JoinGroup was not answered within {SETTLE_TIMEOUT:?}; \
                 group requests:\n{}",
                group_traffic(&cluster)
            )
        })??;
    let joined_at = Instant::now();
    ensure!(
        joined.error_code == 0,
        "the scripted member's JoinGroup with its id: {}",
        err(joined.error_code)
    );
    let generation = joined.generation_id;
    let protocol = joined.protocol_name.clone().unwrap_or_default();
    ensure!(
        protocol.as_str() == "range",
        "protocol chosen: {protocol:?}, expected \"range\""
    );
    // Whichever member leads assigns by ranges over the member ids, sorted.
    let ranges: Vec<(String, Vec<i32>)> = if joined.leader.as_str() == member_id {
        let mut members: Vec<(String, Vec<String>)> = joined
            .members
            .iter()
            .map(|m| {
                Ok((
                    m.member_id.to_string(),
                    subscribed_topics(m.metadata.clone())?,
                ))
            })
            .collect::<Result<_>>()?;
        members.sort();
        let n = members.len() as i32;
        let (per, extra) = (PARTITIONS / n, PARTITIONS % n);
        (0..n)
            .zip(members)
            .map(|(i, (id, _))| {
                let start = i * per + i.min(extra);
                (id, (start..start + per + i32::from(i < extra)).collect())
            })
            .collect()
    } else {
        Vec::new()
    };
    let ranges: Vec<(&str, &[i32])> = ranges
        .iter()
        .map(|(id, partitions)| (id.as_str(), partitions.as_slice()))
        .collect();
    let sync = consumer_sync("g", &member_id, generation, &ranges);
    let synced = tokio::time::timeout(SETTLE_TIMEOUT, scripted.send(sync, 5))
        .await
        .context("the scripted member's SyncGroup was not answered")??;
    let synced_at = Instant::now();
    ensure!(
        synced.error_code == 0,
        "the scripted member's SyncGroup: {}",
        err(synced.error_code)
    );
    let mine = assigned_partitions(synced.assignment.clone(), TOPIC)?;
    ensure!(
        !mine.is_empty(),
        "the scripted member (leader {}) was assigned nothing in generation {generation}",
        joined.leader.as_str() == member_id
    );
    let rest: BTreeSet<i32> = (0..PARTITIONS).filter(|p| !mine.contains(p)).collect();
    wait_members(
        &format!("the survivor owns {rest:?}, the scripted member holding {mine:?}"),
        &[&survivor],
        SETTLE_TIMEOUT,
        |a, _| a[0] == rest,
    )
    .await
    .with_context(|| group_traffic(&cluster))?;
    println!(
        "generation {generation}: scripted member {member_id} holds {mine:?}, survivor {rest:?}"
    );

    // No heartbeat from here on: the scripted member's session expires and the survivor gets
    // everything back.
    wait_partitioned(
        &cluster,
        "the survivor owns all 6 partitions again after the scripted member's session expired",
        &[&survivor],
    )
    .await?;
    let since_join = joined_at.elapsed();
    println!(
        "the survivor took everything back {:?} after the scripted member's SyncGroup \
         ({since_join:?} after its JoinGroup)",
        synced_at.elapsed()
    );
    // The session runs from the join at the earliest: no expiry before that.
    ensure!(
        since_join + Duration::from_millis(200) >= SESSION_TIMEOUT,
        "the scripted member was dropped {since_join:?} after its JoinGroup answer, before its \
         {SESSION_TIMEOUT:?} session timeout"
    );

    // The journal: the survivor joined again after the scripted member's SyncGroup.
    let journal = cluster.journal();
    let scripted_sync = journal
        .api("SyncGroup")
        .filter(|e| e.client_id.as_deref() == Some("scripted"))
        .last()
        .context("the scripted SyncGroup is in the journal")?
        .clone();
    let rejoins: Vec<&Entry> = journal
        .api("JoinGroup")
        .filter(|e| e.client_id.as_deref() == Some("survivor") && e.seq > scripted_sync.seq)
        .collect();
    ensure!(
        !rejoins.is_empty(),
        "no JoinGroup from the survivor after the scripted member's SyncGroup (seq {}); group \
         requests:\n{}",
        scripted_sync.seq,
        group_traffic(&cluster)
    );
    let gap = Duration::from_micros(rejoins[0].at_us - scripted_sync.at_us);
    println!(
        "the survivor rejoined (seq {}) {gap:?} after the scripted SyncGroup (seq {})",
        rejoins[0].seq, scripted_sync.seq
    );

    // The group now: only the survivor, in the next generation; the scripted member is gone.
    let described = scripted
        .send(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(text("g"))]),
            5,
        )
        .await?;
    let group = &described.groups[0];
    let members: Vec<(String, String)> = group
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.client_id.to_string()))
        .collect();
    ensure!(
        group.error_code == 0
            && group.group_state.as_str() == "Stable"
            && members.len() == 1
            && members[0].1 == "survivor",
        "DescribeGroups g: {} state {:?} members {members:?}, expected Stable with the survivor \
         alone",
        err(group.error_code),
        group.group_state.as_str()
    );
    let heartbeat = |member: &str, generation: i32| heartbeat("g", generation, member);
    let late = scripted.send(heartbeat(&member_id, generation), 4).await?;
    ensure!(
        late.error_code == ResponseError::UnknownMemberId.code(),
        "a heartbeat from the expired scripted member: {}, expected UNKNOWN_MEMBER_ID",
        err(late.error_code)
    );
    let survivor_id = &members[0].0;
    let old = scripted.send(heartbeat(survivor_id, generation), 4).await?;
    let next = scripted
        .send(heartbeat(survivor_id, generation + 1), 4)
        .await?;
    ensure!(
        old.error_code == ResponseError::IllegalGeneration.code() && next.error_code == 0,
        "heartbeats for the survivor: generation {generation} got {}, generation {} got {}; \
         expected ILLEGAL_GENERATION then NONE (one rebalance, the expiry)",
        err(old.error_code),
        generation + 1,
        err(next.error_code)
    );

    let errors = survivor.close();
    ensure!(
        errors.is_empty(),
        "the survivor's client errors: {errors:?}"
    );
    cluster.shutdown().await;
    Ok(())
}
