//! Sarama's idempotent async producer under network interruptions, against
//! `fixtures/scenarios/idempotent-disconnects.yaml`: answers lost after the batch was stored
//! and requests dropped before it, while messages keep coming. Sarama v1.42.1 (the version of
//! the "message out of sequence" report) sends batches out of sequence: the sequence checks
//! name them, and the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER (45). The latest Sarama
//! (v1.61.1), which numbers each batch as it is built, and librdkafka come out clean.
//!
//! Verdicts follow outcomes (`kmock::check::sequences`): most of v1.42.1's findings are
//! warnings, because kmock refused the batch with 45 and Sarama then had a batch stored with a
//! new epoch of its own (it bumps its epoch after a failed message), which is how KIP-360 lets a
//! producer recover; its failed messages are reported to the application, not lost silently.
//! It is still caught by violations in every run: anomalous batches in requests whose answer
//! the `lost-answers` rule dropped (the journal holds no refusal to credit a recovery to) and,
//! in some runs, partitions left refused at the end of the run.
//!
//! `KMOCK_REPEAT=10` runs each scenario ten times (see `kmock_tests::repeat`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use futures::future::join_all;
use kmock::check::Severity;
use kmock::journal::ProduceBatch;
use kmock::{Cluster, Report, Violation};
use kmock_tests::go_client::{self, Output};
use kmock_tests::{repeat, rules_fired, start_scenario};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

const SCENARIO: &str = "idempotent-disconnects.yaml";
const TOPIC: &str = "events";
const MESSAGES: usize = 1_000;
/// The pause between two messages: messages keep arriving while batches are retried.
const INTERVAL: Duration = Duration::from_millis(1);
/// How long one producer may take before the run counts as stuck.
const PRODUCER_LIMIT: Duration = Duration::from_secs(60);
/// The findings (violations or warnings) README.md reports in every run of Sarama v1.42.1 ...
const V1_42_1_ALWAYS: &[&str] = &["epoch-not-reset", "sequence-overlap"];
/// ... and in some.
const V1_42_1_SOMETIMES: &[&str] = &["sequence-gap", "sequence-reorder"];
/// OUT_OF_ORDER_SEQUENCE_NUMBER.
const OUT_OF_ORDER: i16 = 45;

/// Produce requests the broker answered OUT_OF_ORDER_SEQUENCE_NUMBER for some partition.
fn out_of_order_answers(cluster: &Cluster) -> usize {
    let journal = cluster.journal();
    let answered_45 = |e: &&kmock::Entry| {
        e.response
            .as_ref()
            .is_some_and(|r| r.error_codes.contains(&OUT_OF_ORDER))
    };
    journal.api("Produce").filter(answered_45).count()
}

/// For each violation (the first five), the Produce batches of its producer and partition
/// around its journal entries, one line each, in arrival order.
fn excerpts(cluster: &Cluster, report: &Report) -> String {
    let batches = cluster.journal().produce_batches();
    let line = |ProduceBatch { entry: e, batch: b }: &ProduceBatch| {
        let outcome = match b.error_code {
            Some(0) => format!("stored at offset {:?}", b.base_offset),
            Some(code) => format!("refused with error {code}"),
            None => "unanswered".to_owned(),
        };
        format!(
            "    seq {} conn {} +{}us epoch {} sequences {}..{}: {outcome}, faults {:?}",
            e.seq,
            e.conn,
            e.at_us,
            b.producer_epoch,
            b.base_sequence,
            b.base_sequence + b.record_count,
            e.faults
        )
    };
    let around = |v: &Violation| {
        let (first, last) = (v.entries[0].seq, v.entries[v.entries.len() - 1].seq);
        batches
            .iter()
            .filter(|b| {
                let key = format!(
                    "producer {} {}-{}",
                    b.batch.producer_id, b.batch.topic, b.batch.partition
                );
                key == v.key && b.entry.seq + 50 >= first && b.entry.seq <= last + 50
            })
            .map(line)
            .collect::<Vec<_>>()
            .join("\n")
    };
    report
        .violations
        .iter()
        .take(5)
        .map(|v| format!("  {} [{}]: {}\n{}", v.kind, v.key, v.message, around(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Findings by kind, warnings too, e.g. `{"sequence-gap": 12}`.
fn by_kind(report: &Report) -> BTreeMap<&str, usize> {
    let mut kinds = BTreeMap::new();
    for v in &report.violations {
        *kinds.entry(v.kind.as_str()).or_default() += 1;
    }
    kinds
}

/// Findings of one severity by kind.
fn of_severity(report: &Report, severity: Severity) -> BTreeMap<&str, usize> {
    let mut kinds = BTreeMap::new();
    for v in report.violations.iter().filter(|v| v.severity == severity) {
        *kinds.entry(v.kind.as_str()).or_default() += 1;
    }
    kinds
}

/// One run of the Sarama producer against Sarama `sarama`: the cluster, the verdict, the output.
async fn sarama_run(sarama: &str) -> Result<(Cluster, Report, Output)> {
    let binary = go_client::build("producer", sarama)?;
    let (cluster, checks) = start_scenario(SCENARIO).await?;
    let bootstrap = cluster.bootstrap();
    let (messages, interval) = (MESSAGES.to_string(), format!("{}ms", INTERVAL.as_millis()));
    let args = [
        "-brokers",
        &bootstrap,
        "-topic",
        TOPIC,
        "-messages",
        &messages,
        "-interval",
        &interval,
    ];
    let out = go_client::run(&binary, &args, PRODUCER_LIMIT).await?;
    let report = cluster.check(&checks);
    Ok((cluster, report, out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_42_1_sends_batches_out_of_sequence_after_disconnects() -> Result<()> {
    let runs = repeat();
    for run in 1..=runs {
        let (cluster, report, out) = sarama_run("v1.42.1").await?;
        let fired = rules_fired(&cluster)?;
        // Both signs of the bug, in every run: the checks' verdict (at least one violation)
        // and the broker's 45s.
        ensure!(
            !report.is_clean() && out_of_order_answers(&cluster) > 0,
            "run {run}: Sarama v1.42.1 was not caught ({fired}):\n{report}producer:\n{out}"
        );
        // The kinds README.md reports for every run, and no kind it does not report.
        let kinds = by_kind(&report);
        let missing: Vec<_> = V1_42_1_ALWAYS
            .iter()
            .filter(|k| !kinds.contains_key(*k))
            .collect();
        let unreported: Vec<_> = kinds
            .keys()
            .filter(|k| !V1_42_1_ALWAYS.contains(k) && !V1_42_1_SOMETIMES.contains(k))
            .collect();
        ensure!(
            missing.is_empty() && unreported.is_empty(),
            "run {run}: Sarama v1.42.1 findings {kinds:?}: missing {missing:?}, not reported \
             before {unreported:?}\njournal:\n{}",
            excerpts(&cluster, &report)
        );
        let first = |kind: &str| {
            let mut of_kind = report.violations.iter().filter(|v| v.kind == kind);
            of_kind
                .clone()
                .find(|v| v.severity == Severity::Violation)
                .or(of_kind.next())
        };
        let examples: Vec<String> = by_kind(&report)
            .keys()
            .filter_map(|kind| first(kind))
            .map(|v| format!("  {} {} [{}]: {}", v.severity, v.kind, v.key, v.message))
            .collect();
        let done = out.last("done").context("no done event")?;
        println!(
            "Sarama v1.42.1 run {run}/{runs}: producer {:.2?} (exit status {:?}), violations {:?}, warnings {:?}, {} \
             Produce answers OUT_OF_ORDER_SEQUENCE_NUMBER, acked {} failed {}, client errors \
             by text {} ({fired}); first of each kind:\n{}",
            out.took,
            out.status.code(),
            of_severity(&report, Severity::Violation),
            of_severity(&report, Severity::Warning),
            out_of_order_answers(&cluster),
            done["acked"],
            done["failed"],
            out.last("errors").map_or("{}".into(), |e| e["by_text"].to_string()),
            examples.join("\n")
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_61_1_keeps_sequences_in_order_after_disconnects() -> Result<()> {
    let runs = repeat();
    for run in 1..=runs {
        let (cluster, report, out) = sarama_run("v1.61.1").await?;
        let fired = rules_fired(&cluster)?;
        let refused = out_of_order_answers(&cluster);
        ensure!(
            out.status.success() && report.is_clean() && refused == 0,
            "run {run}: Sarama v1.61.1 ({fired}), {refused} Produce answers \
             OUT_OF_ORDER_SEQUENCE_NUMBER:\n{report}journal:\n{}\nproducer:\n{out}",
            excerpts(&cluster, &report)
        );
        println!(
            "Sarama v1.61.1 run {run}/{runs}: producer {:.2?}, {MESSAGES} acked, clean ({fired})",
            out.took
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_keeps_sequences_in_order_in_the_same_scenario() -> Result<()> {
    let runs = repeat();
    for run in 1..=runs {
        let (cluster, checks) = start_scenario(SCENARIO).await?;
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap())
            .set("client.id", "rdkafka-producer")
            .set("enable.idempotence", "true")
            // librdkafka's defaults otherwise: 5 requests in flight per connection, so batches
            // queued behind a dropped request are cut off with it and resent.
            .set("message.timeout.ms", PRODUCER_LIMIT.as_millis().to_string())
            .create()?;
        let started = Instant::now();
        let mut deliveries = Vec::with_capacity(MESSAGES);
        for i in 0..MESSAGES {
            let (key, value) = (format!("key-{}", i % 64), i.to_string());
            let record = FutureRecord::to(TOPIC).key(&key).payload(&value);
            let delivery = producer.send_result(record).map_err(|(e, _)| e)?;
            deliveries.push(delivery);
            // Pacing, not synchronisation: messages keep arriving while batches are retried,
            // as in the Sarama runs; there is no event to wait for.
            tokio::time::sleep(INTERVAL).await;
        }
        for (i, delivery) in join_all(deliveries).await.into_iter().enumerate() {
            delivery?
                .map_err(|(e, _)| e)
                .with_context(|| format!("message {i}"))?;
        }
        let took = started.elapsed();
        let report = cluster.check(&checks);
        let fired = rules_fired(&cluster)?;
        let refused = out_of_order_answers(&cluster);
        ensure!(
            report.is_clean() && refused == 0,
            "run {run}: librdkafka ({fired}), {refused} Produce answers \
             OUT_OF_ORDER_SEQUENCE_NUMBER:\n{report}journal:\n{}",
            excerpts(&cluster, &report)
        );
        println!(
            "librdkafka run {run}/{runs}: producer {took:.2?}, {MESSAGES} acked, clean ({fired})"
        );
    }
    Ok(())
}
