//! Record identity in the journal: each Produce batch's CRC and one digest per record, on the
//! in-process batch summary and in the JSON Lines journal, also for a batch whose answer a
//! fault dropped after it was stored.

mod common;

use std::time::Duration;

use common::jsonl::JsonlBuffer;
use kmock::journal::{ProducePartition, RequestSummary};
use kmock::{ApiKey, Cluster, Rule};
use kmock_client::{record, Client};

/// The batch of the `n`th Produce entry.
fn nth_batch(cluster: &Cluster, n: usize) -> ProducePartition {
    cluster.journal().produce_batches()[n].batch.clone()
}

#[tokio::test]
async fn each_batch_carries_its_crc_and_a_digest_per_record() {
    let jsonl = JsonlBuffer::default();
    let cluster = Cluster::builder()
        .topic("t", 1)
        .journal_jsonl(jsonl.clone())
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let records = [record(b"k", b"1"), record(b"k", b"2"), record(b"k", b"1")];
    client.produce("t", 0, &records, 1).await.unwrap();
    client.produce("t", 0, &records[..1], 1).await.unwrap();

    let (three, one) = (nth_batch(&cluster, 0), nth_batch(&cluster, 1));
    let digests = three.digests.clone().expect("the batch was walked");
    assert_eq!(digests.len(), 3);
    assert_eq!(
        digests[0], digests[2],
        "the same key and value, the same digest"
    );
    assert_ne!(digests[0], digests[1]);
    assert_eq!(one.digests.as_deref(), Some(&digests[..1]));
    assert!(
        three.crc.is_some() && three.crc != one.crc,
        "{three:?} {one:?}"
    );

    // The JSON Lines journal carries the same, and reads back (a line is written as its entry
    // completes, just after the answer: wait for the second).
    let second = cluster.journal().produce_batches()[1].entry.seq;
    cluster
        .wait_for(
            |e| e.seq == second && e.response.is_some(),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    let from_file: Vec<ProducePartition> = jsonl
        .entries()
        .iter()
        .filter(|e| e.is("Produce"))
        .map(|e| match &e.request {
            Some(RequestSummary::Produce(p)) => p.partitions[0].clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(from_file, vec![three, one]);
}

#[tokio::test]
async fn a_batch_stored_before_its_answer_was_dropped_keeps_its_digests() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let drop_answer = cluster
        .add_rule(Rule::on(ApiKey::Produce).nth(1).disconnect_after_apply())
        .unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let sent = client.produce("t", 0, &[record(b"k", b"v")], 1).await;
    assert!(sent.is_err(), "the answer was dropped: {sent:?}");
    let entry = cluster
        .wait_for(|e| e.is("Produce"), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(drop_answer.fired(), 1);
    // Completed (unanswered) before the connection closed, with the batch's identity.
    let batch = nth_batch(&cluster, 0);
    assert_eq!((batch.error_code, entry.response.is_none()), (None, true));
    assert_eq!(batch.digests.map(|d| d.len()), Some(1));
}
