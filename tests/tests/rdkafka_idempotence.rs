//! librdkafka's idempotent producer against kmock's producer state rules: every batch is
//! accepted in sequence, and each partition holds each message once, in the order produced.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

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
    // Where each message went, by its number.
    let mut delivered = vec![(0, 0); MESSAGES];
    for chunk in (0..MESSAGES).collect::<Vec<_>>().chunks(10_000) {
        let sends = chunk.iter().map(|&i| {
            let (key, value) = (format!("key-{}", i % 997), i.to_string());
            let producer = &producer;
            async move {
                let record = FutureRecord::to("t").key(&key).payload(&value);
                (i, producer.send(record, Duration::from_secs(30)).await)
            }
        });
        for (i, result) in join_all(sends).await {
            let delivery = result.unwrap_or_else(|(e, _)| panic!("message {i} not delivered: {e}"));
            delivered[i] = (delivery.partition, delivery.offset);
        }
    }

    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("group.id", "reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        assignment
            .add_partition_offset("t", p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut stored: BTreeMap<i32, Vec<(i64, usize)>> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut count = 0;
    while count < MESSAGES {
        let message = tokio::time::timeout_at(deadline, consumer.recv())
            .await
            .unwrap_or_else(|_| panic!("consumed {count} of {MESSAGES} before the timeout"))
            .unwrap();
        let n: usize = std::str::from_utf8(message.payload().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        stored
            .entry(message.partition())
            .or_default()
            .push((message.offset(), n));
        count += 1;
    }

    let mut seen = vec![false; MESSAGES];
    for (partition, messages) in &stored {
        for (i, &(offset, n)) in messages.iter().enumerate() {
            assert_eq!(
                offset, i as i64,
                "partition {partition}: offsets not contiguous at {i}"
            );
            assert!(
                !seen[n],
                "message {n} stored twice (partition {partition}, offset {offset})"
            );
            seen[n] = true;
            assert_eq!(
                delivered[n],
                (*partition, offset),
                "message {n} is not where its delivery report put it"
            );
        }
        let numbers: Vec<usize> = messages.iter().map(|&(_, n)| n).collect();
        if let Some(w) = numbers.windows(2).find(|w| w[0] > w[1]) {
            panic!(
                "partition {partition}: message {} stored after {}, out of production order",
                w[1], w[0]
            );
        }
    }
    assert_eq!(
        stored.len(),
        PARTITIONS as usize,
        "every partition got messages: {:?}",
        stored.keys()
    );
    assert!(seen.iter().all(|&s| s), "some messages were never stored");
    // A correct idempotent producer trips none of the ordering checks.
    cluster.check(&kmock::Checks::default()).assert_clean();
}
