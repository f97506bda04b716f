//! Sarama's two bugs of the fake-mode reproductions, caught through `kmock proxy` in front of
//! the three-node Apache Kafka 4.4 (`KMOCK_KAFKA3_BOOTSTRAP`, which `.ci/run` starts, or one
//! started here per test with `fixtures/kafka/kafka.sh start --nodes 3`), with the same
//! scenarios' fault rules and checks as in fake mode (`sarama_commit_race.rs`,
//! `sarama_idempotent_producer.rs`): the rules act in the proxy, Kafka does the rest.
//!
//! - The offset-commit race of v1.43.2 (`fixtures/scenarios/commit-race.yaml`: a seeded fifth
//!   of the group's OffsetCommits held 2 ms). The topic's 8 partitions are placed on the two
//!   brokers that are not the group's coordinator, so commits have a connection of their own
//!   as in the fake's 9-broker shape: `offset-commit-regression` names both commits; v1.43.3
//!   is clean.
//! - The idempotent producer of v1.42.1 (`fixtures/scenarios/idempotent-disconnects.yaml`:
//!   every 25th Produce's answer lost after Kafka stored it, a seeded 5% of the others dropped
//!   before forwarding): the sequence checks name it and Kafka answers
//!   OUT_OF_ORDER_SEQUENCE_NUMBER; v1.61.1 is clean.
//!
//! v1.43.2's race is probabilistic: a run without a regression gets up to 3 attempts; the
//! fixed releases must be clean in every run.
//!
//! The tests of this file run one at a time (each drives a Go client, the proxy and three
//! JVMs on a shared machine). Each run uses a topic and group of its own. `KMOCK_REPEAT=10`
//! runs each ten times (see `kmock_tests::repeat`).

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::proxy::{coordinator_node, create_topic_on, fresh, proxy_scenario};
use kmock::check::Severity;
use kmock::journal::RequestSummary;
use kmock::{Cluster, Report, Violation};
use kmock_tests::go_client::{self, Output};
use kmock_tests::real_kafka::RealKafka;
use kmock_tests::{repeat, rules_fired};
use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;

/// One test at a time: each runs a Go client, a proxy and (without `KMOCK_KAFKA3_BOOTSTRAP`)
/// three JVMs of its own.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PARTITIONS: i32 = 8;
const MESSAGES: usize = 2_000;
/// A hang guard only: how long one Go client may take before the run counts as stuck.
const CLIENT_LIMIT: Duration = Duration::from_secs(120);
/// OUT_OF_ORDER_SEQUENCE_NUMBER.
const OUT_OF_ORDER: i16 = 45;

/// One run of the Sarama consumer built at `binary` through a proxy with commit-race.yaml's
/// rule, the topic's partitions on the brokers that are not the group's coordinator.
async fn commit_race_run(
    kafka: &RealKafka,
    binary: &std::path::Path,
) -> Result<(Cluster, Report, Output, i32)> {
    let (topic, group) = (fresh("orders"), fresh("shipping"));
    let (proxy, checks) = proxy_scenario("commit-race.yaml", kafka.bootstrap(), &group).await?;
    let bootstrap = proxy.bootstrap();
    let brokers = proxy.brokers();
    ensure!(brokers.len() == 3, "the proxy listens for {brokers:?}");
    let coordinator = coordinator_node(&brokers[0].addr.to_string(), &group).await?;
    let others: Vec<i32> = brokers
        .iter()
        .map(|b| b.node_id)
        .filter(|n| *n != coordinator)
        .collect();
    let replicas: Vec<i32> = (0..PARTITIONS as usize)
        .map(|p| others[p % others.len()])
        .collect();
    create_topic_on(&bootstrap, &topic, &replicas).await?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()?;
    kmock_tests::produce_numbered(
        &producer,
        &topic,
        PARTITIONS,
        MESSAGES,
        (MESSAGES, Duration::ZERO),
    )
    .await?;
    drop(producer);
    let messages = MESSAGES.to_string();
    let args = [
        "-brokers",
        &bootstrap,
        "-topic",
        &topic,
        "-group",
        &group,
        "-messages",
        &messages,
    ];
    let out = go_client::run(binary, &args, CLIENT_LIMIT).await?;
    ensure!(
        out.status.success(),
        "the consumer did not handle its {MESSAGES} messages without client errors:\n{out}"
    );
    // The shape the race needs: every commit on the coordinator, no fetch of the topic there.
    let journal = proxy.journal();
    let misplaced: Vec<_> = journal
        .entries()
        .iter()
        .filter(|e| match &e.request {
            Some(RequestSummary::OffsetCommit(_)) => e.broker != coordinator,
            _ => e.api.as_deref() == Some("Fetch") && e.broker == coordinator,
        })
        .map(|e| (e.seq, e.api.clone(), e.broker))
        .collect();
    ensure!(
        misplaced.is_empty(),
        "coordinator {coordinator}, partitions on {others:?}: commits elsewhere or fetches \
         there: {misplaced:?}"
    );
    let report = proxy.check(&checks);
    Ok((proxy, report, out, coordinator))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_43_2_moves_committed_offsets_backwards_through_the_proxy() -> Result<()> {
    /// The race is the client's and probabilistic: through Kafka it showed 1–16 times a run
    /// (every one of 10 runs), so a run without one gets two more attempts.
    const ATTEMPTS: usize = 3;
    let _one = ONE_AT_A_TIME.lock().await;
    let consumer = go_client::build("consumer", "v1.43.2")?;
    let kafka = RealKafka::start_three_nodes()?;
    let runs = repeat();
    for run in 1..=runs {
        for attempt in 1..=ATTEMPTS {
            let (proxy, report, out, coordinator) = commit_race_run(&kafka, &consumer).await?;
            let fired = rules_fired(&proxy)?;
            proxy.shutdown().await;
            let regressions: Vec<&Violation> = report.of_kind("offset-commit-regression").collect();
            let Some(first) = regressions.first() else {
                ensure!(
                    attempt < ATTEMPTS,
                    "run {run}: Sarama v1.43.2 committed {MESSAGES} messages through the proxy \
                     without a regression in {ATTEMPTS} attempts ({fired}); last report:\n\
                     {report}consumer:\n{out}"
                );
                println!("run {run}, attempt {attempt}: no regression ({fired})");
                continue;
            };
            ensure!(
                first.entries.len() == 2 && first.message.contains("moved backwards"),
                "run {run}: {first:?}"
            );
            println!(
                "Sarama v1.43.2 through the proxy, run {run}/{runs} (attempt {attempt}): consumer \
                 {:.2?}, coordinator {coordinator}, {} offset-commit-regression ({fired}); \
                 first:\n  {}",
                out.took,
                regressions.len(),
                first.message
            );
            break;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_43_3_commits_in_order_through_the_proxy() -> Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    let consumer = go_client::build("consumer", "v1.43.3")?;
    let kafka = RealKafka::start_three_nodes()?;
    let runs = repeat();
    for run in 1..=runs {
        let (proxy, report, out, coordinator) = commit_race_run(&kafka, &consumer).await?;
        let fired = rules_fired(&proxy)?;
        ensure!(
            report.is_clean(),
            "run {run}: Sarama v1.43.3 through the proxy ({fired}):\n{report}consumer:\n{out}"
        );
        println!(
            "Sarama v1.43.3 through the proxy, run {run}/{runs}: consumer {:.2?}, coordinator \
             {coordinator}, clean ({fired}, {} warnings)",
            out.took,
            report.count(Severity::Warning)
        );
        proxy.shutdown().await;
    }
    Ok(())
}

/// Produce requests Kafka answered OUT_OF_ORDER_SEQUENCE_NUMBER for some partition.
fn out_of_order_answers(proxy: &Cluster) -> usize {
    let journal = proxy.journal();
    let answered_45 = |e: &&kmock::Entry| {
        e.response
            .as_ref()
            .is_some_and(|r| r.error_codes.contains(&OUT_OF_ORDER))
    };
    journal.api("Produce").filter(answered_45).count()
}

/// Findings of one severity by kind.
fn of_severity(report: &Report, severity: Severity) -> std::collections::BTreeMap<&str, usize> {
    let mut kinds = std::collections::BTreeMap::new();
    for v in report.violations.iter().filter(|v| v.severity == severity) {
        *kinds.entry(v.kind.as_str()).or_default() += 1;
    }
    kinds
}

/// What one producer run left: the proxy (not shut down), the checks' report, the producer's
/// output, the rules' counts ([`rules_fired`]) and how many Produce answers were
/// OUT_OF_ORDER_SEQUENCE_NUMBER ([`out_of_order_answers`]).
struct ProducerRun {
    proxy: Cluster,
    report: Report,
    out: Output,
    fired: String,
    refused: usize,
}

/// One run of the Sarama producer of release `sarama` through a proxy with
/// idempotent-disconnects.yaml's rules: 1,000 messages, one a millisecond, to a topic of 6
/// partitions placed by Kafka.
///
/// # Errors
/// The producer could not run, or a rule fired on no request.
async fn producer_run(kafka: &RealKafka, sarama: &str) -> Result<ProducerRun> {
    const MESSAGES: usize = 1_000;
    let binary = go_client::build("producer", sarama)?;
    let topic = fresh("events");
    let (proxy, checks) =
        proxy_scenario("idempotent-disconnects.yaml", kafka.bootstrap(), "-").await?;
    let bootstrap = proxy.bootstrap();
    common::proxy::create_topic(&bootstrap, &topic, 6).await?;
    let messages = MESSAGES.to_string();
    let args = [
        "-brokers",
        &bootstrap,
        "-topic",
        &topic,
        "-messages",
        &messages,
        "-interval",
        "1ms",
    ];
    let out = go_client::run(&binary, &args, CLIENT_LIMIT).await?;
    let report = proxy.check(&checks);
    let fired = rules_fired(&proxy)?;
    let refused = out_of_order_answers(&proxy);
    Ok(ProducerRun {
        proxy,
        report,
        out,
        fired,
        refused,
    })
}

/// Runs the Sarama producer of release `sarama` through the proxy ([`producer_run`]) once, or
/// `KMOCK_REPEAT` times, one test at a time, and gives each run (numbered from 1 of `runs`) to
/// `verdict`.
async fn producer_runs(
    sarama: &str,
    verdict: impl Fn(usize, usize, &ProducerRun) -> Result<()>,
) -> Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    let kafka = RealKafka::start_three_nodes()?;
    let runs = repeat();
    for run in 1..=runs {
        let got = producer_run(&kafka, sarama).await?;
        verdict(run, runs, &got)?;
        got.proxy.shutdown().await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_42_1_sends_batches_out_of_sequence_through_the_proxy() -> Result<()> {
    producer_runs("v1.42.1", |run, runs, got| {
        let (report, out, fired, refused) = (&got.report, &got.out, &got.fired, got.refused);
        ensure!(
            !report.is_clean() && refused > 0,
            "run {run}: Sarama v1.42.1 was not caught through the proxy ({fired}, {refused} \
             answers OUT_OF_ORDER_SEQUENCE_NUMBER):\n{report}producer:\n{out}"
        );
        let done = out.last("done").context("no done event")?;
        println!(
            "Sarama v1.42.1 through the proxy, run {run}/{runs}: producer {:.2?}, violations \
             {:?}, warnings {:?}, {refused} Produce answers OUT_OF_ORDER_SEQUENCE_NUMBER, acked \
             {} failed {} ({fired})",
            out.took,
            of_severity(report, Severity::Violation),
            of_severity(report, Severity::Warning),
            done["acked"],
            done["failed"],
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_v1_61_1_keeps_sequences_in_order_through_the_proxy() -> Result<()> {
    producer_runs("v1.61.1", |run, runs, got| {
        let (report, out, fired, refused) = (&got.report, &got.out, &got.fired, got.refused);
        ensure!(
            out.status.success() && report.is_clean() && refused == 0,
            "run {run}: Sarama v1.61.1 through the proxy ({fired}), {refused} Produce answers \
             OUT_OF_ORDER_SEQUENCE_NUMBER:\n{report}producer:\n{out}"
        );
        println!(
            "Sarama v1.61.1 through the proxy, run {run}/{runs}: producer {:.2?}, clean \
             ({fired}, {} warnings)",
            out.took,
            report.count(Severity::Warning)
        );
        Ok(())
    })
    .await
}
