//! librdkafka's idempotent producer while brokers go down and come back: every partition a
//! stopped broker led fails over to a live replica with its leader epoch bumped, the producer
//! follows the leaders through Metadata, and each partition still holds every message once, in
//! the order produced, with no ordering check tripped. Each broker goes down only once it is
//! seen storing the producer's batches, and comes back only once the producer is seen storing
//! a partition it led at the new leader; the journal then shows that only the leader of the
//! moment ever stored a partition's batch.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::excerpt::excerpt;
use common::groups::answered_ok;
use kmock::journal::ClusterOperation;
use kmock::{Checks, Cluster, Entry};
use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;

const TOPIC: &str = "t";
const MESSAGES: usize = 20_000;
const PARTITIONS: i32 = 6;
/// Chunks of messages, with a pause between them, so production spans the broker flapping.
const PACING: (usize, Duration) = (100, Duration::from_millis(20));
/// Hang guard for each wait: generous, it only catches traffic that never comes.
const GUARD: Duration = Duration::from_secs(60);

/// Whether `e` is a Produce of [`TOPIC`] that `broker` stored without error, since `after`.
fn stored_at(e: &Entry, broker: i32, after: u64) -> bool {
    e.seq > after && e.is("Produce") && e.broker == broker && answered_ok(e)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_producer_rides_out_brokers_going_down_and_coming_back() {
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .start()
        .await
        .unwrap();
    // (leader, leader epoch) of each partition at the start.
    let initial: BTreeMap<i32, (i32, i32)> = (0..PARTITIONS)
        .map(|p| {
            let leader = cluster.leader(TOPIC, p).unwrap();
            (p, (leader, cluster.leader_epoch(TOPIC, p).unwrap()))
        })
        .collect();
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
    let producing = tokio::spawn(async move {
        kmock_tests::produce_numbered(&producer, TOPIC, PARTITIONS, MESSAGES, PACING).await
    });
    let last_operation = |cluster: &Cluster| {
        let journal = cluster.journal();
        let op = journal
            .entries()
            .iter()
            .rev()
            .find(|e| e.operation.is_some())
            .cloned()
            .expect("an operation was journaled");
        op
    };
    let mut after = 0;
    for node in [1, 2, 3, 1] {
        // The broker is storing the producer's batches when it goes down.
        cluster
            .wait_for(|e| stored_at(e, node, after), GUARD)
            .await
            .unwrap();
        cluster.broker_down(node).await.unwrap();
        let down = last_operation(&cluster);
        let change = down
            .operation
            .as_ref()
            .unwrap()
            .leader_changes()
            .iter()
            .find(|c| c.topic == TOPIC)
            .cloned()
            .unwrap_or_else(|| panic!("broker {node} led no partition of {TOPIC}: {down:?}"));
        // The producer follows: the partition is stored at its new leader.
        cluster
            .wait_for(
                |e| {
                    stored_at(e, change.to, down.seq)
                        && e.partitions().contains(&(TOPIC, change.partition))
                },
                GUARD,
            )
            .await
            .unwrap();
        cluster.broker_up(node).await.unwrap();
        after = last_operation(&cluster).seq;
    }
    let produced = producing.await.unwrap().unwrap();

    let journal = cluster.journal();
    let entries = journal.entries();
    let operations: Vec<&Entry> = entries.iter().filter(|e| e.operation.is_some()).collect();
    let kinds: Vec<(&str, i32)> = operations
        .iter()
        .map(|e| match e.operation.as_ref().unwrap() {
            ClusterOperation::BrokerDown { node_id, .. } => ("down", *node_id),
            ClusterOperation::BrokerUp { node_id, .. } => ("up", *node_id),
            other => panic!("unexpected operation {other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("down", 1),
            ("up", 1),
            ("down", 2),
            ("up", 2),
            ("down", 3),
            ("up", 3),
            ("down", 1),
            ("up", 1)
        ]
    );
    // Replay the leader changes over the journal: each bumps its partition's epoch, every
    // partition a stopped broker led moves off it, and every batch stored without error was
    // stored by the partition's leader of that moment.
    let mut leaders = initial.clone();
    let mut moves = 0;
    for e in entries {
        if let Some(op) = &e.operation {
            if let ClusterOperation::BrokerDown { node_id, .. } = op {
                let led: Vec<i32> = (0..PARTITIONS)
                    .filter(|p| leaders[p].0 == *node_id)
                    .collect();
                let moved: Vec<i32> = op
                    .leader_changes()
                    .iter()
                    .filter(|c| c.topic == TOPIC)
                    .map(|c| c.partition)
                    .collect();
                assert_eq!(moved, led, "partitions moved off broker {node_id}");
            }
            for c in op.leader_changes().iter().filter(|c| c.topic == TOPIC) {
                let (leader, epoch) = leaders[&c.partition];
                assert_eq!(c.from, leader, "{c:?} starts from the leader");
                assert!(
                    c.leader_epoch > epoch && c.to > 0,
                    "{c:?}: a live leader at an epoch above {epoch}"
                );
                leaders.insert(c.partition, (c.to, c.leader_epoch));
                moves += 1;
            }
            continue;
        }
        if e.is("Produce") && answered_ok(e) {
            for (_, p) in e.partitions() {
                assert_eq!(
                    e.broker,
                    leaders[&p].0,
                    "partition {p} stored by a broker that did not lead it:\n{}",
                    excerpt([e])
                );
            }
        }
    }
    for p in 0..PARTITIONS {
        assert_eq!(
            cluster.leader_epoch(TOPIC, p),
            Some(leaders[&p].1),
            "partition {p}'s epoch is the last journaled change's"
        );
    }
    let refused = journal
        .api("Produce")
        .filter(|e| {
            e.response
                .as_ref()
                .is_some_and(|r| !r.error_codes.is_empty())
        })
        .count();
    let unanswered = journal
        .api("Produce")
        .filter(|e| e.response.is_none())
        .count();
    eprintln!(
        "{} Produce requests: {refused} refused (NOT_LEADER_OR_FOLLOWER and the like), \
         {unanswered} cut off by a broker going down; {moves} leader changes",
        journal.api("Produce").count()
    );
    let stored = kmock_tests::read_log(&cluster.bootstrap(), TOPIC, PARTITIONS, GUARD)
        .await
        .unwrap();
    kmock_tests::exactly_once_in_order(&stored, &produced, |_, _| String::new())
        .unwrap_or_else(|e| panic!("{e}"));
    cluster.check(&Checks::default()).assert_clean();
}
