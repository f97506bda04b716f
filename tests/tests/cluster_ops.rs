//! Cluster operations over real sockets: a broker taken down and brought back, a partition's
//! leader moved, a group's coordinator moved, and a reset; each seen by a client as it would see
//! a Kafka failover (closed connections, refused connects, Metadata, NOT_LEADER_OR_FOLLOWER,
//! NOT_COORDINATOR, FENCED_LEADER_EPOCH) and journaled as an entry of its own.

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::{broker_addr as addr, code_is, connect_to as connect, requests, same, text};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError::*;
use kmock::journal::{ClusterOperation, LeaderChange};
use kmock::{Cluster, Error};
use kmock_client::{record, Client};

const TOPIC: &str = "orders";
const PATIENCE: Duration = Duration::from_secs(5);

/// Three brokers; [`TOPIC`] with three partitions of three replicas (the default), partition
/// p preferring broker p + 1.
async fn cluster() -> Result<Cluster> {
    Ok(common::start(3, &[TOPIC], 3).await?.0)
}

/// The error code of producing one record to `TOPIC`/`partition` through `client`.
async fn produce_code(client: &Client, partition: i32) -> Result<i16> {
    let answer = client
        .produce(TOPIC, partition, &[record(b"k", b"v")], -1)
        .await?;
    Ok(answer.responses[0].partition_responses[0].error_code)
}

/// The cluster operations journaled so far.
fn operations(cluster: &Cluster) -> Vec<ClusterOperation> {
    cluster
        .journal()
        .entries()
        .iter()
        .filter_map(|e| e.operation.clone())
        .collect()
}

fn change(topic: &str, partition: i32, from: i32, to: i32, leader_epoch: i32) -> LeaderChange {
    LeaderChange {
        topic: topic.to_owned(),
        partition,
        from,
        to,
        leader_epoch,
    }
}

#[tokio::test]
async fn a_broker_taken_down_closes_its_connections_refuses_new_ones_and_fails_over() -> Result<()>
{
    let cluster = cluster().await?;
    let on_1 = connect(&cluster, 1).await?;
    code_is(
        "produce to orders-0 on its leader",
        produce_code(&on_1, 0).await?,
        None,
    )?;

    cluster.broker_down(1).await?;

    ensure!(
        on_1.wait_closed(PATIENCE).await,
        "broker 1's connection stayed open after it went down"
    );
    ensure!(
        Client::connect(addr(&cluster, 1)).await.is_err(),
        "broker 1 accepted a connection while down"
    );
    // Metadata from a live broker: broker 1 is gone; orders-0 is led by its next replica.
    let on_2 = connect(&cluster, 2).await?;
    let metadata = on_2.metadata(Some(&[TOPIC])).await?;
    let brokers: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id.0).collect();
    same("brokers listed", brokers, vec![2, 3])?;
    same("controller", metadata.controller_id.0, 2)?;
    let p0 = &metadata.topics[0].partitions[0];
    same("orders-0 leader", p0.leader_id.0, 2)?;
    same("orders-0 leader epoch", p0.leader_epoch, 1)?;
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    same("orders-0 replicas", ids(&p0.replica_nodes), vec![1, 2, 3])?;
    same("orders-0 isr", ids(&p0.isr_nodes), vec![2, 3])?;
    same(
        "orders-0 offline replicas",
        ids(&p0.offline_replicas),
        vec![1],
    )?;
    same("cluster.leader", cluster.leader(TOPIC, 0), Some(2))?;
    // The new leader takes the writes; the log kept the record written before.
    code_is(
        "produce to orders-0 on broker 2",
        produce_code(&on_2, 0).await?,
        None,
    )?;
    let fetched = on_2.fetch(TOPIC, 0, 0, Duration::ZERO).await?;
    same(
        "orders-0 high watermark",
        fetched.responses[0].partitions[0].high_watermark,
        2,
    )?;
    let on_3 = connect(&cluster, 3).await?;
    code_is(
        "produce to orders-0 on broker 3",
        produce_code(&on_3, 0).await?,
        Some(NotLeaderOrFollower),
    )?;
    // One journal entry says what happened, with every leader that moved.
    let ops = operations(&cluster);
    let [ClusterOperation::BrokerDown {
        node_id: 1,
        leader_changes,
    }] = ops.as_slice()
    else {
        anyhow::bail!("journaled operations: {ops:?}");
    };
    ensure!(
        leader_changes.contains(&change(TOPIC, 0, 1, 2, 1)),
        "orders-0 1→2 missing from {leader_changes:?}"
    );
    ensure!(
        leader_changes.iter().all(|c| c.from == 1 && c.to != 1),
        "a change not off broker 1: {leader_changes:?}"
    );
    ensure!(
        leader_changes
            .iter()
            .any(|c| c.topic == "__consumer_offsets"),
        "no group coordinator moved: {leader_changes:?}"
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_broker_brought_back_serves_again_and_leads_its_preferred_partitions() -> Result<()> {
    let cluster = cluster().await?;
    cluster.broker_down(1).await?;
    cluster.broker_up(1).await?;

    let on_1 = connect(&cluster, 1).await?;
    let metadata = on_1.metadata(Some(&[TOPIC])).await?;
    same("brokers listed", metadata.brokers.len(), 3)?;
    let p0 = &metadata.topics[0].partitions[0];
    same("orders-0 leader", p0.leader_id.0, 1)?;
    same("orders-0 leader epoch", p0.leader_epoch, 2)?;
    code_is(
        "produce to orders-0 on broker 1",
        produce_code(&on_1, 0).await?,
        None,
    )?;
    // A fetch still at the epoch of broker 2's leadership is fenced, as on Kafka.
    let fetch = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(common::name(TOPIC))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(1)
                .with_partition_max_bytes(1 << 20)])]);
    let answer = on_1.send(fetch, 12).await?;
    code_is(
        "fetch at leader epoch 1",
        answer.responses[0].partitions[0].error_code,
        Some(FencedLeaderEpoch),
    )?;
    let ops = operations(&cluster);
    ensure!(
        matches!(&ops[1], ClusterOperation::BrokerUp { node_id: 1, leader_changes }
            if leader_changes.contains(&change(TOPIC, 0, 2, 1, 2))),
        "journaled operations: {ops:?}"
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn cluster_operations_refuse_what_cannot_be_done() -> Result<()> {
    let cluster = Cluster::builder().brokers(2).start().await?;
    cluster.create_topic("single", 1)?;
    let refused = |r: Result<(), Error>, what: &str| -> Result<()> {
        match r {
            Err(Error::Operation(reason)) => {
                ensure!(reason.contains(what), "reason {reason:?} lacks {what:?}");
                Ok(())
            }
            other => anyhow::bail!("expected a refusal naming {what:?}, got {other:?}"),
        }
    };
    refused(cluster.broker_down(7).await, "broker 7 does not exist")?;
    refused(cluster.broker_up(2).await, "broker 2 is not down")?;
    refused(cluster.move_leader("nope", 0, 1), "nope-0 does not exist")?;
    cluster.broker_down(2).await?;
    refused(cluster.broker_down(2).await, "broker 2 is already down")?;
    refused(cluster.move_leader("single", 0, 2), "broker 2 is down")?;
    cluster.broker_up(2).await?;
    ensure!(operations(&cluster).len() == 2, "refusals were journaled");
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_partition_whose_only_replica_is_down_is_offline_until_it_returns() -> Result<()> {
    let cluster = Cluster::builder()
        .brokers(2)
        .replication_factor(1)
        .topic(TOPIC, 2)
        .start()
        .await?;
    cluster.broker_down(2).await?;
    let on_1 = connect(&cluster, 1).await?;
    let metadata = on_1.metadata(Some(&[TOPIC])).await?;
    let p1 = &metadata.topics[0].partitions[1];
    code_is("orders-1 error", p1.error_code, Some(LeaderNotAvailable))?;
    same("orders-1 leader", p1.leader_id.0, -1)?;
    same("orders-1 leader epoch", p1.leader_epoch, 1)?;
    code_is(
        "produce to offline orders-1",
        produce_code(&on_1, 1).await?,
        Some(NotLeaderOrFollower),
    )?;
    cluster.broker_up(2).await?;
    same(
        "orders-1 leader after up",
        cluster.leader(TOPIC, 1),
        Some(2),
    )?;
    same(
        "orders-1 epoch after up",
        cluster.leader_epoch(TOPIC, 1),
        Some(2),
    )?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn acks_all_needs_min_insync_replicas_on_live_brokers() -> Result<()> {
    let cluster = cluster().await?;
    let on_1 = connect(&cluster, 1).await?;
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(common::name("strict"))
            .with_num_partitions(1)
            .with_replication_factor(3)
            .with_configs(vec![
                create_topics_request::CreatableTopicConfig::default()
                    .with_name(text("min.insync.replicas"))
                    .with_value(Some(text("3"))),
            ])]);
    let created = on_1.send(create, 7).await?;
    code_is("create strict", created.topics[0].error_code, None)?;
    let on_1 = &on_1;
    let produce = |acks| async move {
        let answer = on_1
            .produce("strict", 0, &[record(b"k", b"v")], acks)
            .await?;
        anyhow::Ok(answer.responses[0].partition_responses[0].error_code)
    };
    code_is("acks=all, 3 in sync", produce(-1).await?, None)?;
    cluster.broker_down(3).await?;
    code_is(
        "acks=all, 2 in sync",
        produce(-1).await?,
        Some(NotEnoughReplicas),
    )?;
    code_is("acks=1, 2 in sync", produce(1).await?, None)?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_moved_leader_bumps_the_epoch_and_the_old_one_refuses() -> Result<()> {
    let cluster = cluster().await?;
    same("orders-1 leader", cluster.leader(TOPIC, 1), Some(2))?;
    cluster.move_leader(TOPIC, 1, 3)?;
    same("orders-1 leader", cluster.leader(TOPIC, 1), Some(3))?;
    same("orders-1 epoch", cluster.leader_epoch(TOPIC, 1), Some(1))?;
    code_is(
        "produce on the old leader",
        produce_code(&connect(&cluster, 2).await?, 1).await?,
        Some(NotLeaderOrFollower),
    )?;
    code_is(
        "produce on the new leader",
        produce_code(&connect(&cluster, 3).await?, 1).await?,
        None,
    )?;
    // Moving it where it already is changes nothing, and says so in the journal.
    cluster.move_leader(TOPIC, 1, 3)?;
    same("orders-1 epoch", cluster.leader_epoch(TOPIC, 1), Some(1))?;
    let ops = operations(&cluster);
    same(
        "journaled operations",
        ops,
        vec![
            ClusterOperation::MoveLeader {
                topic: TOPIC.into(),
                partition: 1,
                node_id: 3,
                leader_changes: vec![change(TOPIC, 1, 2, 3, 1)],
            },
            ClusterOperation::MoveLeader {
                topic: TOPIC.into(),
                partition: 1,
                node_id: 3,
                leader_changes: vec![],
            },
        ],
    )?;
    cluster.shutdown().await;
    Ok(())
}

async fn find_coordinator(client: &Client, group: &str) -> Result<i32> {
    Ok(requests::find_coordinator(client, group).await?.0)
}

fn commit(group: &str, offset: i64) -> OffsetCommitRequest {
    requests::offset_commit(group, -1, "", TOPIC, &[(0, offset)])
}

/// The error code of committing `offset` for `TOPIC`-0 in `group` (no generation) through
/// `client`.
async fn commit_code(client: &Client, group: &str, offset: i64) -> Result<i16> {
    let answer = client.send(commit(group, offset), 8).await?;
    Ok(answer.topics[0].partitions[0].error_code)
}

#[tokio::test]
async fn a_moved_coordinator_answers_not_coordinator_and_releases_waiting_joins() -> Result<()> {
    let cluster = cluster().await?;
    let group = "billing";
    let old = cluster.coordinator(group);
    let new = old % 3 + 1;
    let at_old = connect(&cluster, old).await?;
    let at_new = connect(&cluster, new).await?;
    same(
        "FindCoordinator",
        find_coordinator(&at_old, group).await?,
        old,
    )?;
    code_is(
        "commit at the coordinator",
        commit_code(&at_old, group, 5).await?,
        None,
    )?;

    cluster.move_coordinator(group, new)?;

    same(
        "FindCoordinator after",
        find_coordinator(&at_old, group).await?,
        new,
    )?;
    code_is(
        "commit at the old coordinator",
        commit_code(&at_old, group, 6).await?,
        Some(NotCoordinator),
    )?;
    code_is(
        "commit at the new coordinator",
        commit_code(&at_new, group, 6).await?,
        None,
    )?;

    // A JoinGroup waiting at the coordinator when it moves is answered NOT_COORDINATOR: the
    // first member joined (and never rejoins), so a second member's join holds.
    let join = || requests::join_group(group, "", bytes::Bytes::from_static(b"m"));
    code_is("first join", at_new.send(join(), 3).await?.error_code, None)?;
    let second = connect(&cluster, new).await?;
    let waiting = tokio::spawn(async move { second.send(join(), 3).await });
    cluster
        .wait_for(|e| e.is("JoinGroup") && e.response.is_none(), PATIENCE)
        .await?;

    cluster.move_coordinator(group, old)?;

    let released = tokio::time::timeout(PATIENCE, waiting)
        .await
        .context("the waiting JoinGroup was not answered after the move")???;
    code_is(
        "the waiting join",
        released.error_code,
        Some(NotCoordinator),
    )?;
    let ops = operations(&cluster);
    ensure!(
        matches!(&ops[..], [ClusterOperation::MoveCoordinator { group_id, node_id, leader_changes }, _]
            if group_id == group && *node_id == new && leader_changes.len() == 1
                && leader_changes[0].topic == "__consumer_offsets"),
        "journaled operations: {ops:?}"
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn reset_empties_journal_logs_and_groups_and_keeps_the_ports() -> Result<()> {
    let cluster = cluster().await?;
    let on_1 = connect(&cluster, 1).await?;
    code_is("produce", produce_code(&on_1, 0).await?, None)?;
    let group = "billing";
    let at = connect(&cluster, cluster.coordinator(group)).await?;
    code_is("commit", commit_code(&at, group, 1).await?, None)?;
    let last_seq = cluster.journal().entries().last().map_or(0, |e| e.seq);
    let bootstrap = cluster.bootstrap();

    cluster.reset();

    same(
        "journal entries after reset",
        cluster.journal().entries().len(),
        0,
    )?;
    same("bootstrap", cluster.bootstrap(), bootstrap)?;
    // The same connection goes on; the log starts again at offset 0.
    let answer = on_1.produce(TOPIC, 0, &[record(b"k", b"v")], -1).await?;
    same(
        "base offset after reset",
        answer.responses[0].partition_responses[0].base_offset,
        0,
    )?;
    let fetch = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(None);
    let offsets = at.send(fetch, 5).await?;
    same("committed offsets after reset", offsets.topics.len(), 0)?;
    let first_after = cluster.journal().entries()[0].seq;
    ensure!(
        first_after > last_seq,
        "seq restarted: {first_after} after {last_seq}"
    );
    cluster.shutdown().await;
    Ok(())
}
