//! franz-go's `GroupTransactSession` (`fixtures/clients/go/franz-eos`, franz-go v1.22.3) against
//! kmock: members of one consumer group, each with its own transactional id, copy an input topic
//! to an output topic, each poll's copies and consumed offsets committed in one transaction
//! (read_committed, TxnOffsetCommit with the group's generation and member id). Two members
//! start; once both have committed, a third joins, and the group rebalances while the first
//! round of input is being copied; the second round is written once the third member fetches.
//! Meanwhile the answers of a Produce and of an EndTxn are lost after they were applied.
//! Afterwards the output, read read_committed, holds each input record exactly once, the
//! group's committed offsets are the input's end offsets, and every check is clean.
//!
//! Written to hold under transaction version 1 and 2 alike (nothing reads producer epochs).
//! The steps wait for journal entries, not for time: the first round is written once both
//! first members fetch the input (so each owns partitions when it arrives), the third member
//! starts once both committed, the second round once the third fetches. Each limit below is a
//! hang guard. A member aborts the transaction a rebalance overtakes (the session's design);
//! how many it aborts varies from run to run and is printed, not asserted.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::exactly_once::{
    clean_with_transaction_checks, copied_both_rounds_once, end_txn_ok,
    lose_produce_and_end_txn_answers, produce_values, round_values,
};
use kmock::journal::RequestSummary;
use kmock::{Cluster, Entry};
use kmock_tests::go_client::{self, Output};
use kmock_tests::rules_fired;
use tokio::task::JoinHandle;

/// A hang guard for a member's run: a run takes seconds.
const MEMBER_LIMIT: Duration = Duration::from_secs(300);
/// A hang guard for each wait on the journal and each read.
const HANG_GUARD: Duration = Duration::from_secs(120);
const INPUT: &str = "in";
const OUTPUT: &str = "out";
const GROUP: &str = "copiers";
/// Six partitions: two each for three members.
const PARTITIONS: i32 = 6;
/// Input records per partition in each of the two rounds.
const PER_ROUND: usize = 20;

/// Starts member `name` (client id `member-{name}`, transactional id `copier-{name}`), which
/// runs until the group has copied `records` records.
fn member(
    binary: &Path,
    bootstrap: &str,
    name: &str,
    records: usize,
) -> JoinHandle<Result<Output>> {
    let binary: PathBuf = binary.to_owned();
    let args: Vec<String> = [
        "-bootstrap",
        bootstrap,
        "-input",
        INPUT,
        "-output",
        OUTPUT,
        "-group",
        GROUP,
        "-transactional-id",
        &format!("copier-{name}"),
        "-member",
        &format!("member-{name}"),
        "-records",
        &records.to_string(),
    ]
    .map(str::to_owned)
    .to_vec();
    tokio::spawn(async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        go_client::run(&binary, &args, MEMBER_LIMIT).await
    })
}

/// Whether `e` is a Fetch of the input topic by member `name`.
fn fetches_input(e: &Entry, name: &str) -> bool {
    e.is("Fetch")
        && e.client_id.as_deref() == Some(&format!("member-{name}"))
        && e.partitions().iter().any(|(topic, _)| *topic == INPUT)
}

/// Whether `e` is an EndTxn of member `name` committing, answered NONE.
fn commits(e: &Entry, name: &str) -> bool {
    end_txn_ok(e)
        && matches!(&e.request, Some(RequestSummary::EndTxn(s))
            if s.committed && s.transactional_id == format!("copier-{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_transact_sessions_copy_each_record_once_through_a_rebalance() -> Result<()> {
    let binary = go_client::build_module("franz-eos")?;
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(INPUT, PARTITIONS)
        .topic(OUTPUT, PARTITIONS)
        .port(0)
        .start()
        .await?;
    let bootstrap = cluster.bootstrap();
    let records = 2 * PER_ROUND * PARTITIONS as usize;
    // The answers of the third Produce to the output and of the second EndTxn are lost after
    // they were applied (the members end at least 24 transactions, each with a Produce): a
    // member must retry the batch as a duplicate and repeat the EndTxn.
    lose_produce_and_end_txn_answers(&cluster, OUTPUT)?;

    let a = member(&binary, &bootstrap, "a", records);
    let b = member(&binary, &bootstrap, "b", records);
    for name in ["a", "b"] {
        cluster
            .wait_for(|e| fetches_input(e, name), HANG_GUARD)
            .await
            .with_context(|| format!("member {name} never fetched the input"))?;
    }
    let first = round_values(1, PARTITIONS, PER_ROUND);
    produce_values(&bootstrap, INPUT, &first).await?;
    for name in ["a", "b"] {
        cluster
            .wait_for(|e| commits(e, name), HANG_GUARD)
            .await
            .with_context(|| format!("member {name} never committed"))?;
    }
    // The third member joins while the first round is being copied.
    let c = member(&binary, &bootstrap, "c", records);
    cluster
        .wait_for(|e| fetches_input(e, "c"), HANG_GUARD)
        .await
        .context("member c never fetched the input")?;
    let second = round_values(2, PARTITIONS, PER_ROUND);
    produce_values(&bootstrap, INPUT, &second).await?;

    let mut outs = Vec::new();
    for (name, task) in [("a", a), ("b", b), ("c", c)] {
        let out = task.await??;
        ensure!(
            out.status.success() && out.last("done").is_some(),
            "member {name}:\n{out}"
        );
        let started = out.last("start").context("no start event")?;
        ensure!(
            started["franz_go"] == "v1.22.3",
            "member {name} ran franz-go {}",
            started["franz_go"]
        );
        outs.push((name, out));
    }
    let fired = rules_fired(&cluster)?;
    let all_events = || {
        outs.iter()
            .map(|(name, out)| format!("member {name}:\n{out}"))
            .collect::<String>()
    };
    // Each record was committed by one member only: the copies they committed add up.
    let copied: u64 = outs
        .iter()
        .map(|(_, out)| out.last("done").unwrap()["copied"].as_u64().unwrap_or(0))
        .sum();
    ensure!(
        copied == records as u64,
        "the members committed {copied} copies in all, expected {records}:\n{}",
        all_events()
    );
    let journal = cluster.journal();
    for name in ["a", "b", "c"] {
        ensure!(
            journal.entries().iter().any(|e| commits(e, name)),
            "member {name} committed no transaction:\n{}",
            all_events()
        );
    }

    copied_both_rounds_once(
        &bootstrap,
        (INPUT, OUTPUT, GROUP),
        (&first, &second),
        HANG_GUARD,
        all_events,
    )
    .await?;
    let report = clean_with_transaction_checks(&cluster)?;

    let generations = journal
        .api("SyncGroup")
        .filter_map(|e| match &e.request {
            Some(RequestSummary::SyncGroup(s)) => Some(s.generation_id),
            _ => None,
        })
        .max()
        .unwrap_or(-1);
    let figures: Vec<String> = outs
        .iter()
        .map(|(name, out)| {
            let done = out.last("done").unwrap();
            format!(
                "{name}: {:.2?}, {} copied in {} transactions, {} aborted",
                out.took, done["copied"], done["transactions"], done["aborted"]
            )
        })
        .collect();
    println!(
        "franz-go v1.22.3 GroupTransactSession: {}; {records} records; generations up to \
         {generations}; {} EndTxn answered NONE; {fired}; {} warnings",
        figures.join("; "),
        journal.api("EndTxn").filter(|e| end_txn_ok(e)).count(),
        report.count(kmock::check::Severity::Warning),
    );
    cluster.shutdown().await;
    Ok(())
}
