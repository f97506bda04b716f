//! Record batch v2 (magic 2) validation and the stored form of a batch.
//!
//! A produce request carries each partition's records as raw bytes. kmock keeps every batch as
//! the client sent it (compressed or not), only rewriting the fields the broker owns: the base
//! offset and the partition leader epoch (outside the CRC), and for a topic with
//! `message.timestamp.type=LogAppendTime` the timestamp type bit and max timestamp (with a new
//! CRC), as Kafka's `LogValidator` does. Those fields all sit in the 61-byte header, so only the
//! header is copied: large records stay in the buffer the request arrived in ([`StoredBytes`]).
//!
//! Validating a batch is broker logic, so kmock does it itself ([`header`] for the fixed fields,
//! [`records`] for the record walk, [`scan`] for the
//! single pass that checks an uncompressed batch when nothing reads its records, [`decompress`]
//! for the codecs): the records are walked one
//! by one as they decompress, without building a record or inflating the batch, so the memory one
//! batch's validation takes is a buffer, whatever its header claims. `kafka-protocol` decodes
//! messages; its record decoder is left to the Fetch path and the client.
//!
//! Deviations from Apache Kafka:
//! - a compressed batch whose records inflate beyond 256 MiB is refused with INVALID_RECORD
//!   ([`decompress::MAX_DECOMPRESSED_BYTES`], counted while streaming), where Kafka,
//!   decompressing record by record, sets no limit;
//! - a record whose offset delta is not its index is refused with INVALID_RECORD, where Kafka
//!   keeps an uncompressed batch's deltas as sent and rebuilds a compressed batch;
//! - every record's length is checked against its fields as `DefaultRecord.readFrom` does, also
//!   in a compressed batch that Kafka keeps as is and reads with `readPartiallyFrom`, which skips
//!   that check;
//! - a compressed stream that does not decompress is INVALID_RECORD, where Kafka's
//!   `KafkaException` answers UNKNOWN_SERVER_ERROR.

pub mod control;
pub mod decompress;
mod deferred;
pub mod digest;
mod header;
pub mod records;
mod scan;
mod stored;

use bytes::Bytes;
use kafka_protocol::ResponseError;

pub use deferred::{BatchDigests, DeferredDigests};
pub use digest::RecordDigest;
pub use header::{header, BatchInfo};
pub use stored::StoredBytes;

use header::{
    at, attributes_of, read_i32, read_i64, read_u32, COMPRESSION_MASK, CONTROL, NONE, ZSTD,
};
use records::{WalkError, MIN_RECORD_BYTES};

/// A record without a timestamp (Kafka's `RecordBatch.NO_TIMESTAMP`).
const NO_TIMESTAMP: i64 = -1;

/// The smallest size field a batch may have (Kafka's `LegacyRecord.RECORD_OVERHEAD_V0`): the
/// batch readers refuse a smaller one as corrupt.
const LEGACY_RECORD_OVERHEAD_V0: i32 = 14;

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

/// A batch that passed validation, still as the client sent it.
#[derive(Debug, Clone)]
pub struct ValidBatch {
    /// Header fields.
    pub info: BatchInfo,
    /// The smallest and largest record timestamps the client set (base timestamp plus each
    /// record's delta), in ms since the epoch, records without a timestamp (-1) left out; `None`
    /// when no record has one. For the topic's `message.timestamp.before.max.ms` and
    /// `after.max.ms` checks.
    pub record_timestamps: Option<(i64, i64)>,
    bytes: Bytes,
}

impl ValidBatch {
    /// The batch's size in bytes, as it will be stored.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }
}

/// What a partition's topic allows.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// The topic's `max.message.bytes`: a larger batch is MESSAGE_TOO_LARGE.
    pub max_message_bytes: usize,
    /// Whether every record needs a key (`cleanup.policy` with `compact`).
    pub key_required: bool,
}

/// A batch checked as far as it can be without its topic: the result of the work (CRC, record
/// walk), to be finished by [`Inspected::validate`] with the topic's rules. Made outside the
/// cluster state lock ([`inspect`]), so that a large batch does not hold up other requests.
#[derive(Debug, Clone)]
pub struct Inspected {
    records: Bytes,
    /// A failure of the checks Kafka makes before `max.message.bytes`.
    before_size: Option<InvalidBatch>,
    /// A failure of the checks Kafka makes after `max.message.bytes`.
    after_size: Option<InvalidBatch>,
    /// Whether a record has a null key.
    keyless: bool,
    /// The smallest and largest record timestamps ([`ValidBatch::record_timestamps`]).
    record_timestamps: Option<(i64, i64)>,
    /// Every record's digest, when asked for and the records walked ([`digest`]).
    digests: Option<Vec<RecordDigest>>,
}

/// Validates the `records` bytes of one partition of a Produce v7+ request: [`inspect`], then
/// [`Inspected::validate`].
///
/// # Errors
/// [`InvalidBatch`] naming the first check that failed.
#[cfg(test)]
pub fn validate(records: &Bytes, rules: &Rules) -> Result<ValidBatch, InvalidBatch> {
    inspect(records, true, 0).validate(rules)
}

/// Checks the `records` of one partition of a Produce request (v3+) as far as the topic is not
/// needed, in Kafka's order (`ProduceRequest.validateRecords`, `UnifiedLog.
/// analyzeAndValidateRecords`, `LogValidator`): exactly one batch, whose length field matches the
/// bytes; magic 2; zstd only when `zstd_allowed` (Produce v7+); base offset 0; then (after the
/// topic's `max.message.bytes`) the CRC-32C; a known compression codec; no control batch from a
/// client; a record count of at least one that matches the last offset delta and the records
/// inside, walked ([`records::walk`]) as they decompress.
///
/// The same walk computes each record's digest ([`digest::record_digest`]) when the batch
/// has at most `digest_budget` records (none for 0); [`Inspected::take_digests`] hands them
/// over.
pub fn inspect(records: &Bytes, zstd_allowed: bool, digest_budget: usize) -> Inspected {
    let before_size = check_before_size(records, zstd_allowed).err();
    let mut bounds = scan::Bounds::default();
    let base_timestamp = header(records).map_or(0, |h| h.first_timestamp);
    let declared = header(records).map_or(0, |h| h.record_count);
    let mut digests = digest::Collector::new(digest_budget, declared);
    let after_size = match before_size {
        Some(_) => None,
        // No digests to compute: the records need only be checked and their bounds gathered.
        None if digest_budget == 0 => {
            check_after_size_gathering(records, base_timestamp, &mut bounds).err()
        }
        None => check_after_size(records, |record| {
            let timestamp = base_timestamp.wrapping_add(record.timestamp_delta);
            bounds.add(record.key.is_none(), timestamp);
            digests.add(record);
            Ok(())
        })
        .err(),
    };
    let walked = before_size.is_none() && after_size.is_none();
    Inspected {
        records: records.clone(),
        before_size,
        after_size,
        keyless: bounds.keyless,
        record_timestamps: bounds.timestamps(),
        digests: digests.finish(walked),
    }
}

impl Inspected {
    /// Whether the records walked: every check that needs no topic passed.
    pub fn walked(&self) -> bool {
        self.before_size.is_none() && self.after_size.is_none()
    }

    /// The digests of the batch's records, in record order, once: `None` when they were not
    /// asked for, did not fit the budget, or the records did not walk.
    pub fn take_digests(&mut self) -> Option<Vec<RecordDigest>> {
        self.digests.take()
    }

    /// Finishes validation with the topic's `rules` (`max.message.bytes`, a key on every record
    /// of a compacted topic), answering the first failure in Kafka's order.
    ///
    /// # Errors
    /// [`InvalidBatch`] naming the first check that failed.
    pub fn validate(self, rules: &Rules) -> Result<ValidBatch, InvalidBatch> {
        if let Some(refused) = self.before_size {
            return Err(refused);
        }
        if self.records.len() > rules.max_message_bytes {
            return Err(InvalidBatch::new(
                ResponseError::MessageTooLarge,
                format!(
                    "record batch of {} bytes is larger than max.message.bytes {}",
                    self.records.len(),
                    rules.max_message_bytes
                ),
            ));
        }
        if let Some(refused) = self.after_size {
            return Err(refused);
        }
        if rules.key_required && self.keyless {
            return Err(InvalidBatch::new(
                ResponseError::InvalidRecord,
                "compacted topic cannot accept a record without a key",
            ));
        }
        Ok(ValidBatch {
            info: header(&self.records).expect("checked: at least a whole header"),
            record_timestamps: self.record_timestamps,
            bytes: self.records,
        })
    }
}

fn check_before_size(records: &[u8], zstd_allowed: bool) -> Result<(), InvalidBatch> {
    use ResponseError::{CorruptMessage, InvalidRecord};
    // Kafka reads the batches with `ByteBufferLogInputStream` before `ProduceRequest
    // .validateRecords` looks at the first: a size field below a legacy message's overhead or a
    // magic byte outside 0..=2 is corrupt; bytes that do not hold a whole batch hold none.
    let no_batch = || {
        InvalidBatch::new(
            InvalidRecord,
            "produce requests must have at least one record batch per partition",
        )
    };
    if records.len() < at::PARTITION_LEADER_EPOCH {
        return Err(no_batch());
    }
    let batch_length = read_i32(records, at::BATCH_LENGTH);
    if batch_length < LEGACY_RECORD_OVERHEAD_V0 {
        return Err(InvalidBatch::new(
            CorruptMessage,
            format!("record size {batch_length} is less than the minimum record overhead (14)"),
        ));
    }
    if records.len() <= at::MAGIC {
        return Err(no_batch());
    }
    let magic = records[at::MAGIC] as i8;
    if !(0..=2).contains(&magic) {
        return Err(InvalidBatch::new(
            CorruptMessage,
            format!("invalid magic found in record: {magic}"),
        ));
    }
    if (batch_length as usize).saturating_add(at::PARTITION_LEADER_EPOCH) > records.len() {
        return Err(no_batch());
    }
    if magic != 2 {
        return Err(InvalidBatch::new(
            InvalidRecord,
            format!("record batch magic {magic} is not 2 (produce v3+ takes only magic 2)"),
        ));
    }
    if records.len() < at::RECORDS {
        return Err(InvalidBatch::new(
            CorruptMessage,
            format!(
                "record batch of {} bytes is shorter than its 61-byte header",
                records.len()
            ),
        ));
    }
    if usize::try_from(batch_length).map(|n| n + at::PARTITION_LEADER_EPOCH) != Ok(records.len()) {
        return Err(InvalidBatch::new(
            InvalidRecord,
            format!(
                "produce records must hold exactly one record batch: batch length {batch_length} + 12 != {} bytes",
                records.len()
            ),
        ));
    }
    if attributes_of(records) & COMPRESSION_MASK == ZSTD && !zstd_allowed {
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
    Ok(())
}

/// The checks after `max.message.bytes`, on a batch that passed [`check_before_size`]; calls
/// `on_record` for each record of a batch whose header is valid.
fn check_after_size(
    records: &[u8],
    on_record: impl FnMut(&records::RecordView<'_>) -> Result<(), String>,
) -> Result<(), InvalidBatch> {
    let (codec, record_count, body) = check_header_after_size(records)?;
    walk_records(codec, record_count, body, on_record)
}

/// [`check_after_size`] gathering only the records' [`scan::Bounds`] into `bounds`, timestamps
/// read from `base_timestamp` (the header's, ms): an
/// uncompressed batch is checked by [`scan::scan`], a single pass over its bytes, and walked
/// ([`records::walk`]) only when that refuses it, to word the refusal; a compressed batch is
/// walked as it decompresses.
fn check_after_size_gathering(
    records: &[u8],
    base_timestamp: i64,
    bounds: &mut scan::Bounds,
) -> Result<(), InvalidBatch> {
    let (codec, record_count, body) = check_header_after_size(records)?;
    if codec == NONE {
        if let Some(scanned) = scan::scan(body, record_count, base_timestamp) {
            *bounds = scanned;
            return Ok(());
        }
    }
    walk_records(codec, record_count, body, |record| {
        let timestamp = base_timestamp.wrapping_add(record.timestamp_delta);
        bounds.add(record.key.is_none(), timestamp);
        Ok(())
    })
}

/// The header checks after `max.message.bytes` (CRC, codec, control bit, record count), on a
/// batch that passed [`check_before_size`]: its codec, record count and records section.
fn check_header_after_size(records: &[u8]) -> Result<(i16, i32, &[u8]), InvalidBatch> {
    use ResponseError::{CorruptMessage, InvalidRecord};
    let stored_crc = read_u32(records, at::CRC);
    let actual_crc = crc32c::crc32c(&records[at::ATTRIBUTES..]);
    if stored_crc != actual_crc {
        return Err(InvalidBatch::new(
            CorruptMessage,
            format!("record batch CRC {stored_crc:#010x} does not match its contents ({actual_crc:#010x})"),
        ));
    }
    let attributes = attributes_of(records);
    let codec = attributes & COMPRESSION_MASK;
    if codec > ZSTD {
        // Kafka's `CompressionType.forId` throws an `IllegalArgumentException`, which is no
        // `ApiException`: UNKNOWN_SERVER_ERROR.
        return Err(InvalidBatch::new(
            ResponseError::UnknownServerError,
            format!("unknown compression codec {codec}"),
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
    let body = &records[at::RECORDS..];
    if codec == NONE && record_count as usize > body.len() / MIN_RECORD_BYTES {
        return Err(InvalidBatch::new(
            InvalidRecord,
            format!(
                "the batch declares {record_count} records but its {} bytes of records hold at most {}",
                body.len(),
                body.len() / MIN_RECORD_BYTES
            ),
        ));
    }
    Ok((codec, record_count, body))
}

/// Walks the `record_count` records of a batch whose header is checked, `body` its records
/// section as sent (compressed with `codec` or not), calling `on_record` for each.
fn walk_records(
    codec: i16,
    record_count: i32,
    body: &[u8],
    on_record: impl FnMut(&records::RecordView<'_>) -> Result<(), String>,
) -> Result<(), InvalidBatch> {
    // Uncompressed records are walked straight from the slice (no boxed reader, no dynamic
    // call per byte read).
    let walked = if codec == NONE {
        records::walk(&mut &body[..], record_count, on_record)
    } else {
        decompress::records_reader(codec, body)
            .map_err(WalkError::from)
            .and_then(|mut input| records::walk(&mut input, record_count, on_record))
    };
    walked.map_err(|e| {
        InvalidBatch::new(
            ResponseError::InvalidRecord,
            format!("the records of a batch of {record_count} are invalid: {e}"),
        )
    })
}

/// Whether the first batch of `records` is a transactional one of magic 2, as Kafka's
/// `RequestUtils.hasTransactionalRecords` reads a Produce request's partitions (a legacy
/// message set, or bytes holding no whole batch, is not).
pub fn is_transactional(records: &[u8]) -> bool {
    if records.len() < at::LAST_OFFSET_DELTA || records[at::MAGIC] != 2 {
        return false;
    }
    let whole = usize::try_from(read_i32(records, at::BATCH_LENGTH))
        .is_ok_and(|n| n.saturating_add(at::PARTITION_LEADER_EPOCH) <= records.len());
    whole && attributes_of(records) & header::TRANSACTIONAL != 0
}

/// Uncompressed batches up to this many bytes are walked where the request is handled; walking
/// one takes microseconds.
pub const INLINE_WALK_BYTES: usize = 64 * 1024;

/// Whether [`inspect`] on `records` may take long enough to hold up the thread it runs on:
/// a compressed batch (its records may inflate up to [`decompress::MAX_DECOMPRESSED_BYTES`]) or
/// one of more than [`INLINE_WALK_BYTES`]. The Produce handler walks such batches on a blocking
/// thread, so that connections served by the same runtime threads do not wait on it.
pub fn walk_is_costly(records: &[u8]) -> bool {
    let compressed =
        records.len() > at::ATTRIBUTES + 1 && attributes_of(records) & COMPRESSION_MASK != NONE;
    records.len() > INLINE_WALK_BYTES || compressed
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
