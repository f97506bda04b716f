//! Record identity in the journal: each Produce batch's CRC and one digest per record, on the
//! in-process batch summary and in the JSON Lines journal, also for a batch whose answer a
//! fault dropped after it was stored, and for the uncompressed batches whose digests the
//! journal computes when first read.

mod common;

use std::time::Duration;

use anyhow::ensure;
use bytes::Bytes;
use common::jsonl::JsonlBuffer;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest, ProducerId};
use kafka_protocol::records::Compression;
use kmock::journal::{ProducePartition, RecordDigest, RequestSummary};
use kmock::{ApiKey, Cluster, Rule};
use kmock_client::{encode_batch, record, Client};

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

/// `records` keyed `k` with values `{prefix}{i}`, one in three with a null key and a header.
fn records(prefix: &str, n: usize) -> Vec<kafka_protocol::records::Record> {
    (0..n)
        .map(|i| {
            let mut r = record(b"k", format!("{prefix}{i}").as_bytes());
            if i % 3 == 1 {
                r.key = None;
                r.headers
                    .insert(common::text("h"), Some(Bytes::from_static(b"1")));
            }
            r
        })
        .collect()
}

fn batch(records: &[kafka_protocol::records::Record], compression: Compression) -> Bytes {
    encode_batch(records, compression).unwrap()
}

/// A Produce (acks=all) of each `(topic, partition, batch)` in turn, one topic entry each.
fn produce_request(batches: Vec<(&str, i32, Bytes)>) -> ProduceRequest {
    let topics = batches.into_iter().map(|(topic, partition, records)| {
        TopicProduceData::default()
            .with_name(common::name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])
    });
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(topics.collect())
}

/// The digests of each batch of Produce entry `seq`, in request order.
fn digests_of(cluster: &Cluster, seq: u64) -> Vec<Option<Vec<RecordDigest>>> {
    let batches = cluster.journal().produce_batches();
    let of_entry = batches.iter().filter(|b| b.entry.seq == seq);
    of_entry.map(|b| b.batch.digests.clone()).collect()
}

/// The uncompressed batches whose digests the journal computes when read: a partition named
/// twice (the first entry walked, not appended), one stored in a LogAppendTime topic (its
/// header rewritten), one refused after the walk (MESSAGE_TOO_LARGE: the request's copy), a
/// duplicate of an idempotent batch (not stored: the request's copy), mixed with compressed
/// batches (digests from the walk). Each has the digests the same records have compressed,
/// which the walk computes as before.
#[tokio::test]
async fn deferred_digests_are_those_of_the_same_records_walked_compressed() -> anyhow::Result<()> {
    let (cluster, client) = common::start(1, &["t"], 3).await?;
    common::create_topic_with_configs(
        &client,
        "stamped",
        1,
        &[("message.timestamp.type", "LogAppendTime")],
    )
    .await?;
    common::create_topic_with_configs(&client, "small", 1, &[("max.message.bytes", "100")]).await?;
    // Each of at least 8 records (kmock's `DEFERRED_FROM_RECORDS`): uncompressed, their digests
    // are computed when the journal is read.
    let sets = [
        records("a", 8),
        records("b", 9),
        records("d", 10),
        records("e", 11),
    ];
    let plain: Vec<Bytes> = sets.iter().map(|r| batch(r, Compression::None)).collect();
    let lz4: Vec<Bytes> = sets.iter().map(|r| batch(r, Compression::Lz4)).collect();

    // The oracle: the same records compressed, to one partition (each entry walked).
    let oracle = produce_request(lz4.iter().map(|b| ("t", 2, b.clone())).collect());
    client.send(oracle, 9).await?;
    let expected: Vec<_> = digests_of(&cluster, cluster.journal().entries().last().unwrap().seq);
    ensure!(expected.iter().all(Option::is_some), "{expected:?}");

    let mixed = produce_request(vec![
        ("t", 0, plain[0].clone()),
        ("t", 1, lz4[0].clone()),
        ("t", 0, plain[1].clone()),
        ("stamped", 0, plain[2].clone()),
        ("small", 0, plain[3].clone()),
    ]);
    let answer = client.send(mixed, 9).await?;
    let codes: Vec<i16> = answer
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
        .collect();
    let too_large = kmock::ResponseError::MessageTooLarge.code();
    common::same("the answers", codes, vec![0, 0, 0, too_large])?;
    let seq = cluster.journal().entries().last().unwrap().seq;
    common::same(
        "the mixed request's digests",
        digests_of(&cluster, seq),
        vec![
            expected[0].clone(),
            expected[0].clone(),
            expected[1].clone(),
            expected[2].clone(),
            expected[3].clone(),
        ],
    )?;

    // An idempotent batch, then its duplicate (answered with the original's offset).
    let init = InitProducerIdRequest::default()
        .with_transaction_timeout_ms(-1)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let producer = client.send(init, 4).await?;
    let idempotent: Vec<_> = sets[3]
        .iter()
        .enumerate()
        .map(|(i, r)| kafka_protocol::records::Record {
            producer_id: producer.producer_id.0,
            producer_epoch: producer.producer_epoch,
            sequence: i as i32,
            ..r.clone()
        })
        .collect();
    for _ in 0..2 {
        let request = produce_request(vec![("t", 0, batch(&idempotent, Compression::None))]);
        let answer = client.send(request, 9).await?;
        common::code_is(
            "idempotent",
            answer.responses[0].partition_responses[0].error_code,
            None,
        )?;
        let seq = cluster.journal().entries().last().unwrap().seq;
        common::same(
            "its digests",
            digests_of(&cluster, seq),
            vec![expected[3].clone()],
        )?;
    }
    Ok(())
}
