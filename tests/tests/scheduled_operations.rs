//! A scenario's `operations:` really run, at their time, on Tokio's clock (paused here, so
//! "at 100ms" is exact): `move_leader` moves the partition (the journal holds the operation,
//! the epoch goes up, the old leader refuses a Produce) and `move_coordinator` moves the group
//! (the old coordinator refuses its commit NOT_COORDINATOR), and `move_transaction_coordinator`
//! moves a transactional id (the old coordinator refuses its InitProducerId NOT_COORDINATOR).

mod common;

use std::time::Duration;

use anyhow::Result;
use common::requests::offset_commit;
use common::{broker_addr, code_is, same};
use kafka_protocol::ResponseError::{NotCoordinator, NotLeaderOrFollower};
use kmock::journal::ClusterOperation;
use kmock::Scenario;
use kmock_client::{record, Client};
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn move_leader_and_move_coordinator_run_at_their_time() -> Result<()> {
    let shape = Scenario::parse("brokers: 3\ntopics: [{name: t, partitions: 1}]\n")
        .map_err(anyhow::Error::msg)?;
    let cluster = shape.builder()?.port(0).start().await?;
    let (leader, coordinator) = (cluster.leader("t", 0).unwrap(), cluster.coordinator("g"));
    let epoch = cluster.leader_epoch("t", 0).unwrap();
    let (new_leader, new_coordinator) = (leader % 3 + 1, coordinator % 3 + 1);
    let operations = Scenario::parse(&format!(
        "operations:\n\
         - {{at: 100ms, move_leader: {{topic: t, partition: 0, broker: {new_leader}}}}}\n\
         - {{at: 200ms, move_coordinator: {{group: g, broker: {new_coordinator}}}}}\n"
    ))
    .map_err(anyhow::Error::msg)?
    .operations;
    let started = Instant::now();
    tokio::spawn(kmock::schedule::run(cluster.clone(), operations));

    let moved = cluster
        .wait_for(|e| e.operation.is_some(), Duration::from_secs(5))
        .await?;
    same(
        "when the first operation ran",
        started.elapsed(),
        Duration::from_millis(100),
    )?;
    same(
        "the first operation",
        moved.operation,
        Some(ClusterOperation::MoveLeader {
            topic: "t".into(),
            partition: 0,
            node_id: new_leader,
            leader_changes: vec![kmock::journal::LeaderChange {
                topic: "t".into(),
                partition: 0,
                from: leader,
                to: new_leader,
                leader_epoch: epoch + 1,
            }],
        }),
    )?;
    let old = Client::connect(broker_addr(&cluster, leader)).await?;
    let answer = old.produce("t", 0, &[record(b"k", b"v")], -1).await?;
    code_is(
        "Produce at the old leader",
        answer.responses[0].partition_responses[0].error_code,
        Some(NotLeaderOrFollower),
    )?;

    let moved = cluster
        .wait_for(
            |e| matches!(e.operation, Some(ClusterOperation::MoveCoordinator { .. })),
            Duration::from_secs(5),
        )
        .await?;
    same(
        "when the second operation ran",
        started.elapsed(),
        Duration::from_millis(200),
    )?;
    same("g's coordinator", cluster.coordinator("g"), new_coordinator)?;
    let Some(ClusterOperation::MoveCoordinator {
        group_id, node_id, ..
    }) = moved.operation
    else {
        unreachable!("matched above")
    };
    same(
        "the move",
        (group_id.as_str(), node_id),
        ("g", new_coordinator),
    )?;
    let old = Client::connect(broker_addr(&cluster, coordinator)).await?;
    let answer = old
        .send(offset_commit("g", -1, "", "t", &[(0, 1)]), 8)
        .await?;
    code_is(
        "OffsetCommit at the old coordinator",
        answer.topics[0].partitions[0].error_code,
        Some(NotCoordinator),
    )?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn move_transaction_coordinator_runs_at_its_time() -> Result<()> {
    use common::transactions::init_producer_id;
    let shape = Scenario::parse("brokers: 3\ntopics: [{name: t, partitions: 1}]\n")
        .map_err(anyhow::Error::msg)?;
    let cluster = shape.builder()?.port(0).start().await?;
    let coordinator = cluster.transaction_coordinator("tx");
    let new_coordinator = coordinator % 3 + 1;
    let operations = Scenario::parse(&format!(
        "operations:\n\
         - {{at: 100ms, move_transaction_coordinator: {{transactional_id: tx, broker: {new_coordinator}}}}}\n"
    ))
    .map_err(anyhow::Error::msg)?
    .operations;
    let started = Instant::now();
    tokio::spawn(kmock::schedule::run(cluster.clone(), operations));

    let moved = cluster
        .wait_for(|e| e.operation.is_some(), Duration::from_secs(5))
        .await?;
    same("when it ran", started.elapsed(), Duration::from_millis(100))?;
    let Some(ClusterOperation::MoveTransactionCoordinator {
        transactional_id,
        node_id,
        leader_changes,
    }) = moved.operation
    else {
        anyhow::bail!("not a transaction coordinator move: {moved:?}");
    };
    same(
        "the move",
        (transactional_id.as_str(), node_id),
        ("tx", new_coordinator),
    )?;
    same(
        "the change",
        leader_changes
            .iter()
            .map(|c| (c.topic.as_str(), c.from, c.to))
            .collect::<Vec<_>>(),
        vec![("__transaction_state", coordinator, new_coordinator)],
    )?;
    same(
        "tx's coordinator",
        cluster.transaction_coordinator("tx"),
        new_coordinator,
    )?;
    let old = Client::connect(broker_addr(&cluster, coordinator)).await?;
    let answer = old.send(init_producer_id("tx", 60_000), 4).await?;
    code_is(
        "InitProducerId at the old coordinator",
        answer.error_code,
        Some(NotCoordinator),
    )?;
    let new = Client::connect(broker_addr(&cluster, new_coordinator)).await?;
    let answer = new.send(init_producer_id("tx", 60_000), 4).await?;
    code_is(
        "InitProducerId at the new coordinator",
        answer.error_code,
        None,
    )
}
