//! librdkafka's transactional producer (the rdkafka crate) and read_committed and
//! read_uncommitted consumers, as the rdkafka transaction tests drive them.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

/// Generous bound on each client call: it only turns a hang into a failure.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// The transaction checks kmock has, each of which must have run and found nothing.
pub const TRANSACTION_CHECKS: [&str; 4] = [
    "txn-offset-commit-regression",
    "produce-after-end-txn",
    "end-txn-with-produce-in-flight",
    "read-committed-saw-aborted",
];

/// Every check clean (warnings allowed), and the transaction checks ran without a finding.
pub fn assert_clean_with_transaction_checks(cluster: &kmock::Cluster) {
    let report = cluster.check(&kmock::Checks::default());
    report.assert_clean();
    for kind in TRANSACTION_CHECKS {
        assert!(
            report.checks.iter().any(|c| c == kind),
            "{kind} ran:\n{report}"
        );
        assert_eq!(report.of_kind(kind).count(), 0, "{kind}:\n{report}");
    }
}

/// A librdkafka transactional producer of `transactional_id` (default settings otherwise).
pub fn transactional_producer(bootstrap: &str, transactional_id: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", transactional_id)
        .create()
        .unwrap()
}

/// Sends `values` to `topic`, alternating between partitions 0 and 1, and waits for each
/// delivery report.
pub async fn send(producer: &FutureProducer, topic: &str, values: &[String]) {
    for (i, value) in values.iter().enumerate() {
        let record = FutureRecord::to(topic)
            .partition(i as i32 % 2)
            .key("k")
            .payload(value);
        producer
            .send(record, HANG_GUARD)
            .await
            .unwrap_or_else(|(e, _)| panic!("{value}: {e}"));
    }
}

/// `prefix0`, `prefix1`, … (`n` values).
pub fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Every record value of partitions 0 and 1 of `topic`, read from the start to the end the
/// consumer's isolation level lets it see (librdkafka's partition EOF: the last stable offset
/// for read_committed, the high watermark for read_uncommitted), in offset order per
/// partition.
pub async fn read_all(bootstrap: &str, topic: &str, isolation_level: &str) -> Vec<Vec<String>> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", isolation_level)
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    for p in 0..2 {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut read = vec![Vec::new(), Vec::new()];
    let mut at_end = [false, false];
    while !at_end.iter().all(|&e| e) {
        match tokio::time::timeout(HANG_GUARD, consumer.recv()).await {
            Err(_) => panic!(
                "{isolation_level}: no end of partition within the hang guard; read {read:?}"
            ),
            Ok(Err(KafkaError::PartitionEOF(p))) => at_end[p as usize] = true,
            Ok(Err(e)) => panic!("{isolation_level}: {e}"),
            Ok(Ok(m)) => {
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                read[m.partition() as usize].push(value);
            }
        }
    }
    read
}

/// The values of `all` sent to partition `p` by [`send`].
pub fn on_partition(all: &[String], p: usize) -> Vec<String> {
    all.iter().skip(p).step_by(2).cloned().collect()
}
