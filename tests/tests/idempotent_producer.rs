//! Kafka's idempotent producer rules over real sockets: duplicates are answered with the
//! original offset and stored once, gaps and stale epochs are refused and not stored.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest, TopicName};
use kafka_protocol::records::{Compression, Record};
use kafka_protocol::ResponseError;
use kmock::{Cluster, KafkaVersion};
use kmock_client::{decode_records, encode_batch, record, Client};

/// One batch of `count` records from producer `pid` at `epoch`, starting at `first_seq`.
fn idempotent_batch(pid: i64, epoch: i16, first_seq: i32, count: usize) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            producer_id: pid,
            producer_epoch: epoch,
            sequence: first_seq + i as i32,
            ..record(b"k", format!("seq-{}", first_seq + i as i32).as_bytes())
        })
        .collect();
    encode_batch(&records, Compression::None).unwrap()
}

/// Produces `batch` to t-0 and returns (error code, base offset), at Produce v8 (Kafka 2.4's
/// highest, so that the cluster emulating 2.4 serves it too).
async fn produce(client: &Client, batch: Bytes) -> (i16, i64) {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName("t".to_string().into()))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let answer = client.send(request, 8).await.unwrap();
    let p = &answer.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

async fn stored_values(client: &Client) -> Vec<String> {
    let fetched = client
        .fetch("t", 0, 0, Duration::from_millis(10))
        .await
        .unwrap();
    let records = fetched.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default();
    decode_records(&records)
        .unwrap()
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

async fn setup(version: KafkaVersion) -> (Cluster, Client, i64) {
    let cluster = Cluster::builder()
        .topic("t", 1)
        .kafka_version(version)
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let init = client
        .send(
            InitProducerIdRequest::default().with_transactional_id(None),
            // Kafka 2.4's highest.
            2,
        )
        .await
        .unwrap();
    assert_eq!(init.error_code, 0);
    assert_eq!(init.producer_epoch, 0);
    (cluster, client, init.producer_id.0)
}

#[tokio::test]
async fn a_retried_batch_gets_its_original_offset_and_is_stored_once() {
    let (_cluster, client, pid) = setup(KafkaVersion::LATEST).await;
    assert_eq!(
        produce(&client, idempotent_batch(pid, 0, 0, 3)).await,
        (0, 0)
    );
    assert_eq!(
        produce(&client, idempotent_batch(pid, 0, 3, 2)).await,
        (0, 3)
    );
    assert_eq!(
        produce(&client, idempotent_batch(pid, 0, 0, 3)).await,
        (0, 0),
        "retry of the first batch"
    );
    assert_eq!(
        produce(&client, idempotent_batch(pid, 0, 3, 2)).await,
        (0, 3),
        "retry of the second batch"
    );
    assert_eq!(
        stored_values(&client).await,
        ["seq-0", "seq-1", "seq-2", "seq-3", "seq-4"]
    );
}

#[tokio::test]
async fn a_batch_after_a_gap_gets_out_of_order_sequence_number_and_is_not_stored() {
    let (_cluster, client, pid) = setup(KafkaVersion::LATEST).await;
    assert_eq!(produce(&client, idempotent_batch(pid, 0, 0, 2)).await.0, 0);
    let (error, _) = produce(&client, idempotent_batch(pid, 0, 3, 1)).await;
    assert_eq!(
        error,
        ResponseError::OutOfOrderSequenceNumber.code(),
        "sequence 3 after 0..=1 skips 2"
    );
    assert_eq!(stored_values(&client).await, ["seq-0", "seq-1"]);
}

#[tokio::test]
async fn a_batch_from_an_older_epoch_gets_invalid_producer_epoch() {
    let (_cluster, client, pid) = setup(KafkaVersion::LATEST).await;
    assert_eq!(produce(&client, idempotent_batch(pid, 1, 0, 1)).await.0, 0);
    let (error, _) = produce(&client, idempotent_batch(pid, 0, 1, 1)).await;
    assert_eq!(error, ResponseError::InvalidProducerEpoch.code());
    assert_eq!(stored_values(&client).await, ["seq-0"]);
}

#[tokio::test]
async fn a_first_batch_not_at_zero_is_accepted_from_2_5_and_unknown_producer_id_before() {
    let (_cluster, client, pid) = setup(KafkaVersion::LATEST).await;
    assert_eq!(
        produce(&client, idempotent_batch(pid, 0, 7, 1)).await.0,
        0,
        "KIP-360: no state, any sequence"
    );
    let (_cluster, client, pid) = setup(KafkaVersion::new(2, 4)).await;
    let (error, _) = produce(&client, idempotent_batch(pid, 0, 7, 1)).await;
    assert_eq!(
        error,
        ResponseError::UnknownProducerId.code(),
        "Kafka 2.4 answers UNKNOWN_PRODUCER_ID"
    );
}
