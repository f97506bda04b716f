//! librdkafka's idempotent producer against kmock's producer state rules: every batch is
//! accepted in sequence, and each partition holds each message once, in the order produced.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;

const MESSAGES: usize = 100_000;
const PARTITIONS: i32 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_producer_stores_every_message_once_in_order() {
    let cluster = kmock::Cluster::builder()
        .brokers(3)
        .topic("t", PARTITIONS)
        .start()
        .await
        .unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    // All enqueued at once: 100,000 messages is exactly librdkafka's default queue size.
    let pacing = (MESSAGES, Duration::ZERO);
    let produced = kmock_tests::produce_numbered(&producer, "t", PARTITIONS, MESSAGES, pacing)
        .await
        .unwrap();
    let stored = kmock_tests::read_log(
        &cluster.bootstrap(),
        "t",
        PARTITIONS,
        Duration::from_secs(120),
    )
    .await
    .unwrap();
    assert!(
        stored.iter().all(|p| !p.is_empty()),
        "every partition got messages: {:?}",
        stored.iter().map(Vec::len).collect::<Vec<_>>()
    );
    kmock_tests::exactly_once_in_order(&stored, &produced, |_, _| String::new())
        .unwrap_or_else(|e| panic!("{e}"));
    // A correct idempotent producer trips none of the ordering checks.
    cluster.check(&kmock::Checks::default()).assert_clean();
}
