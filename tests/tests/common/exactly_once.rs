//! Exactly-once pipelines run by real clients (a consume-transform-produce program copying an
//! input topic to an output topic in transactions): the input written with librdkafka, the
//! output read back at either isolation level, the group's committed offsets, the verdict that
//! each input record was copied exactly once, and the transaction checks' verdict.

use std::time::Duration;

use anyhow::{anyhow, ensure, Context, Result};
use futures::future::join_all;
use kafka_protocol::messages::ApiKey;
use kmock::journal::{ClusterOperation, RequestSummary};
use kmock::{Cluster, Entry, Rule};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

/// The prefix the copying programs put before each input value.
pub const COPY_PREFIX: &str = "copy-";

/// The transaction checks kmock has, each of which must run and find nothing on a correct
/// client.
pub const TRANSACTION_CHECKS: [&str; 4] = [
    "txn-offset-commit-regression",
    "produce-after-end-txn",
    "end-txn-with-produce-in-flight",
    "read-committed-saw-aborted",
];

/// Every check of `cluster` clean (warnings allowed) and the transaction checks run without a
/// finding; the report, for the caller to print.
///
/// # Errors
/// A violation, or a transaction check that did not run or found something, with the report.
pub fn clean_with_transaction_checks(cluster: &Cluster) -> Result<kmock::Report> {
    let report = cluster.check(&kmock::Checks::default());
    ensure!(report.is_clean(), "violations:\n{report}");
    for kind in TRANSACTION_CHECKS {
        ensure!(
            report.checks.iter().any(|c| c == kind),
            "{kind} did not run:\n{report}"
        );
        ensure!(
            report.of_kind(kind).count() == 0,
            "{kind} found something:\n{report}"
        );
    }
    Ok(report)
}

/// The input of round `round`: `per_partition` values for each of `partitions` partitions,
/// `r{round}-p{partition}-{i}`, indexed by partition.
pub fn round_values(round: usize, partitions: i32, per_partition: usize) -> Vec<Vec<String>> {
    (0..partitions)
        .map(|p| {
            (0..per_partition)
                .map(|i| format!("r{round}-p{p}-{i}"))
                .collect()
        })
        .collect()
}

/// Writes `values[p]` to partition `p` of `topic`, in order, with a plain librdkafka producer
/// (acks=all), and waits for every acknowledgement.
///
/// # Errors
/// A record that could not be queued or was not acknowledged.
pub async fn produce_values(bootstrap: &str, topic: &str, values: &[Vec<String>]) -> Result<()> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .create()?;
    let mut deliveries = Vec::new();
    for (p, values) in values.iter().enumerate() {
        for value in values {
            let record = FutureRecord::<(), _>::to(topic)
                .partition(p as i32)
                .payload(value);
            let queued = producer
                .send_result(record)
                .map_err(|(e, _)| anyhow!("{value} not queued: {e}"))?;
            deliveries.push(queued);
        }
    }
    for result in join_all(deliveries).await {
        result
            .context("delivery report channel closed")?
            .map_err(|(e, _)| anyhow!("not delivered: {e}"))?;
    }
    Ok(())
}

/// Every record value of `topic`'s `partitions`, per partition in offset order, read from the
/// start to the end `isolation_level` (`read_committed` or `read_uncommitted`) lets a
/// librdkafka consumer see (its partition EOF: the last stable offset or the high watermark).
///
/// # Errors
/// A consumer error, or no end of every partition within `hang_guard`.
pub async fn read_values(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    isolation_level: &str,
    hang_guard: Duration,
) -> Result<Vec<Vec<String>>> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "exactly-once-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", isolation_level)
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let mut read = vec![Vec::new(); partitions as usize];
    let mut at_end = vec![false; partitions as usize];
    let deadline = tokio::time::Instant::now() + hang_guard;
    while !at_end.iter().all(|&e| e) {
        match tokio::time::timeout_at(deadline, consumer.recv()).await {
            Err(_) => {
                return Err(anyhow!(
                    "{topic}, {isolation_level}: not at the end of every partition after \
                     {hang_guard:?} (at end: {at_end:?}); read {read:?}"
                ))
            }
            Ok(Err(KafkaError::PartitionEOF(p))) => at_end[p as usize] = true,
            Ok(Err(e)) => return Err(anyhow!("{topic}, {isolation_level}: {e}")),
            Ok(Ok(m)) => {
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                read[m.partition() as usize].push(value);
            }
        }
    }
    Ok(read)
}

/// The offsets `group` has committed for `topic`'s `partitions` (-1 for none), as OffsetFetch
/// answers them to a librdkafka consumer.
///
/// # Errors
/// A client error, or no answer within `hang_guard`.
pub fn committed_offsets(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
    hang_guard: Duration,
) -> Result<Vec<i64>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()?;
    let mut asked = TopicPartitionList::new();
    for p in 0..partitions {
        asked.add_partition(topic, p);
    }
    let got = consumer.committed_offsets(asked, hang_guard)?;
    Ok(got
        .elements()
        .iter()
        .map(|e| match e.offset() {
            Offset::Offset(o) => o,
            _ => -1,
        })
        .collect())
}

/// Checks that `output` holds, partition by partition, each value of `input` once with
/// [`COPY_PREFIX`] before it, in input order.
///
/// # Errors
/// The first partition that differs, with what it holds and what was expected.
pub fn copied_exactly_once(input: &[Vec<String>], output: &[Vec<String>]) -> Result<()> {
    ensure!(
        input.len() == output.len(),
        "{} input partitions, {} output partitions",
        input.len(),
        output.len()
    );
    for (p, (input, output)) in input.iter().zip(output).enumerate() {
        let expected: Vec<String> = input.iter().map(|v| format!("{COPY_PREFIX}{v}")).collect();
        if *output != expected {
            let missing: Vec<&String> = expected.iter().filter(|v| !output.contains(v)).collect();
            let extra: Vec<&String> = output.iter().filter(|v| !expected.contains(v)).collect();
            let mut seen = std::collections::BTreeSet::new();
            let twice: Vec<&String> = output.iter().filter(|v| !seen.insert(*v)).collect();
            return Err(anyhow!(
                "output partition {p}: {} records, expected {}; missing {missing:?}, not in \
                 the input {extra:?}, twice {twice:?}",
                output.len(),
                expected.len()
            ));
        }
    }
    Ok(())
}

/// Whether `e` is an EndTxn answered NONE.
pub fn end_txn_ok(e: &Entry) -> bool {
    matches!(&e.request, Some(RequestSummary::EndTxn(s)) if s.error_code == Some(0))
}

/// The journal entry of the first move of a transaction coordinator
/// ([`kmock::journal::ClusterOperation::MoveTransactionCoordinator`]) among `entries`.
pub fn coordinator_move(entries: &[Entry]) -> Option<&Entry> {
    entries.iter().find(|e| {
        matches!(
            e.operation,
            Some(ClusterOperation::MoveTransactionCoordinator { .. })
        )
    })
}

/// Loses the answers of the third Produce to `output` and of the second EndTxn after the
/// broker applied them (rules `produce-answer-lost` and `end-txn-answer-lost`): a correct
/// client sends the batch again, answered as a duplicate, and repeats the EndTxn.
///
/// # Errors
/// A rule the cluster refuses.
pub fn lose_produce_and_end_txn_answers(cluster: &Cluster, output: &str) -> Result<()> {
    cluster.add_rule(
        Rule::on(ApiKey::Produce)
            .named("produce-answer-lost")
            .topic(output)
            .nth(3)
            .disconnect_after_apply(),
    )?;
    cluster.add_rule(
        Rule::on(ApiKey::EndTxn)
            .named("end-txn-answer-lost")
            .nth(2)
            .disconnect_after_apply(),
    )?;
    Ok(())
}

/// The verdict on a copy of two rounds of input (`first` then `second`, each indexed by
/// partition, written by a plain producer): `output`, read read_committed, holds each input
/// record exactly once, and `group`'s committed offsets on `input` are the input's end offsets
/// (both rounds' lengths added, per partition).
///
/// # Errors
/// What differs, with `context()` (the programs' events) where the copy is wrong.
pub async fn copied_both_rounds_once(
    bootstrap: &str,
    (input, output, group): (&str, &str, &str),
    (first, second): (&[Vec<String>], &[Vec<String>]),
    hang_guard: Duration,
    context: impl Fn() -> String,
) -> Result<()> {
    let partitions = i32::try_from(first.len())?;
    let both: Vec<Vec<String>> = first
        .iter()
        .zip(second)
        .map(|(a, b)| [a.clone(), b.clone()].concat())
        .collect();
    let copied = read_values(bootstrap, output, partitions, "read_committed", hang_guard).await?;
    copied_exactly_once(&both, &copied).with_context(context)?;
    let committed = committed_offsets(bootstrap, group, input, partitions, hang_guard)?;
    let ends: Vec<i64> = both.iter().map(|p| p.len() as i64).collect();
    ensure!(
        committed == ends,
        "the group's committed offsets {committed:?}, expected the input's end offsets {ends:?}"
    );
    Ok(())
}
