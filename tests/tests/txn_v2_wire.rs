//! Transaction version 2 (KIP-890 part 2) on the wire: the `transaction.version` feature in
//! ApiVersions, partitions added by Produce v12+ and groups by TxnOffsetCommit v5, the epoch
//! bump of every EndTxn v5 with its retry and fencing rules (Kafka's
//! `TransactionCoordinator.endTransaction`), and AddPartitionsToTxn v4–5 (the batched versions,
//! with the verify-only path).

mod common;

use anyhow::{ensure, Result};
use common::transactions::{
    add_offsets, end_txn_v5, init_ok, latest_offset, produce_v12, start_v1, start_v2,
    transactional_batch, txn_id, txn_offset_commit,
};
use common::{code_is, name, same};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ApiVersionsRequest,
    ApiVersionsResponse, ProducerId,
};
use kafka_protocol::ResponseError::*;
use kmock::journal::RequestSummary;

const READ_UNCOMMITTED: i8 = 0;
const READ_COMMITTED: i8 = 1;

/// A (min, max) range of feature levels.
type Levels = Option<(i16, i16)>;

/// The (min, max) finalized level of `transaction.version`, and whether it is listed among the
/// supported features (and with which range).
fn transaction_version(answer: &ApiVersionsResponse) -> (Levels, Levels) {
    let finalized = answer
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| (f.min_version_level, f.max_version_level));
    let supported = answer
        .supported_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| (f.min_version, f.max_version));
    (finalized, supported)
}

fn max_version(answer: &ApiVersionsResponse, api: ApiKey) -> Option<i16> {
    answer
        .api_keys
        .iter()
        .find(|k| k.api_key == api as i16)
        .map(|k| k.max_version)
}

#[tokio::test]
async fn api_versions_finalizes_the_cluster_transaction_version() -> Result<()> {
    let (_v1, client) = start_v1(&[], 1).await?;
    let request = || {
        ApiVersionsRequest::default()
            .with_client_software_name(common::text("kmock-tests"))
            .with_client_software_version(common::text("1"))
    };
    let v3 = client.send(request(), 3).await?;
    same(
        "transaction.version 1, v3 (finalized, supported)",
        transaction_version(&v3),
        (Some((1, 1)), None),
    )?;
    ensure!(
        v3.finalized_features_epoch >= 0,
        "a finalized features epoch"
    );
    let v4 = client.send(request(), 4).await?;
    same(
        "transaction.version 1, v4",
        transaction_version(&v4),
        (Some((1, 1)), Some((0, 2))),
    )?;
    for (api, max) in [
        (ApiKey::EndTxn, 5),
        (ApiKey::AddPartitionsToTxn, 5),
        (ApiKey::TxnOffsetCommit, 5),
        (ApiKey::Produce, 13),
    ] {
        same(
            &format!("{api:?} max version"),
            max_version(&v4, api),
            Some(max),
        )?;
    }
    let v2 = client.send(request(), 2).await?;
    same(
        "no features before v3",
        transaction_version(&v2),
        (None, None),
    )?;

    let (_default, client) = common::start(1, &[], 1).await?;
    let v4 = client.send(request(), 4).await?;
    same(
        "transaction.version by default (2, as Kafka 4.x), v4",
        transaction_version(&v4),
        (Some((2, 2)), Some((0, 2))),
    )
}

#[tokio::test]
async fn a_scenario_sets_the_transaction_version_1_or_2_and_nothing_else() -> Result<()> {
    let scenario =
        kmock::scenario::Scenario::parse("transaction_version: 2\n").map_err(anyhow::Error::msg)?;
    let cluster = scenario.builder()?.port(0).start().await?;
    let client = kmock_client::Client::connect(cluster.brokers()[0].addr).await?;
    let request = ApiVersionsRequest::default()
        .with_client_software_name(common::text("kmock-tests"))
        .with_client_software_version(common::text("1"));
    let answer = client.send(request, 3).await?;
    same(
        "transaction.version of the scenario's cluster",
        transaction_version(&answer).0,
        Some((2, 2)),
    )?;
    let refused = kmock::scenario::Scenario::parse("transaction_version: 3\n")
        .expect_err("transaction_version 3");
    ensure!(
        refused.contains("transaction_version 3 is not 1 or 2"),
        "{refused}"
    );
    Ok(())
}

#[tokio::test]
async fn a_produce_adds_its_partition_and_every_end_txn_bumps_the_epoch() -> Result<()> {
    let (cluster, client) = start_v2(&["t"], 2).await?;
    let (pid, epoch) = init_ok(&client, "tx").await?;
    same("first epoch", epoch, 0)?;

    // Produce v12 adds t-0 itself; below v12 a partition not added is refused as with v1.
    let code = produce_v12(&client, "tx", ("t", 0), (pid, 0), 0, 2).await?;
    code_is("Produce v12 to a partition not added", code, None)?;
    let v11 = client
        .send(transactional_batch("tx", "t", 1, (pid, 0), 0, 1), 11)
        .await?;
    code_is(
        "Produce v11 to a partition not added",
        v11.responses[0].partition_responses[0].error_code,
        Some(TransactionAbortable),
    )?;
    same(
        "read_committed end while the transaction is open",
        latest_offset(&client, "t", 0, READ_COMMITTED).await?,
        0,
    )?;

    let (code, next) = end_txn_v5(&client, "tx", (pid, 0), true).await?;
    code_is("EndTxn v5 commit", code, None)?;
    same("EndTxn v5 names the bumped epoch", next, (pid, 1))?;
    same(
        "read_committed end after the commit (2 records and the marker)",
        latest_offset(&client, "t", 0, READ_COMMITTED).await?,
        3,
    )?;

    // The retry of that EndTxn (its answer lost) names the epoch before the bump.
    let (code, again) = end_txn_v5(&client, "tx", (pid, 0), true).await?;
    code_is("EndTxn v5 retried", code, None)?;
    same("the retry names the current epoch", again, (pid, 1))?;
    let (code, _) = end_txn_v5(&client, "tx", (pid, 0), false).await?;
    code_is(
        "the retry turned into an abort",
        code,
        Some(InvalidTxnState),
    )?;
    // With no transaction open, an EndTxn at the current epoch is no retry (Kafka 4.4.0's
    // answer); an epoch neither current nor the last is fenced.
    let (code, _) = end_txn_v5(&client, "tx", (pid, 1), true).await?;
    code_is(
        "EndTxn v5 at the current epoch, nothing open",
        code,
        Some(InvalidTxnState),
    )?;
    let (code, _) = end_txn_v5(&client, "tx", (pid, 7), true).await?;
    code_is("EndTxn v5 at another epoch", code, Some(ProducerFenced))?;

    // The old epoch's Produce is a zombie's; the new epoch begins the next transaction.
    let code = produce_v12(&client, "tx", ("t", 0), (pid, 0), 2, 1).await?;
    code_is(
        "Produce v12 at the old epoch",
        code,
        Some(InvalidProducerEpoch),
    )?;
    let code = produce_v12(&client, "tx", ("t", 1), (pid, 1), 0, 1).await?;
    code_is("Produce v12 at the bumped epoch", code, None)?;
    let (code, next) = end_txn_v5(&client, "tx", (pid, 1), false).await?;
    code_is("EndTxn v5 abort", code, None)?;
    same("the abort bumps too", next, (pid, 2))?;
    same(
        "read_uncommitted end of t-1 (the aborted record and the marker)",
        latest_offset(&client, "t", 1, READ_UNCOMMITTED).await?,
        2,
    )?;

    // The journal keeps what each EndTxn answered (the last completes as its answer is sent).
    let fifth_end_answered = |e: &kmock::Entry| matches!(&e.request, Some(RequestSummary::EndTxn(s)) if s.new_producer_epoch == Some(2));
    // A generous guard that only catches a hang.
    cluster
        .wait_for(fifth_end_answered, std::time::Duration::from_secs(30))
        .await?;
    let journal = cluster.journal();
    let answered: Vec<(i16, Option<i16>)> = journal
        .entries()
        .iter()
        .filter_map(|e| match &e.request {
            Some(RequestSummary::EndTxn(s)) => Some((s.producer_epoch, s.new_producer_epoch)),
            _ => None,
        })
        .collect();
    same(
        "EndTxn epochs sent and answered, in the journal",
        answered,
        vec![
            (0, Some(1)),
            (0, Some(1)),
            (0, None),
            (1, None),
            (7, None),
            (1, Some(2)),
        ],
    )
}

#[tokio::test]
async fn end_txn_v4_keeps_the_epoch_and_version_1_adds_no_partition() -> Result<()> {
    let (_cluster, client) = start_v2(&["t"], 1).await?;
    let (pid, _) = init_ok(&client, "tx").await?;
    code_is(
        "Produce v12",
        produce_v12(&client, "tx", ("t", 0), (pid, 0), 0, 1).await?,
        None,
    )?;
    let end = client
        .send(common::transactions::end_txn("tx", pid, 0, true), 4)
        .await?;
    code_is("EndTxn v4", end.error_code, None)?;
    code_is(
        "Produce v12 at the same epoch, after EndTxn v4",
        produce_v12(&client, "tx", ("t", 0), (pid, 0), 1, 1).await?,
        None,
    )?;

    let (_v1, client) = start_v1(&["t"], 1).await?;
    let (pid, _) = init_ok(&client, "tx").await?;
    code_is(
        "Produce v12 to a partition not added, transaction version 1",
        produce_v12(&client, "tx", ("t", 0), (pid, 0), 0, 1).await?,
        Some(TransactionAbortable),
    )
}

#[tokio::test]
async fn txn_offset_commit_v5_adds_its_group_with_version_2_only() -> Result<()> {
    let (_cluster, client) = start_v2(&["t"], 1).await?;
    let (pid, _) = init_ok(&client, "tx").await?;
    let commit = |group: &str| txn_offset_commit("tx", pid, 0, group, "t", 7);
    let v5 = client.send(commit("g"), 5).await?;
    code_is(
        "TxnOffsetCommit v5, group not added",
        v5.topics[0].partitions[0].error_code,
        None,
    )?;
    let v4 = client.send(commit("h"), 4).await?;
    code_is(
        "TxnOffsetCommit v4, group not added",
        v4.topics[0].partitions[0].error_code,
        Some(TransactionAbortable),
    )?;
    let (code, next) = end_txn_v5(&client, "tx", (pid, 0), true).await?;
    code_is("EndTxn v5 commit", code, None)?;
    same("bumped", next, (pid, 1))?;
    // AddOffsetsToTxn still works for a version-2 transaction (Kafka keeps it).
    let added = client.send(add_offsets("tx", pid, 1, "h"), 4).await?;
    code_is("AddOffsetsToTxn", added.error_code, None)?;

    let (_v1, client) = start_v1(&["t"], 1).await?;
    let (pid, _) = init_ok(&client, "tx").await?;
    let v5 = client
        .send(txn_offset_commit("tx", pid, 0, "g", "t", 7), 5)
        .await?;
    code_is(
        "TxnOffsetCommit v5, transaction version 1",
        v5.topics[0].partitions[0].error_code,
        Some(TransactionAbortable),
    )
}

/// One transaction of a v4+ batch: transactional id, (producer id, epoch), verify only, the
/// partitions of `t`.
type BatchedTransaction<'a> = (&'a str, (i64, i16), bool, &'a [i32]);

/// AddPartitionsToTxn v4+ with one transaction per `(id, producer, verify_only, partitions)`.
fn batch(transactions: &[BatchedTransaction<'_>]) -> AddPartitionsToTxnRequest {
    AddPartitionsToTxnRequest::default().with_transactions(
        transactions
            .iter()
            .map(|(id, (pid, epoch), verify_only, partitions)| {
                AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(txn_id(id))
                    .with_producer_id(ProducerId(*pid))
                    .with_producer_epoch(*epoch)
                    .with_verify_only(*verify_only)
                    .with_topics(vec![AddPartitionsToTxnTopic::default()
                        .with_name(name("t"))
                        .with_partitions(partitions.to_vec())])
            })
            .collect(),
    )
}

/// Each transaction's answer: its id and its partitions' errors, in order.
fn answers(r: &AddPartitionsToTxnResponse) -> Vec<(String, Vec<(i32, String)>)> {
    r.results_by_transaction
        .iter()
        .map(|t| {
            let partitions = t
                .topic_results
                .iter()
                .flat_map(|topic| &topic.results_by_partition)
                .map(|p| (p.partition_index, common::err(p.partition_error_code)))
                .collect();
            (t.transactional_id.0.to_string(), partitions)
        })
        .collect()
}

#[tokio::test]
async fn add_partitions_to_txn_v4_verifies_and_adds_each_transaction_of_a_batch() -> Result<()> {
    let (_cluster, client) = start_v2(&["t"], 2).await?;
    let (a, _) = init_ok(&client, "a").await?;
    let (b, _) = init_ok(&client, "b").await?;
    let none = common::err(0);
    let e = |code: kafka_protocol::ResponseError| common::err(code.code());

    let verified = client.send(batch(&[("a", (a, 0), true, &[0])]), 4).await?;
    same(
        "verify-only, partition not added",
        answers(&verified),
        vec![("a".into(), vec![(0, e(TransactionAbortable))])],
    )?;
    let added = client
        .send(
            batch(&[("a", (a, 0), false, &[0]), ("b", (b, 5), false, &[1])]),
            5,
        )
        .await?;
    same(
        "a batch adding to a, and to b at a wrong epoch",
        answers(&added),
        vec![
            ("a".into(), vec![(0, none.clone())]),
            ("b".into(), vec![(1, e(ProducerFenced))]),
        ],
    )?;
    let verified = client
        .send(
            batch(&[
                ("a", (a, 0), true, &[0, 1]),
                ("nobody", (a, 0), true, &[0]),
                ("b", (b, 0), true, &[0, 9]),
            ]),
            4,
        )
        .await?;
    same(
        "verify-only after the add",
        answers(&verified),
        vec![
            ("a".into(), vec![(0, none), (1, e(TransactionAbortable))]),
            ("nobody".into(), vec![(0, e(InvalidProducerIdMapping))]),
            (
                "b".into(),
                vec![
                    (0, e(OperationNotAttempted)),
                    (9, e(UnknownTopicOrPartition)),
                ],
            ),
        ],
    )?;
    // The v5 add was a version-2 one: the EndTxn v5 that follows bumps the epoch.
    let (code, next) = end_txn_v5(&client, "a", (a, 0), true).await?;
    code_is("EndTxn v5 after a v5 add", code, None)?;
    same("bumped", next, (a, 1))
}

#[tokio::test]
async fn an_error_rule_answers_each_partition_of_each_transaction_of_a_v4_batch() -> Result<()> {
    let (cluster, client) = start_v2(&["t"], 2).await?;
    let (a, _) = init_ok(&client, "a").await?;
    cluster.add_rule(
        kmock::Rule::on(ApiKey::AddPartitionsToTxn)
            .transactional_id("a")
            .error(ConcurrentTransactions)
            .first(1),
    )?;
    let answer = client
        .send(batch(&[("a", (a, 0), false, &[0, 1])]), 5)
        .await?;
    let busy = common::err(ConcurrentTransactions.code());
    same(
        "the rule's error on every partition",
        answers(&answer),
        vec![("a".into(), vec![(0, busy.clone()), (1, busy)])],
    )?;
    // Not applied: the partitions were not added.
    let verified = client.send(batch(&[("a", (a, 0), true, &[0])]), 4).await?;
    same(
        "verify-only after the refused add",
        answers(&verified),
        vec![(
            "a".into(),
            vec![(0, common::err(TransactionAbortable.code()))],
        )],
    )
}
