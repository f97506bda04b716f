//! Idempotent Produce requests as a producer sends them: one record batch carrying a producer
//! id, an epoch and a first sequence, to partition 0 of a topic.

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::ProduceRequest;
use kafka_protocol::records::{Compression, Record};
use kmock_client::{encode_batch, record};

use super::name;

/// A Produce request (acks=all, 5 s timeout; valid from v3) holding one uncompressed batch of
/// `count` records `k`=`v` from `producer_id` at `epoch`, sequences `first..first + count`,
/// for `topic`-0.
pub fn idempotent_batch(
    topic: &str,
    producer_id: i64,
    epoch: i16,
    first: i32,
    count: usize,
) -> ProduceRequest {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            producer_id,
            producer_epoch: epoch,
            sequence: first + i as i32,
            ..record(b"k", b"v")
        })
        .collect();
    let bytes: Bytes = encode_batch(&records, Compression::None).expect("an encodable batch");
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(bytes))])])
}
