//! Convenience calls for the common APIs, plus record batch helpers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    fetch_request::{FetchPartition, FetchTopic},
    metadata_request::MetadataRequestTopic,
    produce_request::{PartitionProduceData, TopicProduceData},
};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::{Client, Error};

/// ApiVersions version used by [`Client::api_versions`].
pub const API_VERSIONS_VERSION: i16 = 3;
/// Metadata version used by [`Client::metadata`].
pub const METADATA_VERSION: i16 = 12;
/// Produce version used by [`Client::produce`].
pub const PRODUCE_VERSION: i16 = 9;
/// Fetch version used by [`Client::fetch`].
pub const FETCH_VERSION: i16 = 12;

/// `timeout_ms` sent by [`Client::produce`]: 5000 ms.
pub const PRODUCE_TIMEOUT_MS: i32 = 5000;
/// `max_bytes` sent by [`Client::fetch`]: 50 MiB.
pub const FETCH_MAX_BYTES: i32 = 50 * 1024 * 1024;
/// `partition_max_bytes` sent by [`Client::fetch`]: 1 MiB.
pub const FETCH_PARTITION_MAX_BYTES: i32 = 1024 * 1024;

impl Client {
    /// Sends ApiVersions v3 with `client_software_name = "kmock-client"` and
    /// `client_software_version` = this crate's version, and returns the
    /// decoded response (response header v0, as for every ApiVersions).
    ///
    /// A broker that does not support v3 answers with a v0 body, which does
    /// not decode as v3 ([`Error::Decode`]); use [`Client::send_raw`] to
    /// test that fallback.
    ///
    /// # Errors
    /// As [`Client::send`].
    pub async fn api_versions(&self) -> Result<ApiVersionsResponse, Error> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("kmock-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        self.send(request, API_VERSIONS_VERSION).await
    }

    /// Sends Metadata v12 for `topics` and returns the decoded response.
    ///
    /// `None` asks for all topics (null topic array); `Some(&[])` asks for
    /// no topics (brokers only); `Some(names)` asks for those topics by name.
    /// `allow_auto_topic_creation` is false and no authorized operations are
    /// requested.
    ///
    /// # Errors
    /// As [`Client::send`].
    pub async fn metadata(&self, topics: Option<&[&str]>) -> Result<MetadataResponse, Error> {
        let topics = topics.map(|names| {
            names
                .iter()
                .map(|name| MetadataRequestTopic::default().with_name(Some(topic_name(name))))
                .collect()
        });
        let request = MetadataRequest::default()
            .with_topics(topics)
            .with_allow_auto_topic_creation(false)
            .with_include_topic_authorized_operations(false);
        self.send(request, METADATA_VERSION).await
    }

    /// Produces `records` to `topic`/`partition` with Produce v9: the
    /// records are encoded by [`encode_batch`] as one uncompressed v2 record
    /// batch; `timeout_ms` is 5000, no transactional id.
    ///
    /// `acks` is sent as given (`0`, `1` or `-1`, or anything else for
    /// negative tests). With `acks == 0` the broker sends no response, so the
    /// request is written with [`Client::send_no_response`] and an empty
    /// `ProduceResponse::default()` is returned as soon as it is written.
    ///
    /// # Errors
    /// [`Error::Encode`] if the batch cannot be encoded, otherwise as
    /// [`Client::send`] (or [`Client::send_no_response`] for `acks == 0`).
    pub async fn produce(
        &self,
        topic: &str,
        partition: i32,
        records: &[Record],
        acks: i16,
    ) -> Result<ProduceResponse, Error> {
        let batch = encode_batch(records, Compression::None)?;
        let request = ProduceRequest::default()
            .with_transactional_id(None)
            .with_acks(acks)
            .with_timeout_ms(PRODUCE_TIMEOUT_MS)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch))])]);
        if acks == 0 {
            self.send_no_response(request, PRODUCE_VERSION).await?;
            Ok(ProduceResponse::default())
        } else {
            self.send(request, PRODUCE_VERSION).await
        }
    }

    /// Fetches `topic`/`partition` from `offset` with Fetch v12 (topic by
    /// name) and returns the decoded response; decode the partition's
    /// `records` with [`decode_records`].
    ///
    /// `max_wait` is sent as `max_wait_ms` (whole milliseconds, saturating at
    /// `i32::MAX`). Other fields: `min_bytes` 1, `max_bytes` 50 MiB,
    /// `partition_max_bytes` 1 MiB, isolation level 0 (read uncommitted),
    /// session id 0, session epoch -1 (no fetch session), replica id -1,
    /// current leader epoch -1, log start offset -1.
    ///
    /// # Errors
    /// As [`Client::send`].
    pub async fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_wait: Duration,
    ) -> Result<FetchResponse, Error> {
        let max_wait_ms = i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX);
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_current_leader_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(FETCH_PARTITION_MAX_BYTES)])]);
        self.send(request, FETCH_VERSION).await
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// Encodes `records` as exactly one v2 record batch with `compression`,
/// ready to put in a Produce request's partition `records` field.
///
/// Batch-level fields (transactional, control, delete horizon, partition
/// leader epoch, producer id, producer epoch) are taken from the first
/// record. Offsets are renumbered `0..n` (base offset 0, offset deltas
/// `0..n`) and the base sequence is the first record's `sequence` (-1 = no
/// sequence); the other records' `offset`/`sequence` fields are ignored.
/// Key, value, headers and timestamps are kept. An empty slice encodes to
/// empty bytes (no batch).
///
/// # Errors
/// [`Error::Encode`] if kafka-protocol cannot encode the batch (e.g. the
/// compression codec is not compiled in).
pub fn encode_batch(records: &[Record], compression: Compression) -> Result<Bytes, Error> {
    let Some(first) = records.first() else {
        return Ok(Bytes::new());
    };
    // RecordBatchEncoder starts a new batch whenever a batch-level field or
    // `offset - sequence` changes, and derives offset deltas from `offset`;
    // normalize so that everything lands in one well-formed batch.
    let normalized: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let i32_index = i32::try_from(i).unwrap_or(i32::MAX);
            Record {
                transactional: first.transactional,
                control: first.control,
                delete_horizon: first.delete_horizon,
                partition_leader_epoch: first.partition_leader_epoch,
                producer_id: first.producer_id,
                producer_epoch: first.producer_epoch,
                offset: i as i64,
                sequence: first.sequence.wrapping_add(i32_index),
                ..r.clone()
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &normalized, &options)
        .map_err(|e| Error::Encode(format!("record batch ({compression:?}): {e}")))?;
    Ok(buf.freeze())
}

/// Decodes every record batch in `records` (e.g. a Fetch partition's
/// `records` field, or the output of [`encode_batch`]) and returns all
/// records in order. Record `offset`s are absolute (base offset + delta).
/// Empty input gives an empty vector.
///
/// # Errors
/// [`Error::Decode`] if any batch is malformed, truncated, uses message
/// format v0/v1, or fails its CRC.
pub fn decode_records(records: &Bytes) -> Result<Vec<Record>, Error> {
    let mut buf = records.clone();
    let batches = RecordBatchDecoder::decode_all(&mut buf)
        .map_err(|e| Error::Decode(format!("record batches: {e}")))?;
    Ok(batches.into_iter().flat_map(|set| set.records).collect())
}

/// Builds a plain record with `key` and `value` (both non-null, possibly
/// empty), no headers, timestamp = now (milliseconds since the Unix epoch,
/// `CreateTime`), and the non-transactional defaults [`encode_batch`]
/// expects: producer id -1, producer epoch -1, sequence -1, partition
/// leader epoch 0, offset 0. Set fields on the result for anything else
/// (e.g. `key = None` for a null key).
pub fn record(key: &[u8], value: &[u8]) -> Record {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: Some(Bytes::copy_from_slice(key)),
        value: Some(Bytes::copy_from_slice(value)),
        headers: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordSet;

    fn sample() -> Vec<Record> {
        let mut a = record(b"k1", b"v1");
        a.headers.insert(
            StrBytes::from_static_str("h1"),
            Some(Bytes::from_static(b"x")),
        );
        a.headers
            .insert(StrBytes::from_static_str("null-header"), None);
        let mut b = record(b"", b"value two");
        b.timestamp += 7;
        let mut c = record(b"k3", &[0u8; 300]);
        c.key = None;
        c.headers
            .insert(StrBytes::from_static_str("h3"), Some(Bytes::new()));
        vec![a, b, c]
    }

    #[test]
    fn round_trip_every_compression() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let records = sample();
            let bytes = encode_batch(&records, compression).unwrap();
            // Exactly one batch with the requested codec.
            let sets: Vec<RecordSet> = RecordBatchDecoder::decode_all(&mut bytes.clone()).unwrap();
            assert_eq!(sets.len(), 1, "{compression:?}");
            assert_eq!(sets[0].compression, compression);
            assert_eq!(sets[0].version, 2);

            let decoded = decode_records(&bytes).unwrap();
            assert_eq!(decoded.len(), 3, "{compression:?}");
            for (i, (got, want)) in decoded.iter().zip(&records).enumerate() {
                assert_eq!(got.offset, i as i64, "{compression:?}");
                assert_eq!(got.key, want.key, "{compression:?}");
                assert_eq!(got.value, want.value, "{compression:?}");
                assert_eq!(got.headers, want.headers, "{compression:?}");
                assert_eq!(got.timestamp, want.timestamp, "{compression:?}");
                assert_eq!(got.producer_id, -1);
                assert_eq!(got.producer_epoch, -1);
                assert!(!got.transactional && !got.control);
            }
        }
    }

    #[test]
    fn two_batches_decode_in_order() {
        let mut bytes = BytesMut::new();
        bytes.extend_from_slice(&encode_batch(&[record(b"a", b"1")], Compression::None).unwrap());
        bytes.extend_from_slice(&encode_batch(&[record(b"b", b"2")], Compression::Gzip).unwrap());
        let decoded = decode_records(&bytes.freeze()).unwrap();
        let keys: Vec<_> = decoded.iter().map(|r| r.key.clone().unwrap()).collect();
        assert_eq!(
            keys,
            vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]
        );
    }

    #[test]
    fn empty_and_garbage() {
        assert!(encode_batch(&[], Compression::None).unwrap().is_empty());
        assert!(decode_records(&Bytes::new()).unwrap().is_empty());
        let bytes = encode_batch(&sample(), Compression::None).unwrap();
        let truncated = bytes.slice(..bytes.len() - 1);
        assert!(matches!(decode_records(&truncated), Err(Error::Decode(_))));
    }
}
