//! The transaction APIs on the wire, with Kafka's answers (from Kafka's
//! `TransactionCoordinator`, `KafkaApis` and `AddPartitionsToTxnManager`): verification of
//! transactional batches, markers, the last stable offset, the aborted transactions list,
//! fencing, and the transaction timeout.

mod common;

use std::time::Duration;

use anyhow::{ensure, Result};
use common::transactions::{
    add_offsets, add_partitions, add_partitions_ok, end_txn, fetch_committed, init_producer_id,
    latest_offset, transactional_batch, txn_offset_commit,
};
use common::{code_is, same};
use kafka_protocol::ResponseError::*;

const READ_UNCOMMITTED: i8 = 0;
const READ_COMMITTED: i8 = 1;

fn produce_error(answer: &kafka_protocol::messages::ProduceResponse) -> i16 {
    answer.responses[0].partition_responses[0].error_code
}

#[tokio::test]
async fn a_transaction_is_verified_marked_and_bounds_read_committed() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 2).await?;
    let init = client.send(init_producer_id("tx", 60_000), 4).await?;
    code_is("InitProducerId", init.error_code, None)?;
    let producer = (init.producer_id.0, init.producer_epoch);
    same("first epoch", producer.1, 0)?;
    let add = client
        .send(add_partitions("tx", producer.0, 0, "t", &[0]), 3)
        .await?;
    code_is(
        "AddPartitionsToTxn",
        add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        None,
    )?;

    // Partition 1 was not added: TRANSACTION_ABORTABLE from Produce v11, INVALID_TXN_STATE before.
    let not_added = transactional_batch("tx", "t", 1, producer, 0, 1);
    let answer = client.send(not_added.clone(), 11).await?;
    code_is(
        "Produce v11 to a partition not added",
        produce_error(&answer),
        Some(TransactionAbortable),
    )?;
    let answer = client.send(not_added, 9).await?;
    code_is(
        "Produce v9 to a partition not added",
        produce_error(&answer),
        Some(InvalidTxnState),
    )?;

    let answer = client
        .send(transactional_batch("tx", "t", 0, producer, 0, 2), 9)
        .await?;
    code_is(
        "Produce to the added partition",
        produce_error(&answer),
        None,
    )?;
    same(
        "high watermark",
        latest_offset(&client, "t", 0, READ_UNCOMMITTED).await?,
        2,
    )?;
    same(
        "last stable offset, open",
        latest_offset(&client, "t", 0, READ_COMMITTED).await?,
        0,
    )?;

    let end = client.send(end_txn("tx", producer.0, 0, false), 3).await?;
    code_is("EndTxn abort", end.error_code, None)?;
    // The abort marker took offset 2.
    same(
        "high watermark",
        latest_offset(&client, "t", 0, READ_UNCOMMITTED).await?,
        3,
    )?;
    same(
        "last stable offset, aborted",
        latest_offset(&client, "t", 0, READ_COMMITTED).await?,
        3,
    )?;
    let fetched = fetch_committed(&client, 0).await?;
    let p = &fetched.responses[0].partitions[0];
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    same("aborted transactions", aborted, vec![(producer.0, 0)])?;
    same("last stable offset in Fetch", p.last_stable_offset, 3)?;

    // A retried abort is answered again; a commit now finds no transaction to commit.
    let again = client.send(end_txn("tx", producer.0, 0, false), 3).await?;
    code_is("EndTxn abort, retried", again.error_code, None)?;
    let commit = client.send(end_txn("tx", producer.0, 0, true), 3).await?;
    code_is(
        "EndTxn commit after the abort",
        commit.error_code,
        Some(InvalidTxnState),
    )?;
    // Another epoch is fenced: INVALID_PRODUCER_EPOCH before v2, PRODUCER_FENCED from v2.
    let v1 = client.send(end_txn("tx", producer.0, 1, true), 1).await?;
    code_is(
        "EndTxn v1, other epoch",
        v1.error_code,
        Some(InvalidProducerEpoch),
    )?;
    let v3 = client.send(end_txn("tx", producer.0, 1, true), 3).await?;
    code_is(
        "EndTxn v3, other epoch",
        v3.error_code,
        Some(ProducerFenced),
    )?;
    let other = client
        .send(end_txn("tx", producer.0 + 1, 0, true), 3)
        .await?;
    code_is(
        "EndTxn, other producer id",
        other.error_code,
        Some(InvalidProducerIdMapping),
    )?;
    Ok(())
}

#[tokio::test]
async fn adding_an_unknown_partition_fails_the_whole_request() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 1).await?;
    let unknown = client
        .send(add_partitions("nobody", 7, 0, "t", &[0]), 3)
        .await?;
    code_is(
        "AddPartitionsToTxn, unknown transactional id",
        unknown.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        Some(InvalidProducerIdMapping),
    )?;
    let init = client.send(init_producer_id("tx", 60_000), 4).await?;
    let answer = client
        .send(add_partitions("tx", init.producer_id.0, 0, "t", &[0, 5]), 3)
        .await?;
    let codes: Vec<i16> = answer.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect();
    same(
        "t-0 and t-5",
        codes,
        vec![OperationNotAttempted.code(), UnknownTopicOrPartition.code()],
    )?;
    Ok(())
}

#[tokio::test]
async fn a_new_instance_aborts_the_open_transaction_and_fences_the_old_one() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 1).await?;
    let init = client.send(init_producer_id("tx", 60_000), 4).await?;
    let old = (init.producer_id.0, init.producer_epoch);
    add_partitions_ok(&client, "tx", old, "t", &[0]).await?;
    let answer = client
        .send(transactional_batch("tx", "t", 0, old, 0, 1), 9)
        .await?;
    code_is("Produce", produce_error(&answer), None)?;

    // The open transaction is aborted with the epoch bumped once; the retry bumps again.
    let first = client.send(init_producer_id("tx", 60_000), 4).await?;
    code_is(
        "InitProducerId with a transaction open",
        first.error_code,
        Some(ConcurrentTransactions),
    )?;
    same(
        "high watermark after the abort marker",
        latest_offset(&client, "t", 0, READ_UNCOMMITTED).await?,
        2,
    )?;
    same(
        "last stable offset",
        latest_offset(&client, "t", 0, READ_COMMITTED).await?,
        2,
    )?;
    let retry = client.send(init_producer_id("tx", 60_000), 4).await?;
    code_is("InitProducerId retried", retry.error_code, None)?;
    same(
        "new instance",
        (retry.producer_id.0, retry.producer_epoch),
        (old.0, 2),
    )?;

    // The zombie's next write and its EndTxn are refused.
    let zombie = client
        .send(transactional_batch("tx", "t", 0, old, 1, 1), 9)
        .await?;
    code_is(
        "zombie Produce",
        produce_error(&zombie),
        Some(InvalidProducerEpoch),
    )?;
    let end = client.send(end_txn("tx", old.0, old.1, true), 3).await?;
    code_is("zombie EndTxn", end.error_code, Some(ProducerFenced))?;
    Ok(())
}

#[tokio::test]
async fn a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 1).await?;
    let init = client.send(init_producer_id("tx", 1), 4).await?;
    let producer = (init.producer_id.0, init.producer_epoch);
    client
        .send(add_partitions("tx", producer.0, 0, "t", &[0]), 3)
        .await?;
    let answer = client
        .send(transactional_batch("tx", "t", 0, producer, 0, 1), 9)
        .await?;
    code_is("Produce", produce_error(&answer), None)?;
    // A read_committed long poll returns once the coordinator's timer has aborted the
    // transaction (a 1 ms timeout); the bound only turns a hang into a failure.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let fetched = fetch_committed(&client, 1_000).await?;
        let p = &fetched.responses[0].partitions[0];
        if p.records.as_ref().is_some_and(|r| !r.is_empty()) {
            same(
                "last stable offset after the timeout",
                p.last_stable_offset,
                2,
            )?;
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the transaction was never aborted"
        );
    }
    same(
        "high watermark after the abort marker",
        latest_offset(&client, "t", 0, READ_UNCOMMITTED).await?,
        2,
    )?;
    let end = client
        .send(end_txn("tx", producer.0, producer.1, true), 3)
        .await?;
    code_is(
        "EndTxn after the timeout",
        end.error_code,
        Some(ProducerFenced),
    )?;
    Ok(())
}

/// OffsetFetch v7 of `g`'s offset of `t`-0, with `require_stable`: (error code, offset).
async fn fetch_offset(client: &kmock_client::Client, require_stable: bool) -> Result<(i16, i64)> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest};
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(common::text("g")))
        .with_require_stable(require_stable)
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(common::name("t"))
            .with_partition_indexes(vec![0])]));
    let answer = client.send(request, 7).await?;
    code_is("OffsetFetch", answer.error_code, None)?;
    let p = &answer.topics[0].partitions[0];
    Ok((p.error_code, p.committed_offset))
}

#[tokio::test]
async fn offsets_committed_in_a_transaction_are_pending_until_it_commits() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 1).await?;
    let init = client.send(init_producer_id("tx", 60_000), 4).await?;
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    // A group not added to the transaction: TRANSACTION_ABORTABLE from v4, INVALID_TXN_STATE before.
    let early = txn_offset_commit("tx", pid, epoch, "g", "t", 3);
    let v4 = client.send(early.clone(), 4).await?;
    code_is(
        "TxnOffsetCommit v4 before AddOffsetsToTxn",
        v4.topics[0].partitions[0].error_code,
        Some(TransactionAbortable),
    )?;
    let v3 = client.send(early, 3).await?;
    code_is(
        "TxnOffsetCommit v3 before AddOffsetsToTxn",
        v3.topics[0].partitions[0].error_code,
        Some(InvalidTxnState),
    )?;

    let added = client.send(add_offsets("tx", pid, epoch, "g"), 3).await?;
    code_is("AddOffsetsToTxn", added.error_code, None)?;
    let commit = client
        .send(txn_offset_commit("tx", pid, epoch, "g", "t", 3), 3)
        .await?;
    code_is(
        "TxnOffsetCommit",
        commit.topics[0].partitions[0].error_code,
        None,
    )?;
    same(
        "pending, require_stable",
        fetch_offset(&client, true).await?,
        (UnstableOffsetCommit.code(), -1),
    )?;
    same(
        "pending, not require_stable",
        fetch_offset(&client, false).await?,
        (0, -1),
    )?;
    let end = client.send(end_txn("tx", pid, epoch, true), 3).await?;
    code_is("EndTxn commit", end.error_code, None)?;
    same("committed", fetch_offset(&client, true).await?, (0, 3))?;
    Ok(())
}
