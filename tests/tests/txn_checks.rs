//! The transaction checks name each violation kmock-client puts on the wire of a real kmock,
//! and stay clean for the correct order of the same requests, with transaction version 1 and
//! with version 2 (where every EndTxn gives the next transaction a new epoch).

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::transactions::{
    add_offsets, add_partitions_ok, end_txn, end_txn_ok, fetch_committed, init_ok, produce_txn_ok,
    transactional_batch, txn_offset_commit,
};
use common::{code_is, same};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError::InvalidTxnState;
use kmock::check::Severity;
use kmock::journal::summary::{AbortedTransaction, RequestSummary};
use kmock::{Checks, Report, Rule};

/// Only catches a hang: every wait here ends on an event long before.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// The kinds of the report's violations (warnings left out), in report order.
fn violations(report: &Report) -> Vec<&str> {
    report
        .violations
        .iter()
        .filter(|v| v.severity == Severity::Violation)
        .map(|v| v.kind.as_str())
        .collect()
}

/// One transaction of `transactional_id` committing (or aborting) `offset` for group g, t-0.
async fn commit_offset_in_txn(
    client: &kmock_client::Client,
    transactional_id: &str,
    (pid, epoch): (i64, i16),
    offset: i64,
    commit: bool,
) -> Result<()> {
    let add = client
        .send(add_offsets(transactional_id, pid, epoch, "g"), 3)
        .await?;
    code_is("AddOffsetsToTxn", add.error_code, None)?;
    let committed = client
        .send(
            txn_offset_commit(transactional_id, pid, epoch, "g", "t", offset),
            3,
        )
        .await?;
    code_is(
        "TxnOffsetCommit",
        committed.topics[0].partitions[0].error_code,
        None,
    )?;
    end_txn_ok(client, transactional_id, (pid, epoch), commit).await
}

#[tokio::test]
async fn a_committed_transaction_moving_a_group_s_offset_backwards_is_named() -> Result<()> {
    let (cluster, client) = common::start(1, &["t"], 1).await?;
    let a = init_ok(&client, "a").await?;
    let b = init_ok(&client, "b").await?;
    commit_offset_in_txn(&client, "a", a, 10, true).await?;
    // An aborted transaction's offset is dropped: never compared.
    commit_offset_in_txn(&client, "b", b, 3, false).await?;
    commit_offset_in_txn(&client, "a", a, 12, true).await?;
    cluster.settled().await;
    let clean = cluster.check(&Checks::default());
    ensure!(clean.is_clean(), "forward only, and an abort:\n{clean}");
    // The regression: b's committed transaction sets g/t-0 to 5 after a's set it to 12.
    commit_offset_in_txn(&client, "b", b, 5, true).await?;
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    same(
        "violations",
        violations(&report),
        vec!["txn-offset-commit-regression"],
    )?;
    let v = &report.violations[0];
    same("key", v.key.as_str(), "g/t-0")?;
    let ends: Vec<u64> = cluster.journal().api("EndTxn").map(|e| e.seq).collect();
    let named: Vec<u64> = v.entries.iter().map(|e| e.seq).collect();
    ensure!(
        named.contains(&ends[2]) && named.contains(&ends[3]),
        "names both committing EndTxns {ends:?}: {named:?}"
    );
    ensure!(
        v.message.contains("to 5 after") && v.message.contains("had set it to 12"),
        "{}",
        v.message
    );
    Ok(())
}

#[tokio::test]
async fn a_produce_after_end_txn_before_the_next_transaction_is_named() -> Result<()> {
    let (cluster, client) = common::start(1, &["t"], 1).await?;
    let producer = init_ok(&client, "tx").await?;
    add_partitions_ok(&client, "tx", producer, "t", &[0]).await?;
    produce_txn_ok(&client, "tx", "t", 0, producer, 0, 2).await?;
    end_txn_ok(&client, "tx", producer, true).await?;
    // The hanging transaction's Produce: after EndTxn, before another AddPartitionsToTxn.
    // kmock verifies it as Kafka 3.6+ does (KIP-890 part 1) and refuses it.
    let late = client
        .send(transactional_batch("tx", "t", 0, producer, 2, 1), 9)
        .await?;
    code_is(
        "Produce after EndTxn",
        late.responses[0].partition_responses[0].error_code,
        Some(InvalidTxnState),
    )?;
    // The next transaction begins: its Produce is in order.
    add_partitions_ok(&client, "tx", producer, "t", &[0]).await?;
    produce_txn_ok(&client, "tx", "t", 0, producer, 2, 1).await?;
    end_txn_ok(&client, "tx", producer, true).await?;

    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    same(
        "violations",
        violations(&report),
        vec!["produce-after-end-txn"],
    )?;
    let v = &report.violations[0];
    let journal = cluster.journal();
    let produces: Vec<u64> = journal.api("Produce").map(|e| e.seq).collect();
    let ends: Vec<u64> = journal.api("EndTxn").map(|e| e.seq).collect();
    let named: Vec<u64> = v.entries.iter().map(|e| e.seq).collect();
    same("entries", named, vec![ends[0], produces[1]])?;
    same(
        "key",
        v.key.as_str(),
        &format!("producer {} t-0", producer.0),
    )?;
    ensure!(v.message.contains("refused with"), "{}", v.message);
    Ok(())
}

#[tokio::test]
async fn an_end_txn_sent_while_a_produce_is_unanswered_is_named() -> Result<()> {
    let (cluster, client) = common::start(1, &["t"], 1).await?;
    let coordinator = kmock_client::Client::connect(cluster.brokers()[0].addr).await?;
    let producer = init_ok(&coordinator, "tx").await?;
    add_partitions_ok(&coordinator, "tx", producer, "t", &[0]).await?;
    // The Produce is applied and never answered; the connection stays open.
    cluster.add_rule(Rule::on(ApiKey::Produce).first(1).silence())?;
    let silenced = client.send(transactional_batch("tx", "t", 0, producer, 0, 2), 9);
    tokio::pin!(silenced);
    tokio::select! {
        biased;
        answer = &mut silenced => anyhow::bail!("a silenced Produce got an answer: {answer:?}"),
        handled = async {
            cluster.wait_for(|e| e.is("Produce"), HANG_GUARD).await?;
            // Answered in order on the connection: the Produce was handled before this.
            client.api_versions().await?;
            anyhow::Ok(())
        } => handled?,
    }
    let end = coordinator
        .send(end_txn("tx", producer.0, producer.1, true), 3)
        .await?;
    code_is("EndTxn", end.error_code, None)?;

    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    // Never answered (silenced): the client may have given up on it, so only a warning; an
    // answer that came after the EndTxn makes it a violation (the check's unit tests).
    same("violations", violations(&report), Vec::<&str>::new())?;
    let v = report
        .violations
        .iter()
        .find(|v| v.kind == "end-txn-with-produce-in-flight")
        .context("no end-txn-with-produce-in-flight finding")?;
    same("severity", v.severity, Severity::Warning)?;
    let journal = cluster.journal();
    let produce = journal.api("Produce").next().expect("the Produce");
    let end = journal.api("EndTxn").next().expect("the EndTxn");
    let named: Vec<u64> = v.entries.iter().map(|e| e.seq).collect();
    same("entries", named, vec![produce.seq, end.seq])?;
    ensure!(
        v.message.contains("had not been answered") && v.message.contains("never was"),
        "{}",
        v.message
    );
    Ok(())
}

#[tokio::test]
async fn a_transaction_answered_in_order_and_read_committed_is_clean() -> Result<()> {
    let (cluster, client) = common::start(1, &["t"], 1).await?;
    let producer = init_ok(&client, "tx").await?;
    for (commit, first) in [(false, 0), (true, 2)] {
        add_partitions_ok(&client, "tx", producer, "t", &[0]).await?;
        produce_txn_ok(&client, "tx", "t", 0, producer, first, 2).await?;
        end_txn_ok(&client, "tx", producer, commit).await?;
    }
    // A read_committed consumer reads across both: the abort is listed for it to drop.
    let fetched = fetch_committed(&client, 0).await?;
    code_is("Fetch", fetched.responses[0].partitions[0].error_code, None)?;
    let journal = cluster.journal();
    let fetch = journal.api("Fetch").next().expect("the Fetch");
    let Some(RequestSummary::Fetch(summary)) = &fetch.request else {
        anyhow::bail!("a Fetch summary: {fetch:?}");
    };
    let p = &summary.partitions[0];
    // Aborted at 0..=1 (marker 2), committed at 3..=4 (marker 5).
    same("last offset answered", p.last_offset, Some(5))?;
    same(
        "aborted transactions answered",
        p.aborted_transactions.clone(),
        Some(vec![AbortedTransaction {
            producer_id: producer.0,
            first_offset: 0,
        }]),
    )?;
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    ensure!(report.violations.is_empty(), "{report}");
    for kind in [
        "produce-after-end-txn",
        "end-txn-with-produce-in-flight",
        "read-committed-saw-aborted",
    ] {
        ensure!(
            report.checks.iter().any(|c| c == kind),
            "{kind} ran: {report}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn version_2_transactions_are_judged_by_the_epoch_each_end_txn_gave() -> Result<()> {
    use common::transactions::{end_txn_v5, produce_v12, start_v2};
    let (cluster, client) = start_v2(&["t"], 1).await?;
    let (pid, epoch) = init_ok(&client, "tx").await?;
    // One version-2 transaction: its Produce adds t-0, its TxnOffsetCommit v5 group g.
    let transaction = |epoch: i16, first: Option<i32>, offset: i64| {
        let client = &client;
        async move {
            if let Some(first) = first {
                let code = produce_v12(client, "tx", ("t", 0), (pid, epoch), first, 1).await?;
                code_is("Produce v12", code, None)?;
            }
            let committed = client
                .send(txn_offset_commit("tx", pid, epoch, "g", "t", offset), 5)
                .await?;
            code_is(
                "TxnOffsetCommit v5",
                committed.topics[0].partitions[0].error_code,
                None,
            )?;
            let (code, next) = end_txn_v5(client, "tx", (pid, epoch), true).await?;
            code_is("EndTxn v5", code, None)?;
            same("the bumped epoch", next, (pid, epoch + 1))?;
            anyhow::Ok(())
        }
    };
    transaction(epoch, Some(0), 10).await?;
    common::last_answered(&cluster).await?;
    cluster.settled().await;
    let clean = cluster.check(&Checks::default());
    ensure!(
        clean.is_clean(),
        "one version-2 transaction:
{clean}"
    );

    // A zombie's Produce at the epoch the EndTxn closed: refused, and named.
    let code = produce_v12(&client, "tx", ("t", 0), (pid, epoch), 1, 1).await?;
    code_is(
        "Produce at the closed epoch",
        code,
        Some(kafka_protocol::ResponseError::InvalidProducerEpoch),
    )?;
    // The next transactions, at the epochs the EndTxns gave: in order, offsets forward.
    transaction(epoch + 1, Some(0), 12).await?;
    common::last_answered(&cluster).await?;
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    same(
        "violations after the zombie",
        violations(&report),
        vec!["produce-after-end-txn"],
    )?;
    // A committed transaction moving g/t-0 back from 12 to 5.
    transaction(epoch + 2, None, 5).await?;
    common::last_answered(&cluster).await?;
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    let mut kinds = violations(&report);
    kinds.sort_unstable();
    same(
        "violations after the regression",
        kinds,
        vec!["produce-after-end-txn", "txn-offset-commit-regression"],
    )
}
