//! Record batches built byte by byte for the produce cases: a v2 batch with chosen attributes,
//! producer fields and timestamps, and the legacy message sets (magic 0 and 1) that kafka-protocol
//! does not encode.

use anyhow::Result;
use bytes::Bytes;
use kafka_protocol::records::{Compression, Record, TimestampType};
use kmock_client::encode_batch;

/// Byte offset of the magic byte in a v2 batch header.
const MAGIC: usize = 16;
/// Byte offset of the CRC in a v2 batch header; the CRC covers every byte after it.
const CRC: usize = 17;
/// Byte offset of the attributes (i16) in a v2 batch header.
const ATTRIBUTES: usize = 21;
/// Byte offset of the producer id (i64), epoch (i16) and base sequence (i32).
const PRODUCER_ID: usize = 43;

/// A record with `key`, `value` and CreateTime `timestamp` (ms since the epoch).
pub fn record_at(key: &[u8], value: &[u8], timestamp: i64) -> Record {
    let mut record = kmock_client::record(key, value);
    record.timestamp = timestamp;
    record.timestamp_type = TimestampType::Creation;
    record
}

/// One uncompressed v2 batch of `records` as [`encode_batch`] makes it.
///
/// # Errors
/// The codec refusing the records.
pub fn v2(records: &[Record]) -> Result<Vec<u8>> {
    Ok(encode_batch(records, Compression::None)?.to_vec())
}

/// `batch` with its attributes set to `attributes`, CRC recomputed.
pub fn with_attributes(mut batch: Vec<u8>, attributes: i16) -> Vec<u8> {
    batch[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    reseal(batch)
}

/// `batch` with producer id, epoch and base sequence set, CRC recomputed.
pub fn with_producer(mut batch: Vec<u8>, producer_id: i64, epoch: i16, sequence: i32) -> Vec<u8> {
    batch[PRODUCER_ID..PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[PRODUCER_ID + 8..PRODUCER_ID + 10].copy_from_slice(&epoch.to_be_bytes());
    batch[PRODUCER_ID + 10..PRODUCER_ID + 14].copy_from_slice(&sequence.to_be_bytes());
    reseal(batch)
}

/// `batch` with its magic byte set to `magic`, CRC recomputed.
pub fn with_magic(mut batch: Vec<u8>, magic: u8) -> Vec<u8> {
    batch[MAGIC] = magic;
    reseal(batch)
}

/// `batch` with its CRC recomputed over the bytes after it.
pub fn reseal(mut batch: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&batch[CRC + 4..]);
    batch[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// `batch` with one bit of its last byte flipped and the CRC left as it was.
pub fn corrupt(mut batch: Vec<u8>) -> Vec<u8> {
    let last = batch.len() - 1;
    batch[last] ^= 1;
    batch
}

/// A legacy message set of one uncompressed message, magic 0 (no timestamp) or 1 (CreateTime
/// `timestamp`), at offset 0, CRC-32 (IEEE) over magic to value as the old format has it.
pub fn legacy(magic: u8, key: &[u8], value: &[u8], timestamp: i64) -> Bytes {
    let mut message = vec![magic, 0];
    if magic == 1 {
        message.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        message.extend_from_slice(&(field.len() as i32).to_be_bytes());
        message.extend_from_slice(field);
    }
    let mut crc = flate2::Crc::new();
    crc.update(&message);
    let mut set = Vec::new();
    set.extend_from_slice(&0i64.to_be_bytes());
    set.extend_from_slice(&((message.len() + 4) as i32).to_be_bytes());
    set.extend_from_slice(&crc.sum().to_be_bytes());
    set.extend_from_slice(&message);
    Bytes::from(set)
}
