//! The journal as seen through librdkafka's idempotent producer: every Produce batch is
//! recorded, in arrival order, with the sequence numbers, offsets and error codes that prove
//! the producer state rules held.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use kmock::journal::{ProduceBatch, RequestSummary};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

const MESSAGES: usize = 3_000;
const PARTITIONS: i32 = 3;

/// One line per batch: where it came from and what its header and answer said.
fn describe(batches: &[&ProduceBatch]) -> String {
    batches
        .iter()
        .map(|b| {
            format!(
                "  seq {} conn {} broker {}: {}/{} producer {}/{} base_sequence {} \
                 record_count {} base_offset {:?} error_code {:?}",
                b.entry.seq,
                b.entry.conn,
                b.entry.broker,
                b.batch.topic,
                b.batch.partition,
                b.batch.producer_id,
                b.batch.producer_epoch,
                b.batch.base_sequence,
                b.batch.record_count,
                b.batch.base_offset,
                b.batch.error_code,
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_producer_journal_shows_base_sequences_in_arrival_order() {
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
        // Small batches, so each partition gets many of them, several in flight at once.
        .set("batch.num.messages", "50")
        .create()
        .unwrap();
    let sends = (0..MESSAGES).map(|i| {
        let (key, value) = (format!("key-{}", i % 997), i.to_string());
        let producer = &producer;
        async move {
            let record = FutureRecord::to("t").key(&key).payload(&value);
            (i, producer.send(record, Duration::from_secs(30)).await)
        }
    });
    // Messages delivered to each partition, by the delivery reports.
    let mut delivered: BTreeMap<i32, i64> = BTreeMap::new();
    for (i, result) in join_all(sends).await {
        let delivery = result.unwrap_or_else(|(e, _)| panic!("message {i} not delivered: {e}"));
        *delivered.entry(delivery.partition).or_default() += 1;
    }
    assert_eq!(
        delivered.values().sum::<i64>(),
        MESSAGES as i64,
        "delivery reports per partition: {delivered:?}"
    );

    // A delivery report can come before the broker has completed the entry (it writes the
    // answer first): wait for every Produce entry's response.
    for entry in cluster.journal().api("Produce") {
        let seq = entry.seq;
        cluster
            .wait_for(
                |e| e.seq == seq && e.response.is_some(),
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_else(|e| panic!("Produce entry {seq} unanswered after every delivery: {e}"));
    }
    let journal = cluster.journal();

    assert_eq!(
        journal.evicted(),
        0,
        "nothing evicted at the default capacity"
    );
    let entries = journal.entries();
    if let Some(w) = entries.windows(2).find(|w| w[0].seq >= w[1].seq) {
        panic!(
            "journal seqs not strictly increasing: {} then {}",
            w[0].seq, w[1].seq
        );
    }
    for entry in journal.api("Produce") {
        let response = entry.response.as_ref().expect("waited for above");
        assert!(
            response.error_codes.is_empty(),
            "Produce seq {} (conn {}) answered with errors {:?}",
            entry.seq,
            entry.conn,
            response.error_codes
        );
    }

    let batches = journal.produce_batches();
    assert!(!batches.is_empty(), "no Produce batches in the journal");
    let all: Vec<&ProduceBatch> = batches.iter().collect();
    let producer_id = batches[0].batch.producer_id;
    assert!(
        producer_id >= 0,
        "the first batch has no producer id:\n{}",
        describe(&all[..1])
    );
    let strangers: Vec<&ProduceBatch> = batches
        .iter()
        .filter(|b| b.batch.producer_id != producer_id || b.batch.producer_epoch != 0)
        .collect();
    assert!(
        strangers.is_empty(),
        "batches not from producer {producer_id} epoch 0:\n{}",
        describe(&strangers)
    );
    // The id the batches carry is the one InitProducerId gave.
    let assigned: Vec<Option<i64>> = journal
        .api("InitProducerId")
        .map(|e| match &e.request {
            Some(RequestSummary::InitProducerId(s)) => s.assigned_producer_id,
            other => panic!("InitProducerId seq {} summarized as {other:?}", e.seq),
        })
        .collect();
    assert_eq!(
        assigned,
        vec![Some(producer_id)],
        "InitProducerId entries and the producer id the batches carry"
    );

    let mut by_partition: BTreeMap<(String, i32), Vec<&ProduceBatch>> = BTreeMap::new();
    for b in &batches {
        by_partition
            .entry((b.batch.topic.to_string(), b.batch.partition))
            .or_default()
            .push(b);
    }
    let mut recorded: BTreeMap<i32, i64> = BTreeMap::new();
    for ((topic, partition), batches) in &by_partition {
        assert_eq!(topic, "t", "a batch for an unexpected topic");
        assert!(
            batches.len() >= 10,
            "{topic}/{partition}: only {} batches, too few to test their order:\n{}",
            batches.len(),
            describe(batches)
        );
        let mut next_sequence = 0i32;
        let mut next_offset = 0i64;
        for (i, b) in batches.iter().enumerate() {
            let around = describe(&batches[i.saturating_sub(2)..(i + 3).min(batches.len())]);
            assert_eq!(
                b.batch.base_sequence, next_sequence,
                "{topic}/{partition}: batch {i} (seq {}) has base sequence {}, expected {}; \
                 batches around it, in arrival order:\n{around}",
                b.entry.seq, b.batch.base_sequence, next_sequence
            );
            assert!(
                b.batch.record_count > 0,
                "{topic}/{partition}: batch {i} (seq {}) has no records:\n{around}",
                b.entry.seq
            );
            assert_eq!(
                (b.batch.base_offset, b.batch.error_code),
                (Some(next_offset), Some(0)),
                "{topic}/{partition}: batch {i} (seq {}) answered (base_offset, error_code); \
                 batches around it, in arrival order:\n{around}",
                b.entry.seq
            );
            next_sequence += b.batch.record_count;
            next_offset += i64::from(b.batch.record_count);
        }
        recorded.insert(*partition, next_offset);
    }
    assert_eq!(
        recorded, delivered,
        "records per partition: in the journal's Produce batches (left), by the delivery \
         reports (right)"
    );
    eprintln!(
        "{} journal entries, {} Produce batches over partitions {:?}",
        entries.len(),
        batches.len(),
        recorded
    );
}
