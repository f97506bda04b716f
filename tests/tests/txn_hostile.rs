//! Hostile and out-of-order use of the transaction APIs on the wire: unknown transactional ids,
//! EndTxn without InitProducerId or twice, producer ids and epochs no coordinator gave
//! (-1, i16::MAX), transaction timeouts outside 1..=900000 ms, TxnOffsetCommit for a group never
//! added, and huge partition lists. Each gets Kafka's answer (`TransactionCoordinator`,
//! `KafkaApis`), and the broker keeps serving the connection and others.

mod common;

use anyhow::Result;
use common::transactions::{
    add_offsets, add_partitions, end_txn, init_producer_id, latest_offset, txn_offset_commit,
};
use common::{code_is, same};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::ProducerId;
use kafka_protocol::ResponseError::*;

fn add_error(answer: &kafka_protocol::messages::AddPartitionsToTxnResponse) -> i16 {
    answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

#[tokio::test]
async fn transaction_apis_for_an_unknown_transactional_id() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 1).await?;
    for (producer_id, epoch) in [(0, 0), (-1, -1), (i64::MAX, i16::MAX)] {
        let what = format!("producer {producer_id} epoch {epoch}");
        let add = client
            .send(add_partitions("nobody", producer_id, epoch, "t", &[0]), 3)
            .await?;
        code_is(
            &format!("AddPartitionsToTxn, {what}"),
            add_error(&add),
            Some(InvalidProducerIdMapping),
        )?;
        let offsets = client
            .send(add_offsets("nobody", producer_id, epoch, "g"), 3)
            .await?;
        code_is(
            &format!("AddOffsetsToTxn, {what}"),
            offsets.error_code,
            Some(InvalidProducerIdMapping),
        )?;
        let commit = client
            .send(
                txn_offset_commit("nobody", producer_id, epoch, "g", "t", 1),
                4,
            )
            .await?;
        code_is(
            &format!("TxnOffsetCommit, {what}"),
            commit.topics[0].partitions[0].error_code,
            Some(InvalidProducerIdMapping),
        )?;
        // EndTxn without InitProducerId.
        for commit in [true, false] {
            let end = client
                .send(end_txn("nobody", producer_id, epoch, commit), 3)
                .await?;
            code_is(
                &format!("EndTxn (commit {commit}), {what}"),
                end.error_code,
                Some(InvalidProducerIdMapping),
            )?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn transaction_timeouts_outside_kafkas_range_are_refused() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 1).await?;
    for timeout_ms in [0, -1, i32::MIN, 900_001, i32::MAX] {
        let init = client.send(init_producer_id("tx", timeout_ms), 4).await?;
        code_is(
            &format!("InitProducerId, timeout {timeout_ms} ms"),
            init.error_code,
            Some(InvalidTransactionTimeout),
        )?;
        same("producer id refused", init.producer_id.0, -1)?;
    }
    // Refused timeouts left no trace: the id is still unknown.
    let end = client.send(end_txn("tx", 0, 0, true), 3).await?;
    code_is(
        "EndTxn after refusals",
        end.error_code,
        Some(InvalidProducerIdMapping),
    )?;
    let init = client.send(init_producer_id("tx", 900_000), 4).await?;
    code_is("InitProducerId, 900000 ms", init.error_code, None)?;
    Ok(())
}

#[tokio::test]
async fn end_txn_without_a_transaction_and_repeated() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 1).await?;
    let init = client.send(init_producer_id("tx", 60_000), 4).await?;
    code_is("InitProducerId", init.error_code, None)?;
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    // Nothing begun: both ends are INVALID_TXN_STATE (Kafka's Empty state).
    for commit in [true, false] {
        let end = client.send(end_txn("tx", pid, epoch, commit), 3).await?;
        code_is(
            &format!("EndTxn (commit {commit}) with no transaction"),
            end.error_code,
            Some(InvalidTxnState),
        )?;
    }
    let add = client
        .send(add_partitions("tx", pid, epoch, "t", &[0]), 3)
        .await?;
    code_is("AddPartitionsToTxn", add_error(&add), None)?;
    let end = client.send(end_txn("tx", pid, epoch, true), 3).await?;
    code_is("EndTxn commit", end.error_code, None)?;
    // A retried commit is answered again; an abort of the committed transaction is not.
    for _ in 0..3 {
        let end = client.send(end_txn("tx", pid, epoch, true), 3).await?;
        code_is("EndTxn commit again", end.error_code, None)?;
    }
    let end = client.send(end_txn("tx", pid, epoch, false), 3).await?;
    code_is(
        "EndTxn abort after commit",
        end.error_code,
        Some(InvalidTxnState),
    )?;
    // Epochs no coordinator gave: the next one, i16::MAX, -1.
    for bad in [epoch + 1, i16::MAX, -1, i16::MIN] {
        let end = client.send(end_txn("tx", pid, bad, true), 3).await?;
        code_is(
            &format!("EndTxn at epoch {bad}"),
            end.error_code,
            Some(ProducerFenced),
        )?;
        let end = client.send(end_txn("tx", pid, bad, true), 1).await?;
        code_is(
            &format!("EndTxn v1 at epoch {bad}"),
            end.error_code,
            Some(InvalidProducerEpoch),
        )?;
        let add = client
            .send(add_partitions("tx", pid, bad, "t", &[0]), 3)
            .await?;
        code_is(
            &format!("AddPartitionsToTxn at epoch {bad}"),
            add_error(&add),
            Some(ProducerFenced),
        )?;
    }
    for bad_pid in [-1, pid + 1, i64::MAX] {
        let end = client.send(end_txn("tx", bad_pid, epoch, true), 3).await?;
        code_is(
            &format!("EndTxn of producer {bad_pid}"),
            end.error_code,
            Some(InvalidProducerIdMapping),
        )?;
    }
    // KIP-360 InitProducerId naming an epoch never given.
    let reinit = init_producer_id("tx", 60_000)
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(i16::MAX);
    let reinit = client.send(reinit, 4).await?;
    code_is(
        "InitProducerId naming epoch i16::MAX",
        reinit.error_code,
        Some(ProducerFenced),
    )?;
    Ok(())
}

#[tokio::test]
async fn txn_offset_commit_for_a_group_not_added() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 1).await?;
    let init = client.send(init_producer_id("tx", 60_000), 4).await?;
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let commit = client
        .send(txn_offset_commit("tx", pid, epoch, "unknown", "t", 5), 4)
        .await?;
    code_is(
        "TxnOffsetCommit v4, group not added",
        commit.topics[0].partitions[0].error_code,
        Some(TransactionAbortable),
    )?;
    let commit = client
        .send(txn_offset_commit("tx", pid, epoch, "unknown", "t", 5), 3)
        .await?;
    code_is(
        "TxnOffsetCommit v3, group not added",
        commit.topics[0].partitions[0].error_code,
        Some(InvalidTxnState),
    )?;
    let commit = client
        .send(txn_offset_commit("tx", pid, epoch, "unknown", "nope", 5), 4)
        .await?;
    code_is(
        "TxnOffsetCommit of an unknown topic",
        commit.topics[0].partitions[0].error_code,
        Some(UnknownTopicOrPartition),
    )?;
    Ok(())
}

/// 1,000,000 partition entries (4 MB on the wire) naming one partition again and again, or
/// an unknown one among them: answered entry by entry, and the broker still serves others.
#[tokio::test]
async fn huge_partition_lists() -> Result<()> {
    const ENTRIES: usize = 1_000_000;
    let (cluster, client) = common::start(1, &["t"], 2).await?;
    let init = client.send(init_producer_id("tx", 60_000), 4).await?;
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let mut partitions = vec![0; ENTRIES];
    partitions[ENTRIES / 2] = 7; // no such partition: the whole request fails
    let add = client
        .send(add_partitions("tx", pid, epoch, "t", &partitions), 3)
        .await?;
    let results = &add.results_by_topic_v3_and_below[0].results_by_partition;
    same("answers", results.len(), ENTRIES)?;
    code_is(
        "the unknown partition",
        results[ENTRIES / 2].partition_error_code,
        Some(UnknownTopicOrPartition),
    )?;
    code_is(
        "the others",
        results[0].partition_error_code,
        Some(OperationNotAttempted),
    )?;

    let topics: Vec<_> = (0..ENTRIES)
        .map(|i| {
            AddPartitionsToTxnTopic::default()
                .with_name(common::name("t"))
                .with_partitions(vec![(i % 2) as i32])
        })
        .collect();
    let many = add_partitions("tx", pid, epoch, "t", &[]).with_v3_and_below_topics(topics);
    let other = common::connect_to(&cluster, 1).await?;
    let add = client.send(many, 3).await?;
    same(
        "topic answers",
        add.results_by_topic_v3_and_below.len(),
        ENTRIES,
    )?;
    let errors = add
        .results_by_topic_v3_and_below
        .iter()
        .filter(|t| t.results_by_partition[0].partition_error_code != 0)
        .count();
    same("entries refused", errors, 0)?;
    // Another connection is served, and the transaction holds the two partitions once each.
    let end = other.send(end_txn("tx", pid, epoch, false), 3).await?;
    code_is("EndTxn abort", end.error_code, None)?;
    for partition in [0, 1] {
        let end_offset = latest_offset(&client, "t", partition, 0).await?;
        same(&format!("t-{partition}: one abort marker"), end_offset, 1)?;
    }
    let offsets = client.send(add_offsets("tx", pid, epoch, "g"), 3).await?;
    code_is("AddOffsetsToTxn after", offsets.error_code, None)?;
    Ok(())
}

/// A TxnOffsetCommit naming `t`-0 1,000,000 times, offsets 0 to 999,999: every entry answered
/// NONE, and the commit makes the last entry's offset the group's.
#[tokio::test]
async fn a_huge_txn_offset_commit_keeps_the_last_offset_of_a_partition() -> Result<()> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest};
    const ENTRIES: i64 = 1_000_000;
    let (_cluster, client) = common::start(1, &["t"], 1).await?;
    let init = client.send(init_producer_id("tx", 60_000), 4).await?;
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let offsets = client.send(add_offsets("tx", pid, epoch, "g"), 3).await?;
    code_is("AddOffsetsToTxn", offsets.error_code, None)?;
    let mut commit = txn_offset_commit("tx", pid, epoch, "g", "t", 0);
    let entry = commit.topics[0].partitions[0].clone();
    commit.topics[0].partitions = (0..ENTRIES)
        .map(|offset| entry.clone().with_committed_offset(offset))
        .collect();
    let answer = client.send(commit, 4).await?;
    let partitions = &answer.topics[0].partitions;
    same("answers", partitions.len(), ENTRIES as usize)?;
    same(
        "entries refused",
        partitions.iter().filter(|p| p.error_code != 0).count(),
        0,
    )?;
    let end = client.send(end_txn("tx", pid, epoch, true), 3).await?;
    code_is("EndTxn commit", end.error_code, None)?;
    let fetch = OffsetFetchRequest::default()
        .with_group_id(GroupId(common::text("g")))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(common::name("t"))
            .with_partition_indexes(vec![0])]));
    let fetched = client.send(fetch, 7).await?;
    let p = &fetched.topics[0].partitions[0];
    code_is("OffsetFetch", p.error_code, None)?;
    same("committed offset", p.committed_offset, ENTRIES - 1)?;
    Ok(())
}
