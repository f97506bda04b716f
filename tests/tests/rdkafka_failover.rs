//! librdkafka's idempotent producer while brokers go down and come back: every partition a
//! stopped broker led fails over to a live replica with its leader epoch bumped, the producer
//! follows the leaders through Metadata, and each partition still holds every message once, in
//! the order produced, with no ordering check tripped.

use std::time::Duration;

use kmock::journal::ClusterOperation;
use kmock::{Checks, Cluster};
use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;

const MESSAGES: usize = 20_000;
const PARTITIONS: i32 = 6;
/// Chunks of messages, with a pause between them, so production spans the broker flapping.
const PACING: (usize, Duration) = (250, Duration::from_millis(20));
/// How long each broker stays down, and up before the next goes down.
const DOWN: Duration = Duration::from_millis(150);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_producer_rides_out_brokers_going_down_and_coming_back() {
    let cluster = Cluster::builder()
        .brokers(3)
        .topic("t", PARTITIONS)
        .start()
        .await
        .unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000")
        .set("reconnect.backoff.ms", "10")
        .set("reconnect.backoff.max.ms", "100")
        .set("topic.metadata.refresh.interval.ms", "500")
        .create()
        .unwrap();
    let flapping = {
        let cluster = cluster.clone();
        tokio::spawn(async move {
            for node in [1, 2, 3, 1] {
                tokio::time::sleep(DOWN).await;
                cluster.broker_down(node).await?;
                tokio::time::sleep(DOWN).await;
                cluster.broker_up(node).await?;
            }
            anyhow::Ok(())
        })
    };
    let produced = kmock_tests::produce_numbered(&producer, "t", PARTITIONS, MESSAGES, PACING)
        .await
        .unwrap();
    flapping.await.unwrap().unwrap();

    let journal = cluster.journal();
    let operations: Vec<&ClusterOperation> = journal
        .entries()
        .iter()
        .filter_map(|e| e.operation.as_ref())
        .collect();
    assert_eq!(
        operations.len(),
        8,
        "four downs and four ups: {operations:?}"
    );
    let produce_requests = |broker: i32| {
        journal
            .api("Produce")
            .filter(|e| e.broker == broker)
            .count()
    };
    for broker in 1..=3 {
        assert!(
            produce_requests(broker) > 0,
            "broker {broker} took no Produce request"
        );
    }
    let refused = journal
        .api("Produce")
        .filter(|e| {
            e.response
                .as_ref()
                .is_some_and(|r| r.error_codes.iter().any(|&c| c != 0))
        })
        .count();
    let unanswered = journal
        .api("Produce")
        .filter(|e| e.response.is_none())
        .count();
    eprintln!(
        "{} Produce requests: {refused} refused (NOT_LEADER_OR_FOLLOWER and the like), \
         {unanswered} cut off by a broker going down",
        journal.api("Produce").count()
    );
    let stored = kmock_tests::read_log(
        &cluster.bootstrap(),
        "t",
        PARTITIONS,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    kmock_tests::exactly_once_in_order(&stored, &produced, |_, _| String::new())
        .unwrap_or_else(|e| panic!("{e}"));
    cluster.check(&Checks::default()).assert_clean();
}
