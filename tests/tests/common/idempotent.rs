//! Idempotent Produce requests as a producer sends them: one record batch carrying a producer
//! id, an epoch and a first sequence, to partition 0 of a topic.

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TransactionalId};
use kafka_protocol::records::{Compression, Record};
use kmock_client::{encode_batch, record};

use super::{name, text};

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
    producer_batch(topic, 0, (producer_id, epoch), first, count, None)
}

/// A Produce request (acks=all, 5 s timeout) holding one uncompressed batch of `count`
/// records `k`=`v` from `producer_id` at `epoch`, sequences `first..first + count`, for
/// `topic`-`partition`; with a `transactional_id`, the request names it and the batch is
/// transactional.
pub fn producer_batch(
    topic: &str,
    partition: i32,
    (producer_id, epoch): (i64, i16),
    first: i32,
    count: usize,
    transactional_id: Option<&str>,
) -> ProduceRequest {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            producer_id,
            producer_epoch: epoch,
            sequence: first + i as i32,
            transactional: transactional_id.is_some(),
            ..record(b"k", b"v")
        })
        .collect();
    let bytes: Bytes = encode_batch(&records, Compression::None).expect("an encodable batch");
    ProduceRequest::default()
        .with_transactional_id(transactional_id.map(|id| TransactionalId(text(id))))
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(bytes))])])
}
