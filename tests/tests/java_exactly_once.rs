//! The Java client's exactly-once path (kafka-clients 4.4.0, `fixtures/clients/java`) against
//! kmock's transaction coordinator.
//!
//! `TransactionalCopy` is the consume-transform-produce loop of the client's documentation: a
//! consumer in a group with `isolation.level=read_committed`, a producer with a
//! `transactional.id`, each poll's records copied to the output topic in one transaction that
//! also commits the consumer's offsets (`sendOffsetsToTransaction(offsets,
//! consumer.groupMetadata())`). It runs under an answer lost after a Produce was applied, an
//! answer lost after an EndTxn was applied, and a move of its transaction coordinator between
//! two rounds of input; afterwards the output, read read_committed, holds each input record
//! exactly once, the group's committed offsets are the input's end offsets, and every check is
//! clean. `ZombieFencing` and `TransactionTimeout` show a producer fenced by a second one with
//! the same transactional id, and a transaction left open past its timeout aborted.
//!
//! Written to hold under transaction version 1 and 2 alike: nothing assumes the producer epoch
//! stays fixed across transactions, and where the Java client's errors depend on the version
//! (read from the journal: the client sends EndTxn v5 only under version 2), each version's
//! are pinned as kafka-clients 4.4.0 met them on a real Kafka 4.4.0 node (`fixtures/kafka`),
//! run once with `transaction.version` 2, its default, and once downgraded to 1.
//!
//! Every verdict is about outcomes, not time: the faults fire on request counts, the move waits
//! for journal entries, the second round of input is written only after the move, and each
//! limit below is a hang guard.

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::exactly_once::{
    clean_with_transaction_checks, coordinator_move, copied_both_rounds_once, end_txn_ok,
    lose_produce_and_end_txn_answers, produce_values, read_values, round_values,
};
use kmock::journal::RequestSummary;
use kmock::Cluster;
use kmock_tests::java_client::{self, JavaClients, Output};
use kmock_tests::rules_fired;

/// The kafka-clients release the programs are built against.
const RELEASE: &str = "4.4.0";
/// A hang guard for a program run: a run takes seconds.
const PROGRAM_LIMIT: Duration = Duration::from_secs(300);
/// A hang guard for each wait on the journal and each read.
const HANG_GUARD: Duration = Duration::from_secs(120);
const INPUT: &str = "in";
const OUTPUT: &str = "out";
const PARTITIONS: i32 = 3;
/// Input records per partition in each of the two rounds.
const PER_ROUND: usize = 30;

/// A cluster of three brokers with the input and output topics.
async fn cluster() -> Result<Cluster> {
    Ok(Cluster::builder()
        .brokers(3)
        .topic(INPUT, PARTITIONS)
        .topic(OUTPUT, PARTITIONS)
        .port(0)
        .start()
        .await?)
}

/// The programs, built against [`RELEASE`], checked to run it.
fn programs() -> Result<JavaClients> {
    java_client::build(RELEASE)
}

/// Whether the Java client ran transaction version 2 against `cluster`: it sends EndTxn v5 only
/// then (KIP-890 part 2), v4 at most under version 1.
fn transaction_version_2(cluster: &Cluster) -> bool {
    cluster
        .journal()
        .api("EndTxn")
        .any(|e| e.version.is_some_and(|v| v >= 5))
}

/// The exception class names of the program's `events`, as `(event, class)`, in order: the
/// outcome the tests pin.
fn failures(out: &Output, events: &[&str]) -> Vec<(String, String)> {
    out.events
        .iter()
        .filter(|e| events.iter().any(|kind| e["event"] == *kind))
        .map(|e| {
            (
                e["event"].as_str().unwrap_or_default().to_owned(),
                e["error"]["class"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Fails unless `out` ran kafka-clients [`RELEASE`].
fn ran_release(out: &Output) -> Result<()> {
    let started = out.last("start").context("no start event")?;
    ensure!(
        started["kafka_clients"] == RELEASE,
        "the program ran kafka-clients {}, not {RELEASE}",
        started["kafka_clients"]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_transform_produce_copies_each_record_once_through_lost_answers_and_a_coordinator_move(
) -> Result<()> {
    let clients = programs()?;
    let cluster = cluster().await?;
    let bootstrap = cluster.bootstrap();
    let (group, txn_id) = ("copier", "copier-txn");
    // The third Produce to the output and the second EndTxn are applied, and their answers
    // lost: the client must retry the Produce as a duplicate and the EndTxn as a retry.
    lose_produce_and_end_txn_answers(&cluster, OUTPUT)?;
    let first = round_values(1, PARTITIONS, PER_ROUND);
    produce_values(&bootstrap, INPUT, &first).await?;
    let records = (2 * PER_ROUND * PARTITIONS as usize).to_string();
    let args: Vec<String> = [
        "--bootstrap",
        &bootstrap,
        "--input",
        INPUT,
        "--output",
        OUTPUT,
        "--group",
        group,
        "--transactional-id",
        txn_id,
        "--records",
        &records,
        "--max-poll-records",
        "10",
    ]
    .map(str::to_owned)
    .to_vec();
    let program = {
        let clients = clients.clone();
        tokio::spawn(async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            clients.run("TransactionalCopy", &args, PROGRAM_LIMIT).await
        })
    };

    // Both faults fired (the first round is at least nine transactions of at most ten records,
    // each with a Produce, so they fire within it), then a transaction committed after both.
    let produce_lost = cluster
        .wait_for(|e| e.is("Produce") && !e.faults.is_empty(), HANG_GUARD)
        .await?;
    let end_lost = cluster
        .wait_for(|e| e.is("EndTxn") && !e.faults.is_empty(), HANG_GUARD)
        .await?;
    let after = produce_lost.seq.max(end_lost.seq);
    cluster
        .wait_for(|e| e.seq > after && end_txn_ok(e), HANG_GUARD)
        .await?;
    // Move the coordinator, then write the second round: the program cannot finish without
    // committing transactions at the new coordinator.
    let old = cluster.transaction_coordinator(txn_id);
    let new = old % 3 + 1;
    cluster.move_transaction_coordinator(txn_id, new)?;
    let second = round_values(2, PARTITIONS, PER_ROUND);
    produce_values(&bootstrap, INPUT, &second).await?;

    let out = program.await??;
    let fired = rules_fired(&cluster)?;
    ran_release(&out)?;
    let done = out.last("done");
    ensure!(
        out.status.success()
            && done.is_some_and(|d| d["copied"] == records.parse::<u64>().unwrap()),
        "TransactionalCopy ({fired}):\n{out}"
    );

    // The group's offsets are the input's end offsets: each partition was written 2 × 30
    // records by a plain producer, so its end offset is 60.
    copied_both_rounds_once(
        &bootstrap,
        (INPUT, OUTPUT, group),
        (&first, &second),
        HANG_GUARD,
        || format!("{fired}\n{out}"),
    )
    .await?;

    // The lost answers were recovered as Kafka's protocol has it: each batch of the Produce
    // was sent again (same producer id, epoch, sequence and CRC) and answered NONE as a
    // duplicate (the output holds it once), and the EndTxn was repeated, before any step of a
    // next transaction, and answered NONE.
    let journal = cluster.journal();
    let batches = journal.produce_batches();
    for lost in batches.iter().filter(|b| b.entry.seq == produce_lost.seq) {
        let l = &lost.batch;
        ensure!(
            batches.iter().any(|b| b.entry.seq > lost.entry.seq
                && (
                    b.batch.partition,
                    b.batch.producer_id,
                    b.batch.producer_epoch
                ) == (l.partition, l.producer_id, l.producer_epoch)
                && (b.batch.base_sequence, b.batch.crc) == (l.base_sequence, l.crc)
                && b.batch.error_code == Some(0)),
            "no retry of {OUTPUT}-{} sequence {} answered NONE after the lost answer",
            l.partition,
            l.base_sequence
        );
    }
    let next_step = journal
        .entries()
        .iter()
        .find(|e| {
            e.seq > end_lost.seq
                && ["EndTxn", "AddPartitionsToTxn", "AddOffsetsToTxn"]
                    .iter()
                    .any(|api| e.is(api))
        })
        .context("nothing after the lost EndTxn")?;
    ensure!(
        end_txn_ok(next_step)
            && matches!(&next_step.request, Some(RequestSummary::EndTxn(s)) if s.committed),
        "the lost EndTxn was not repeated and answered NONE: {next_step:?}"
    );

    // Transactions went on at the new coordinator after the move.
    let moved = coordinator_move(journal.entries())
        .context("the move is journaled")?
        .seq;
    let at_new = journal
        .api("EndTxn")
        .filter(|e| e.seq > moved && e.broker == new && end_txn_ok(e))
        .count();
    ensure!(
        at_new > 0,
        "no transaction committed at the new coordinator {new} (the old one was {old})"
    );
    let report = clean_with_transaction_checks(&cluster)?;
    let transactions = journal.api("EndTxn").filter(|e| end_txn_ok(e)).count();
    println!(
        "kafka-clients {RELEASE} TransactionalCopy: {:.2?}, {records} records copied in {} \
         transactions ({} aborted by the program), {transactions} EndTxn answered NONE, {at_new} \
         after the move at broker {new}; {fired}; {} warnings",
        out.took,
        done.map_or(serde_json::Value::Null, |d| d["transactions"].clone()),
        done.map_or(serde_json::Value::Null, |d| d["aborted"].clone()),
        report.count(kmock::check::Severity::Warning),
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_producer_with_the_same_transactional_id_fences_the_first() -> Result<()> {
    let clients = programs()?;
    let cluster = cluster().await?;
    let bootstrap = cluster.bootstrap();
    let args = [
        "--bootstrap",
        &bootstrap,
        "--topic",
        OUTPUT,
        "--transactional-id",
        "zombie-txn",
    ];
    let out = clients.run("ZombieFencing", &args, PROGRAM_LIMIT).await?;
    ran_release(&out)?;
    ensure!(
        out.status.success() && out.last("done").is_some(),
        "ZombieFencing:\n{out}"
    );
    ensure!(
        out.last("committed")
            .is_some_and(|e| e["who"] == "successor")
            && out
                .events
                .iter()
                .all(|e| e["who"] != "zombie" || e["event"] != "committed"),
        "the successor commits, the zombie never:\n{out}"
    );
    // The zombie's send to a partition new to its transaction, then its commit and its abort,
    // fail as kafka-clients 4.4.0 fails them against Kafka 4.4.0 (both versions run on a real
    // node): under transaction version 1 the coordinator refuses the AddPartitionsToTxn as
    // fenced, a fatal error every later call repeats; under version 2 the partition refuses
    // the Produce with INVALID_PRODUCER_EPOCH, an abortable error the commit repeats, and the
    // abort's EndTxn is refused as fenced.
    let tv2 = transaction_version_2(&cluster);
    let expected = if tv2 {
        [
            "InvalidProducerEpochException",
            "InvalidProducerEpochException",
            "ProducerFencedException",
        ]
    } else {
        ["ProducerFencedException"; 3]
    };
    let steps = ["send_failed", "commit_failed", "abort_failed"];
    let expected: Vec<(String, String)> = steps
        .iter()
        .zip(expected)
        .map(|(event, class)| ((*event).to_owned(), class.to_owned()))
        .collect();
    let got = failures(&out, &steps);
    ensure!(
        got == expected,
        "the zombie's send, commit and abort (transaction version {}): got {got:?}, expected \
         {expected:?}:\n{out}",
        if tv2 { 2 } else { 1 }
    );

    let committed =
        read_values(&bootstrap, OUTPUT, PARTITIONS, "read_committed", HANG_GUARD).await?;
    ensure!(
        committed == [vec!["successor-0".to_owned()], vec![], vec![]],
        "read_committed sees the successor's record only: {committed:?}"
    );
    let report = clean_with_transaction_checks(&cluster)?;
    println!(
        "kafka-clients {RELEASE} ZombieFencing: {:.2?}; transaction version {}: {got:?}; {} \
         warnings",
        out.took,
        if tv2 { 2 } else { 1 },
        report.count(kmock::check::Severity::Warning),
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_left_open_past_its_timeout_is_aborted() -> Result<()> {
    let clients = programs()?;
    let cluster = cluster().await?;
    let bootstrap = cluster.bootstrap();
    // One second: the program waits for the abort as an event (the last stable offset moving
    // past its record), so the figure only sets how soon it comes. Should the transaction time
    // out before its record is acknowledged (a loaded machine), the program tries again with a
    // new producer and a timeout four times longer (`too_late` events, printed below).
    let args = [
        "--bootstrap",
        &bootstrap,
        "--topic",
        OUTPUT,
        "--transactional-id",
        "idle-txn",
        "--timeout-ms",
        "1000",
    ];
    let out = clients
        .run("TransactionTimeout", &args, PROGRAM_LIMIT)
        .await?;
    ran_release(&out)?;
    ensure!(
        out.status.success() && out.last("ended").is_some() && out.last("done").is_some(),
        "TransactionTimeout:\n{out}"
    );
    // The coordinator aborted it and fenced the producer (an epoch bump), so the commit that
    // comes after is refused as kafka-clients 4.4.0 sees it refused by Kafka 4.4.0 (both
    // versions run on a real node): fenced under transaction version 1; INVALID_TXN_STATE
    // under version 2, whose EndTxn takes the epoch just below the bumped one for a retry of
    // the transaction that ended, and a commit of an aborted one is no retry.
    let tv2 = transaction_version_2(&cluster);
    let expected = if tv2 {
        "InvalidTxnStateException"
    } else {
        "ProducerFencedException"
    };
    let got = failures(&out, &["commit_failed"]);
    ensure!(
        got == [("commit_failed".to_owned(), expected.to_owned())],
        "the late commit (transaction version {}): got {got:?}, expected {expected}:\n{out}",
        if tv2 { 2 } else { 1 }
    );
    let committed =
        read_values(&bootstrap, OUTPUT, PARTITIONS, "read_committed", HANG_GUARD).await?;
    let everything = read_values(
        &bootstrap,
        OUTPUT,
        PARTITIONS,
        "read_uncommitted",
        HANG_GUARD,
    )
    .await?;
    ensure!(
        committed.iter().all(Vec::is_empty) && everything[0] == ["expired"],
        "the record of the aborted transaction: read_committed {committed:?}, read_uncommitted \
         {everything:?}"
    );
    // The abort marker follows the record: the last stable offset the program saw is two past
    // the record's offset.
    let sent = out.last("sent").context("no sent event")?;
    ensure!(
        out.last("ended").unwrap()["last_stable_offset"].as_i64()
            == sent["offset"].as_i64().map(|o| o + 2),
        "record, then abort marker:\n{out}"
    );
    let report = clean_with_transaction_checks(&cluster)?;
    println!(
        "kafka-clients {RELEASE} TransactionTimeout: {:.2?} ({} ms from the send to the abort \
         seen, timeout {} ms, {} attempts too late); transaction version {}, commit refused \
         with {expected}; {} warnings",
        out.took,
        out.last("ended").unwrap()["waited_ms"],
        sent["timeout_ms"],
        out.events
            .iter()
            .filter(|e| e["event"] == "too_late")
            .count(),
        if tv2 { 2 } else { 1 },
        report.count(kmock::check::Severity::Warning),
    );
    cluster.shutdown().await;
    Ok(())
}
