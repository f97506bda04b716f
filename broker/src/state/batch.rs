//! Record batch v2 (magic 2) validation and the stored form of a batch.
//!
//! A produce request carries each partition's records as raw bytes. kmock keeps every batch as
//! the client sent it (compressed or not), only rewriting the fields the broker owns: the base
//! offset and the partition leader epoch (outside the CRC), and for a topic with
//! `message.timestamp.type=LogAppendTime` the timestamp type bit and max timestamp (with a new
//! CRC), as Kafka's `LogValidator` does. Those fields all sit in the 61-byte header, so only the
//! header is copied: large records stay in the buffer the request arrived in ([`StoredBytes`]).
//!
//! Records are decoded with the `kafka-protocol` crate; this file reads only the fixed-offset
//! fields of the v2 batch header.
//!
//! Deviation from Apache Kafka: a compressed batch that inflates beyond 256 MiB is refused with
//! INVALID_RECORD (the vendored codec's bound, `vendor/README.md`), where Kafka, decompressing
//! record by record, sets no limit.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::records::RecordBatchDecoder;
use kafka_protocol::ResponseError;

use crate::connection::READ_BUFFER_BYTES;

/// Byte offsets of the record batch v2 header fields.
mod at {
    pub const BASE_OFFSET: usize = 0;
    pub const BATCH_LENGTH: usize = 8;
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
    pub const LAST_OFFSET_DELTA: usize = 23;
    pub const MAX_TIMESTAMP: usize = 35;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const RECORD_COUNT: usize = 57;
    /// Size of the header, and so of the smallest valid batch.
    pub const RECORDS: usize = 61;
}

const COMPRESSION_MASK: i16 = 0x07;
const ZSTD: i16 = 4;
const TIMESTAMP_TYPE_LOG_APPEND: i16 = 1 << 3;
const TRANSACTIONAL: i16 = 1 << 4;
const CONTROL: i16 = 1 << 5;

/// Why a partition's records were refused, with the Kafka error the partition is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBatch {
    /// The Kafka error: CORRUPT_MESSAGE for a CRC mismatch or a header too short, INVALID_RECORD
    /// for everything else (as Kafka's `ProduceRequest.validateRecords` and `LogValidator`).
    pub error: ResponseError,
    /// A sentence saying what is wrong, sent back as the partition's error message.
    pub reason: String,
}

impl InvalidBatch {
    fn new(error: ResponseError, reason: impl Into<String>) -> Self {
        Self {
            error,
            reason: reason.into(),
        }
    }
}

/// The header fields of one validated batch (everything the broker and journal need).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    /// Number of records in the batch.
    pub record_count: i32,
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
}

/// A batch that passed validation, still as the client sent it.
#[derive(Debug, Clone)]
pub struct ValidBatch {
    /// Header fields.
    pub info: BatchInfo,
    bytes: Bytes,
}

/// What a partition's topic and the request version allow.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// The topic's `max.message.bytes`: a larger batch is MESSAGE_TOO_LARGE.
    pub max_message_bytes: usize,
    /// Whether zstd is allowed (Produce v7+, KIP-110); else UNSUPPORTED_COMPRESSION_TYPE.
    pub zstd_allowed: bool,
    /// Whether every record needs a key (`cleanup.policy` with `compact`).
    pub key_required: bool,
}

/// Validates the `records` bytes of one partition of a Produce request (v3+).
///
/// Checks, as Kafka's `ProduceRequest.validateRecords`, `UnifiedLog.analyzeAndValidateRecords`
/// and `LogValidator` do: exactly one batch, whose length field matches the bytes; magic 2;
/// zstd only from Produce v7; base offset 0; at most `max.message.bytes`; the CRC-32C; a known
/// compression codec; no control batch from a client; a record count of at least one that
/// matches the last offset delta and the records inside, which must decode; a key on every
/// record of a compacted topic.
///
/// # Errors
/// [`InvalidBatch`] naming the first check that failed.
pub fn validate(records: &Bytes, rules: &Rules) -> Result<ValidBatch, InvalidBatch> {
    use ResponseError::{CorruptMessage, InvalidRecord};
    if records.len() < at::RECORDS {
        return Err(InvalidBatch::new(
            CorruptMessage,
            format!(
                "record batch of {} bytes is shorter than its 61-byte header",
                records.len()
            ),
        ));
    }
    let batch_length = read_i32(records, at::BATCH_LENGTH);
    if usize::try_from(batch_length).map(|n| n + at::PARTITION_LEADER_EPOCH) != Ok(records.len()) {
        return Err(InvalidBatch::new(
            InvalidRecord,
            format!(
                "produce records must hold exactly one record batch: batch length {batch_length} + 12 != {} bytes",
                records.len()
            ),
        ));
    }
    let magic = records[at::MAGIC] as i8;
    if magic != 2 {
        return Err(InvalidBatch::new(
            InvalidRecord,
            format!("record batch magic {magic} is not 2 (produce v3+ takes only magic 2)"),
        ));
    }
    if attributes_of(records) & COMPRESSION_MASK == ZSTD && !rules.zstd_allowed {
        return Err(InvalidBatch::new(
            ResponseError::UnsupportedCompressionType,
            "zstd-compressed batches need Produce v7 or later",
        ));
    }
    let base_offset = read_i64(records, at::BASE_OFFSET);
    if base_offset != 0 {
        return Err(InvalidBatch::new(
            InvalidRecord,
            format!("the base offset of a client's record batch must be 0, not {base_offset}"),
        ));
    }
    if records.len() > rules.max_message_bytes {
        return Err(InvalidBatch::new(
            ResponseError::MessageTooLarge,
            format!(
                "record batch of {} bytes is larger than max.message.bytes {}",
                records.len(),
                rules.max_message_bytes
            ),
        ));
    }
    // The decoder checks the CRC before it decodes anything, so a batch that decodes has a valid
    // CRC; only when decoding fails is the CRC computed here, to answer CORRUPT_MESSAGE ahead of
    // the checks that follow it in Kafka's order. A valid batch's CRC is computed once.
    let decoded = RecordBatchDecoder::decode(&mut records.clone());
    if decoded.is_err() {
        let stored_crc = read_u32(records, at::CRC);
        let actual_crc = crc32c::crc32c(&records[at::ATTRIBUTES..]);
        if stored_crc != actual_crc {
            return Err(InvalidBatch::new(
                CorruptMessage,
                format!("record batch CRC {stored_crc:#010x} does not match its contents ({actual_crc:#010x})"),
            ));
        }
    }
    let attributes = attributes_of(records);
    if attributes & COMPRESSION_MASK > ZSTD {
        return Err(InvalidBatch::new(
            InvalidRecord,
            format!(
                "unknown compression codec {}",
                attributes & COMPRESSION_MASK
            ),
        ));
    }
    if attributes & CONTROL != 0 {
        return Err(InvalidBatch::new(
            InvalidRecord,
            "clients may not write control batches",
        ));
    }
    let record_count = read_i32(records, at::RECORD_COUNT);
    let last_offset_delta = read_i32(records, at::LAST_OFFSET_DELTA);
    if record_count < 1 || last_offset_delta != record_count - 1 {
        return Err(InvalidBatch::new(
            InvalidRecord,
            format!(
                "record count {record_count} does not match last offset delta {last_offset_delta}"
            ),
        ));
    }
    let decoded = decoded
        .map_err(|e| InvalidBatch::new(InvalidRecord, format!("records do not decode: {e}")))?;
    let offsets_in_order = decoded
        .records
        .iter()
        .enumerate()
        .all(|(i, r)| r.offset == base_offset + i as i64);
    if decoded.records.len() != record_count as usize || !offsets_in_order {
        return Err(InvalidBatch::new(
            InvalidRecord,
            format!(
                "batch says {record_count} records but holds {} with offset deltas in order: {offsets_in_order}",
                decoded.records.len()
            ),
        ));
    }
    if rules.key_required && decoded.records.iter().any(|r| r.key.is_none()) {
        return Err(InvalidBatch::new(
            InvalidRecord,
            "compacted topic cannot accept a record without a key",
        ));
    }
    Ok(ValidBatch {
        info: header(records).expect("checked above: at least a whole header"),
        bytes: records.clone(),
    })
}

/// The header fields of the first batch in `records`, without any validation; `None` when the
/// bytes are shorter than a batch header. For the journal, which records what the client sent
/// even when the broker refuses it.
pub fn header(records: &[u8]) -> Option<BatchInfo> {
    (records.len() >= at::RECORDS).then(|| BatchInfo {
        record_count: read_i32(records, at::RECORD_COUNT),
        max_timestamp: read_i64(records, at::MAX_TIMESTAMP),
        producer_id: read_i64(records, at::PRODUCER_ID),
        producer_epoch: read_i16(records, at::PRODUCER_EPOCH),
        base_sequence: read_i32(records, at::BASE_SEQUENCE),
        transactional: read_i16(records, at::ATTRIBUTES) & TRANSACTIONAL != 0,
    })
}

impl ValidBatch {
    /// The batch to store: base offset and partition leader epoch set by the broker, and with
    /// `log_append_time_ms` the LogAppendTime bit, max timestamp and CRC rewritten. Only the
    /// header is copied, and records under 64 KiB.
    pub fn into_stored_bytes(
        self,
        base_offset: i64,
        leader_epoch: i32,
        log_append_time_ms: Option<i64>,
    ) -> StoredBytes {
        let mut header = [0; at::RECORDS];
        header.copy_from_slice(&self.bytes[..at::RECORDS]);
        let records = self.bytes.slice(at::RECORDS..);
        // Records smaller than a connection's read buffer are copied into their own allocation,
        // so that a small batch does not keep alive a whole buffer of other requests; larger
        // ones arrived in a buffer of about their own size and stay in it, uncopied.
        let records = if records.len() < READ_BUFFER_BYTES {
            Bytes::copy_from_slice(&records)
        } else {
            records
        };
        header[at::BASE_OFFSET..at::BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
        header[at::PARTITION_LEADER_EPOCH..at::PARTITION_LEADER_EPOCH + 4]
            .copy_from_slice(&leader_epoch.to_be_bytes());
        if let Some(now) = log_append_time_ms {
            let attributes = read_i16(&header, at::ATTRIBUTES) | TIMESTAMP_TYPE_LOG_APPEND;
            header[at::ATTRIBUTES..at::ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
            header[at::MAX_TIMESTAMP..at::MAX_TIMESTAMP + 8].copy_from_slice(&now.to_be_bytes());
            // The CRC covers everything from the attributes to the end of the batch.
            let crc = crc32c::crc32c_append(crc32c::crc32c(&header[at::ATTRIBUTES..]), &records);
            header[at::CRC..at::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        }
        StoredBytes { header, records }
    }
}

/// A batch as a partition log keeps it: the 61-byte header with the broker's fields written in,
/// then the records as the client sent them — from 64 KiB on ([`READ_BUFFER_BYTES`]) shared with
/// the buffer the request arrived in, not copied. A read copies them once into its answer.
#[derive(Debug, Clone)]
pub struct StoredBytes {
    header: [u8; at::RECORDS],
    records: Bytes,
}

impl StoredBytes {
    /// The size of the whole batch, in bytes.
    pub fn size(&self) -> usize {
        at::RECORDS + self.records.len()
    }

    /// Appends the whole batch, header then records, to `out`.
    pub fn write_to(&self, out: &mut BytesMut) {
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&self.records);
    }

    /// The whole batch in one buffer (a copy).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.size());
        self.write_to(&mut out);
        out.freeze()
    }
}

fn attributes_of(records: &[u8]) -> i16 {
    read_i16(records, at::ATTRIBUTES)
}

fn read_i16(b: &[u8], at: usize) -> i16 {
    (&b[at..]).get_i16()
}

fn read_i32(b: &[u8], at: usize) -> i32 {
    (&b[at..]).get_i32()
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    (&b[at..]).get_u32()
}

fn read_i64(b: &[u8], at: usize) -> i64 {
    (&b[at..]).get_i64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::{Compression, TimestampType};

    const RULES: Rules = Rules {
        max_message_bytes: 1_048_588,
        zstd_allowed: true,
        key_required: false,
    };

    fn batch(count: usize) -> Bytes {
        let records: Vec<_> = (0..count)
            .map(|i| kafka_protocol::records::Record {
                timestamp: 1_000 + i as i64,
                ..kmock_client::record(b"k", b"0123456789")
            })
            .collect();
        kmock_client::encode_batch(&records, Compression::Gzip).unwrap()
    }

    #[test]
    fn a_snappy_batch_claiming_gigabytes_is_refused_before_allocating() {
        use bytes::BufMut;
        let mut bytes = BytesMut::from(&batch(1)[..at::RECORDS]);
        let attributes = (read_i16(&bytes, at::ATTRIBUTES) & !COMPRESSION_MASK) | 2; // snappy
        (&mut bytes[at::ATTRIBUTES..]).put_i16(attributes);
        // A raw snappy stream whose header claims 2^32 - 1 bytes.
        bytes.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00]);
        let length = bytes.len() as i32 - 12;
        (&mut bytes[at::BATCH_LENGTH..]).put_i32(length);
        let crc = crc32c::crc32c(&bytes[at::ATTRIBUTES..]);
        (&mut bytes[at::CRC..]).put_u32(crc);
        let refused = validate(&bytes.freeze(), &RULES).unwrap_err();
        assert_eq!(refused.error, ResponseError::InvalidRecord);
        assert!(
            refused.reason.contains("claims 4294967295 bytes"),
            "{}",
            refused.reason
        );
    }

    #[test]
    fn a_well_formed_batch_is_accepted_with_its_header_fields() {
        let valid = validate(&batch(3), &RULES).unwrap();
        assert_eq!(valid.info.record_count, 3);
        assert_eq!(valid.info.max_timestamp, 1_002);
        assert_eq!(valid.info.producer_id, -1);
    }

    #[test]
    fn a_flipped_byte_fails_the_crc_with_corrupt_message() {
        let mut bytes = BytesMut::from(&batch(2)[..]);
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let err = validate(&bytes.freeze(), &RULES).unwrap_err();
        assert_eq!(err.error, ResponseError::CorruptMessage, "{}", err.reason);
    }

    #[test]
    fn a_corrupted_header_fails_the_crc_before_the_checks_after_it() {
        // The flipped bit makes it a control batch, which Kafka checks only after the CRC.
        let mut bytes = BytesMut::from(&batch(2)[..]);
        bytes[at::ATTRIBUTES + 1] ^= CONTROL as u8;
        let err = validate(&bytes.freeze(), &RULES).unwrap_err();
        assert_eq!(err.error, ResponseError::CorruptMessage, "{}", err.reason);
    }

    #[test]
    fn a_client_base_offset_other_than_zero_is_an_invalid_record() {
        let mut bytes = BytesMut::from(&batch(1)[..]);
        bytes[..8].copy_from_slice(&5i64.to_be_bytes());
        let err = validate(&bytes.freeze(), &RULES).unwrap_err();
        assert_eq!(err.error, ResponseError::InvalidRecord, "{}", err.reason);
    }

    #[test]
    fn a_batch_over_max_message_bytes_is_message_too_large() {
        let rules = Rules {
            max_message_bytes: 64,
            ..RULES
        };
        let err = validate(&batch(3), &rules).unwrap_err();
        assert_eq!(err.error, ResponseError::MessageTooLarge, "{}", err.reason);
    }

    #[test]
    fn zstd_before_produce_v7_is_an_unsupported_compression_type() {
        let records = [kmock_client::record(b"k", b"v")];
        let zstd = kmock_client::encode_batch(&records, Compression::Zstd).unwrap();
        let rules = Rules {
            zstd_allowed: false,
            ..RULES
        };
        let err = validate(&zstd, &rules).unwrap_err();
        assert_eq!(
            err.error,
            ResponseError::UnsupportedCompressionType,
            "{}",
            err.reason
        );
        assert!(validate(&zstd, &RULES).is_ok());
    }

    #[test]
    fn a_compacted_topic_refuses_a_record_without_key() {
        let records = [kafka_protocol::records::Record {
            key: None,
            ..kmock_client::record(b"k", b"v")
        }];
        let keyless = kmock_client::encode_batch(&records, Compression::None).unwrap();
        let rules = Rules {
            key_required: true,
            ..RULES
        };
        assert_eq!(
            validate(&keyless, &rules).unwrap_err().error,
            ResponseError::InvalidRecord
        );
        assert!(
            validate(&batch(1), &rules).is_ok(),
            "records with keys are fine"
        );
    }

    #[test]
    fn two_batches_in_one_partition_are_an_invalid_record() {
        let mut bytes = BytesMut::from(&batch(1)[..]);
        bytes.extend_from_slice(&batch(1));
        let err = validate(&bytes.freeze(), &RULES).unwrap_err();
        assert_eq!(err.error, ResponseError::InvalidRecord, "{}", err.reason);
    }

    #[test]
    fn stored_bytes_carry_the_broker_offset_and_a_valid_crc_for_log_append_time() {
        assert_stored_with_broker_fields(&batch(2));
    }

    #[test]
    fn a_batch_of_64_kib_or_more_keeps_its_records_where_they_arrived() {
        let records: Vec<_> = (0..70)
            .map(|_| kmock_client::record(b"k", &[7; 1000]))
            .collect();
        let large = kmock_client::encode_batch(&records, Compression::None).unwrap();
        assert!(large.len() - at::RECORDS >= READ_BUFFER_BYTES);
        let stored = validate(&large, &RULES)
            .unwrap()
            .into_stored_bytes(0, 0, None);
        assert_eq!(
            stored.records.as_ptr(),
            large[at::RECORDS..].as_ptr(),
            "not copied"
        );
        assert_stored_with_broker_fields(&large);
    }

    /// Stores `client_batch` at offset 42, leader epoch 7, LogAppendTime 9999, and checks every
    /// field the broker owns and that the result decodes with a valid CRC.
    fn assert_stored_with_broker_fields(client_batch: &Bytes) {
        let stored = validate(client_batch, &RULES)
            .unwrap()
            .into_stored_bytes(42, 7, Some(9_999));
        assert_eq!(stored.size(), client_batch.len());
        let stored = stored.to_bytes();
        assert_eq!(read_i64(&stored, at::BASE_OFFSET), 42);
        assert_eq!(read_i32(&stored, at::PARTITION_LEADER_EPOCH), 7);
        let decoded = RecordBatchDecoder::decode(&mut stored.clone()).unwrap();
        assert_eq!(decoded.records[1].offset, 43);
        assert_eq!(decoded.records[1].timestamp_type, TimestampType::LogAppend);
        // Readers take a LogAppendTime batch's max timestamp as every record's timestamp.
        assert_eq!(read_i64(&stored, at::MAX_TIMESTAMP), 9_999);
        assert_eq!(
            read_u32(&stored, at::CRC),
            crc32c::crc32c(&stored[at::ATTRIBUTES..]),
            "CRC rewritten"
        );
        assert_eq!(
            &stored[at::RECORDS..],
            &client_batch[at::RECORDS..],
            "records as sent"
        );
    }
}
