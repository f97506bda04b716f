//! The stored form of a batch: the client's bytes with the broker's header fields written in.

use bytes::{Bytes, BytesMut};

use super::header::{
    at, read_i16, read_i32, read_i64, COMPRESSION_MASK, TIMESTAMP_TYPE_LOG_APPEND,
};
use super::{decompress, records, ValidBatch};
use crate::connection::READ_BUFFER_BYTES;

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
    pub(super) records: Bytes,
}

impl StoredBytes {
    /// The size of the whole batch, in bytes.
    pub fn size(&self) -> usize {
        at::RECORDS + self.records.len()
    }

    /// The 61-byte header, with the broker's fields written in.
    pub(super) fn header(&self) -> &[u8] {
        &self.header
    }

    /// Appends the whole batch, header then records, to `out`.
    pub fn write_to(&self, out: &mut BytesMut) {
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&self.records);
    }

    /// The first record at or after offset `from` whose timestamp is at least `timestamp`:
    /// `(offset, timestamp)`, a
    /// LogAppendTime batch's records all taking its max timestamp (as Kafka's readers do).
    /// Walks the records as they decompress, keeping none. `None` when no record is that
    /// recent, or when the batch no longer walks (a kmock bug: it was validated on the way in,
    /// so that is logged).
    pub fn first_record_at_or_after(&self, timestamp: i64, from: i64) -> Option<(i64, i64)> {
        let header = &self.header;
        let base_offset = read_i64(header, at::BASE_OFFSET);
        let base_timestamp = read_i64(header, at::BASE_TIMESTAMP);
        let attributes = read_i16(header, at::ATTRIBUTES);
        let log_append_time = (attributes & TIMESTAMP_TYPE_LOG_APPEND != 0)
            .then(|| read_i64(header, at::MAX_TIMESTAMP));
        let mut found = None;
        let walked = decompress::records_reader(attributes & COMPRESSION_MASK, &self.records)
            .map_err(records::WalkError::from)
            .and_then(|mut input| {
                records::walk(&mut input, read_i32(header, at::RECORD_COUNT), |record| {
                    let ts = log_append_time
                        .unwrap_or(base_timestamp.wrapping_add(record.timestamp_delta));
                    let offset = base_offset + i64::from(record.offset_delta);
                    if ts < timestamp || offset < from {
                        return Ok(());
                    }
                    found = Some((offset, ts));
                    Err("found".into()) // stops the walk
                })
            });
        match walked {
            Err(records::WalkError::Refused(_)) => found,
            Ok(()) => None,
            Err(e) => {
                tracing::error!(base_offset, "stored batch no longer walks: {e}");
                None
            }
        }
    }

    /// The whole batch in one buffer (a copy).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.size());
        self.write_to(&mut out);
        out.freeze()
    }
}
