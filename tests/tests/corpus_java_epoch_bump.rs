//! KAFKA-12152, with the real Java client: kafka-clients 2.7.0's idempotent producer bumps its
//! producer epoch (KIP-360, on its own, after an OUT_OF_ORDER_SEQUENCE_NUMBER) but resets the
//! sequence numbers only of the partitions that caused the bump or had a batch in flight; an
//! idle partition keeps counting, so its next batch opens the new epoch at a non-zero sequence,
//! which Kafka refuses with OUT_OF_ORDER_SEQUENCE_NUMBER (and the client bumps again). Fixed in
//! 2.8.0 (apache/kafka#9832), which restarts every partition at sequence 0 under the new epoch.
//!
//! `fixtures/scenarios/epoch-bump-idle-partitions.yaml` (its comments say why each line is
//! there) runs `fixtures/clients/java`'s `IdempotentProducer` (enable.idempotence, acks=all)
//! in three rounds, each waiting for all its acknowledgements: payments-0, -1 and -2; then
//! payments-0 alone, whose batch is answered OUT_OF_ORDER_SEQUENCE_NUMBER once; then all three
//! again. The rounds and the fault fix the outcome: the bug shows in every run, no retry.
//!
//! `KMOCK_REPEAT=10` runs each release ten times (see `kmock_tests::repeat`).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::excerpt::batch_line;
use kmock::journal::ProduceBatch;
use kmock::{Cluster, Report};
use kmock_tests::java_client::{self, Output};
use kmock_tests::{repeat, rules_fired, start_scenario};

const SCENARIO: &str = "epoch-bump-idle-partitions.yaml";
const TOPIC: &str = "payments";
/// The rounds, as the program's `--round` arguments: the partitions each round produces to.
const ROUNDS: [&str; 3] = ["0,1,2", "0", "0,1,2"];
/// Records each round sends to each of its partitions: one, so each round is one Produce
/// request per partition and the scenario's `nth: 2` is payments-0's second-round batch.
const RECORDS: usize = 1;
/// Records the program sends in all (3 + 1 + 3).
const SENT: u64 = 7;
/// The partitions idle while the epoch is bumped.
const IDLE: [i32; 2] = [1, 2];
/// A hang guard only: a run takes seconds; the client's own delivery timeout is 120 s.
const PRODUCER_LIMIT: Duration = Duration::from_secs(300);
/// OUT_OF_ORDER_SEQUENCE_NUMBER.
const OUT_OF_ORDER: i16 = 45;

/// One run of the producer built against kafka-clients `release`: the cluster, the verdict and
/// the program's output.
async fn java_run(release: &str) -> Result<(Cluster, Report, Output)> {
    let clients = java_client::build(release)?;
    let (cluster, checks) = start_scenario(SCENARIO).await?;
    let bootstrap = cluster.bootstrap();
    let records = RECORDS.to_string();
    let mut args = vec![
        "--bootstrap",
        &bootstrap,
        "--topic",
        TOPIC,
        "--records",
        &records,
    ];
    for round in ROUNDS {
        args.extend(["--round", round]);
    }
    let out = clients
        .run("IdempotentProducer", &args, PRODUCER_LIMIT)
        .await?;
    let started = out.last("start").context("no start event")?;
    ensure!(
        started["kafka_clients"] == release,
        "the program ran kafka-clients {}, not {release}",
        started["kafka_clients"]
    );
    let report = cluster.check(&checks);
    Ok((cluster, report, out))
}

/// Every idempotent Produce batch of `cluster`'s journal, one [`batch_line`] each.
fn batches(cluster: &Cluster) -> String {
    let all = cluster.journal().produce_batches();
    all.iter().map(batch_line).collect::<Vec<_>>().join("\n")
}

/// The Produce batches answered OUT_OF_ORDER_SEQUENCE_NUMBER.
fn refused(cluster: &Cluster) -> Vec<ProduceBatch> {
    let all = cluster.journal().produce_batches();
    all.into_iter()
        .filter(|b| b.batch.error_code == Some(OUT_OF_ORDER))
        .collect()
}

/// The highest producer epoch any batch carried.
fn last_epoch(cluster: &Cluster) -> i16 {
    let all = cluster.journal().produce_batches();
    all.iter()
        .map(|b| b.batch.producer_epoch)
        .max()
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_clients_2_7_0_keeps_idle_partitions_sequences_across_an_epoch_bump() -> Result<()> {
    let runs = repeat();
    for run in 1..=runs {
        let (cluster, report, out) = java_run("2.7.0").await?;
        let fired = rules_fired(&cluster)?;
        cluster.verify()?;
        let journal = batches(&cluster);
        // The symptom, on each idle partition: its first batch of the new epoch.
        let named: BTreeSet<String> = report
            .of_kind("epoch-not-reset")
            .map(|v| v.key.clone())
            .collect();
        let expected: BTreeSet<String> = IDLE
            .iter()
            .map(|p| format!("{TOPIC}-{p}"))
            .filter(|tp| !named.iter().any(|key| key.ends_with(&format!(" {tp}"))))
            .collect();
        ensure!(
            expected.is_empty(),
            "run {run}: kafka-clients 2.7.0, no epoch-not-reset for {expected:?} ({fired}):\n\
             {report}batches:\n{journal}\nproducer:\n{out}"
        );
        // Each was refused by the broker, as Kafka refuses it: a new epoch must start at 0.
        let all = cluster.journal().produce_batches();
        for v in report.of_kind("epoch-not-reset") {
            let seq = v.entries[0].seq;
            let batch = all
                .iter()
                .find(|b| b.entry.seq == seq)
                .with_context(|| format!("no Produce batch at seq {seq}"))?;
            ensure!(
                batch.batch.base_sequence != 0 && batch.batch.error_code == Some(OUT_OF_ORDER),
                "run {run}: {} [{}] names {}",
                v.kind,
                v.key,
                batch_line(batch)
            );
        }
        // Nothing else: one violation per idle partition, and the client recovered (it bumps
        // again on each refusal and resends from 0), so the application saw no error.
        let kinds: BTreeSet<&str> = report.violations.iter().map(|v| v.kind.as_str()).collect();
        let done = out.last("done").context("no done event")?;
        ensure!(
            kinds == BTreeSet::from(["epoch-not-reset"])
                && report.violations.len() == IDLE.len()
                && out.status.success()
                && done["acked"] == SENT,
            "run {run}: kafka-clients 2.7.0, expected one epoch-not-reset per idle partition and \
             every record acknowledged ({fired}):\n{report}batches:\n{journal}\nproducer:\n{out}"
        );
        println!(
            "kafka-clients 2.7.0 run {run}/{runs}: producer {:.2?} (exit status {:?}), acked {} \
             failed {}; violations {kinds:?}: {} epoch-not-reset; {} batches answered \
             OUT_OF_ORDER_SEQUENCE_NUMBER, epochs up to {} ({fired})",
            out.took,
            out.status.code(),
            done["acked"],
            done["failed"],
            report.of_kind("epoch-not-reset").count(),
            refused(&cluster).len(),
            last_epoch(&cluster),
        );
        if run == 1 {
            println!("{report}batches:\n{journal}");
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_clients_2_8_0_restarts_every_partition_at_sequence_0_after_an_epoch_bump(
) -> Result<()> {
    let runs = repeat();
    for run in 1..=runs {
        let (cluster, report, out) = java_run("2.8.0").await?;
        let fired = rules_fired(&cluster)?;
        cluster.verify()?;
        let journal = batches(&cluster);
        let done = out.last("done").context("no done event")?;
        ensure!(
            out.status.success() && report.is_clean() && done["acked"] == SENT,
            "run {run}: kafka-clients 2.8.0 ({fired}):\n{report}batches:\n{journal}\n\
             producer:\n{out}"
        );
        // The scenario did what it is for: the only refusal is the injected one, the epoch was
        // bumped once, and each idle partition opened the new epoch at sequence 0.
        let refusals = refused(&cluster);
        ensure!(
            refusals.len() == 1
                && refusals[0].entry.faults.len() == 1
                && refusals[0].entry.faults[0].starts_with("lost-producer-state"),
            "run {run}: expected only the injected refusal:\n{journal}"
        );
        let all = cluster.journal().produce_batches();
        for p in IDLE {
            let epochs: Vec<(i16, i32)> = all
                .iter()
                .filter(|b| b.batch.partition == p)
                .map(|b| (b.batch.producer_epoch, b.batch.base_sequence))
                .collect();
            ensure!(
                epochs == [(0, 0), (1, 0)],
                "run {run}: {TOPIC}-{p} got (epoch, base sequence) {epochs:?}, expected \
                 [(0, 0), (1, 0)]:\n{journal}"
            );
        }
        println!(
            "kafka-clients 2.8.0 run {run}/{runs}: producer {:.2?}, {SENT} acked, clean, \
             {} warnings ({fired})",
            out.took,
            report.count(kmock::check::Severity::Warning),
        );
    }
    Ok(())
}
