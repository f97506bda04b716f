//! Control batches: the commit and abort markers the transaction coordinator has written to
//! every partition of a transaction (Kafka's `MemoryRecords.withEndTransactionMarker`).
//!
//! A marker is a record batch v2 with the transactional and control attributes, the producer's
//! id and epoch, base sequence -1 and one record whose key is the control record key (version
//! 0, type 0 for abort or 1 for commit) and whose value is the `EndTransactionMarker` (version
//! 0, the coordinator epoch).

use bytes::{BufMut, Bytes, BytesMut};

use super::header::{at, header, CONTROL, TRANSACTIONAL};
use super::ValidBatch;

/// Control record type of an abort marker (Kafka's `ControlRecordType.ABORT`).
pub const ABORT: i16 = 0;
/// Control record type of a commit marker (Kafka's `ControlRecordType.COMMIT`).
pub const COMMIT: i16 = 1;

/// A commit (`commit`) or abort marker of producer `producer_id` at `producer_epoch`, written
/// by a coordinator at `coordinator_epoch`, stamped `timestamp_ms` (ms since the epoch).
pub fn marker(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> ValidBatch {
    // The record: attributes, timestamp delta, offset delta, key, value, no headers; every
    // varint below fits one byte (zigzag of 0, 4, 6 and the record's 16 bytes).
    let mut record = BytesMut::with_capacity(17);
    record.put_u8(32); // length 16, zigzag
    record.put_u8(0); // attributes
    record.put_u8(0); // timestamp delta
    record.put_u8(0); // offset delta
    record.put_u8(8); // key length 4, zigzag
    record.put_i16(0); // control record key version
    record.put_i16(if commit { COMMIT } else { ABORT });
    record.put_u8(12); // value length 6, zigzag
    record.put_i16(0); // EndTransactionMarker version
    record.put_i32(coordinator_epoch);
    record.put_u8(0); // headers
    let mut batch = BytesMut::with_capacity(at::RECORDS + record.len());
    batch.put_i64(0); // base offset, set on append
    batch.put_i32((at::RECORDS + record.len() - at::PARTITION_LEADER_EPOCH) as i32);
    batch.put_i32(-1); // partition leader epoch, set on append
    batch.put_i8(2); // magic
    batch.put_u32(0); // CRC, below
    batch.put_i16(TRANSACTIONAL | CONTROL);
    batch.put_i32(0); // last offset delta
    batch.put_i64(timestamp_ms);
    batch.put_i64(timestamp_ms);
    batch.put_i64(producer_id);
    batch.put_i16(producer_epoch);
    batch.put_i32(-1); // base sequence
    batch.put_i32(1); // record count
    batch.extend_from_slice(&record);
    let crc = crc32c::crc32c(&batch[at::ATTRIBUTES..]);
    batch[at::CRC..at::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    let bytes: Bytes = batch.freeze();
    ValidBatch {
        info: header(&bytes).expect("a whole header was written"),
        record_timestamps: Some((timestamp_ms, timestamp_ms)),
        bytes,
    }
}

/// Whether the stored batch bytes `batch` are a control batch.
pub fn is_control(batch: &[u8]) -> bool {
    batch.len() >= at::RECORDS && super::header::attributes_of(batch) & CONTROL != 0
}

impl ValidBatch {
    /// Whether this is a control batch (a marker: clients may not write them).
    pub fn is_control(&self) -> bool {
        is_control(&self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::batch::records;

    #[test]
    fn a_marker_is_a_valid_transactional_control_batch_of_one_record() {
        let m = marker(7, 3, true, 5, 1_000);
        assert!(m.info.transactional);
        assert_eq!(
            (
                m.info.producer_id,
                m.info.producer_epoch,
                m.info.base_sequence
            ),
            (7, 3, -1)
        );
        assert!(is_control(&m.bytes));
        let crc = crc32c::crc32c(&m.bytes[at::ATTRIBUTES..]);
        assert_eq!(m.info.crc, crc);
        let mut keys = Vec::new();
        let mut input = &m.bytes[at::RECORDS..];
        records::walk(&mut input, 1, |r| {
            keys.push((r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec)));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            keys,
            vec![(Some(vec![0, 0, 0, 1]), Some(vec![0, 0, 0, 0, 0, 5]))]
        );
    }
}
