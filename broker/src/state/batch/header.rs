//! The fixed-offset fields of the record batch v2 header (Kafka's `DefaultRecordBatch`).

use bytes::Buf;

/// Byte offsets of the record batch v2 header fields.
pub(super) mod at {
    pub const BASE_OFFSET: usize = 0;
    pub const BATCH_LENGTH: usize = 8;
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
    pub const LAST_OFFSET_DELTA: usize = 23;
    pub const BASE_TIMESTAMP: usize = 27;
    pub const MAX_TIMESTAMP: usize = 35;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const RECORD_COUNT: usize = 57;
    /// Size of the header, and so of the smallest valid batch.
    pub const RECORDS: usize = 61;
}

/// The codec bits of the batch attributes.
pub(super) const COMPRESSION_MASK: i16 = 0x07;
/// Codec numbers, as Kafka's `CompressionType` ids.
pub(super) const NONE: i16 = 0;
pub(super) const GZIP: i16 = 1;
pub(super) const SNAPPY: i16 = 2;
pub(super) const LZ4: i16 = 3;
pub(super) const ZSTD: i16 = 4;
pub(super) const TIMESTAMP_TYPE_LOG_APPEND: i16 = 1 << 3;
pub(super) const TRANSACTIONAL: i16 = 1 << 4;
pub(super) const CONTROL: i16 = 1 << 5;

/// The header fields of one batch (everything the broker and journal need).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    /// Number of records in the batch.
    pub record_count: i32,
    /// Timestamp of the first record as the client set it (the header's base timestamp), in
    /// ms since the epoch.
    pub first_timestamp: i64,
    /// Largest record timestamp as the client set it, in ms since the epoch.
    pub max_timestamp: i64,
    /// Producer id, -1 for a non-idempotent producer.
    pub producer_id: i64,
    /// Producer epoch, -1 for a non-idempotent producer.
    pub producer_epoch: i16,
    /// Sequence number of the first record, -1 for a non-idempotent producer.
    pub base_sequence: i32,
    /// Whether the batch belongs to a transaction.
    pub transactional: bool,
    /// The batch's CRC-32C field as sent (over everything from the attributes on), unchecked.
    pub crc: u32,
}

/// The header fields of the first batch in `records`, without any validation; `None` when the
/// bytes are shorter than a batch header. For the journal, which records what the client sent
/// even when the broker refuses it.
pub fn header(records: &[u8]) -> Option<BatchInfo> {
    (records.len() >= at::RECORDS).then(|| BatchInfo {
        record_count: read_i32(records, at::RECORD_COUNT),
        first_timestamp: read_i64(records, at::BASE_TIMESTAMP),
        max_timestamp: read_i64(records, at::MAX_TIMESTAMP),
        producer_id: read_i64(records, at::PRODUCER_ID),
        producer_epoch: read_i16(records, at::PRODUCER_EPOCH),
        base_sequence: read_i32(records, at::BASE_SEQUENCE),
        transactional: read_i16(records, at::ATTRIBUTES) & TRANSACTIONAL != 0,
        crc: read_u32(records, at::CRC),
    })
}

pub(super) fn attributes_of(records: &[u8]) -> i16 {
    read_i16(records, at::ATTRIBUTES)
}

pub(super) fn read_i16(b: &[u8], at: usize) -> i16 {
    (&b[at..]).get_i16()
}

pub(super) fn read_i32(b: &[u8], at: usize) -> i32 {
    (&b[at..]).get_i32()
}

pub(super) fn read_u32(b: &[u8], at: usize) -> u32 {
    (&b[at..]).get_u32()
}

pub(super) fn read_i64(b: &[u8], at: usize) -> i64 {
    (&b[at..]).get_i64()
}
