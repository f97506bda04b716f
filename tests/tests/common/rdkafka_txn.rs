//! librdkafka's transactional producer (the rdkafka crate) and read_committed and
//! read_uncommitted consumers, as the rdkafka transaction tests drive them.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

/// Generous bound on each client call: it only turns a hang into a failure.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// Every check clean (warnings allowed), and the transaction checks ran without a finding.
pub fn assert_clean_with_transaction_checks(cluster: &kmock::Cluster) {
    if let Err(e) = super::exactly_once::clean_with_transaction_checks(cluster) {
        panic!("{e:#}");
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
/// consumer's isolation level lets it see, in offset order per partition
/// ([`super::exactly_once::read_values`]).
pub async fn read_all(bootstrap: &str, topic: &str, isolation_level: &str) -> Vec<Vec<String>> {
    super::exactly_once::read_values(bootstrap, topic, 2, isolation_level, HANG_GUARD)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// The values of `all` sent to partition `p` by [`send`].
pub fn on_partition(all: &[String], p: usize) -> Vec<String> {
    all.iter().skip(p).step_by(2).cloned().collect()
}

/// Reads partitions 0 and 1 of `topic` at both isolation levels and asserts what three
/// transactions left there: read_committed sees `first` then `last`, read_uncommitted also the
/// `aborted` values between them (each split over the partitions as [`send`] does).
pub async fn assert_read_back(
    bootstrap: &str,
    topic: &str,
    first: &[String],
    aborted: &[String],
    last: &[String],
) {
    let committed = read_all(bootstrap, topic, "read_committed").await;
    let everything = read_all(bootstrap, topic, "read_uncommitted").await;
    for p in 0..2 {
        let expected = [on_partition(first, p), on_partition(last, p)].concat();
        assert_eq!(committed[p], expected, "read_committed, partition {p}");
        let expected = [
            on_partition(first, p),
            on_partition(aborted, p),
            on_partition(last, p),
        ]
        .concat();
        assert_eq!(everything[p], expected, "read_uncommitted, partition {p}");
    }
}
