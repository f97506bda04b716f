//! One partition's log: stored batches, log start offset, log end offset, high watermark.
//!
//! kmock keeps one replica per partition, so a batch is fully replicated the moment it is
//! appended: the high watermark is the log end offset, as on a Kafka cluster whose ISR is the
//! leader alone. Without transactions the last stable offset equals the high watermark.

use bytes::{Bytes, BytesMut};

use super::batch::{StoredBytes, ValidBatch};

/// A batch as stored: bytes with broker-assigned offsets, plus the fields reads search by.
#[derive(Debug, Clone)]
pub struct StoredBatch {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// Largest timestamp in the batch as stored (LogAppendTime replaces it), ms since the epoch.
    pub max_timestamp: i64,
    /// Producer id, epoch and base sequence from the batch header (-1 when not idempotent).
    pub producer: (i64, i16, i32),
    /// The whole batch, ready to send in a Fetch response.
    pub bytes: StoredBytes,
}

/// The result of an append: where the batch went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Offset given to the first record.
    pub base_offset: i64,
    /// The LogAppendTime stamped on the batch, or -1 for CreateTime topics (Kafka's answer).
    pub log_append_time_ms: i64,
}

/// The log of one partition.
#[derive(Debug, Default)]
pub struct PartitionLog {
    batches: Vec<StoredBatch>,
    log_start_offset: i64,
    log_end_offset: i64,
}

impl PartitionLog {
    /// Appends a validated batch, assigning offsets from the log end offset.
    ///
    /// `log_append_time_ms` is `Some(now)` for a topic with `message.timestamp.type=LogAppendTime`.
    pub fn append(
        &mut self,
        batch: ValidBatch,
        leader_epoch: i32,
        log_append_time_ms: Option<i64>,
    ) -> Appended {
        let base_offset = self.log_end_offset;
        let count = i64::from(batch.info.record_count);
        let max_timestamp = log_append_time_ms.unwrap_or(batch.info.max_timestamp);
        let producer = (
            batch.info.producer_id,
            batch.info.producer_epoch,
            batch.info.base_sequence,
        );
        let bytes = batch.into_stored_bytes(base_offset, leader_epoch, log_append_time_ms);
        self.batches.push(StoredBatch {
            base_offset,
            last_offset: base_offset + count - 1,
            max_timestamp,
            producer,
            bytes,
        });
        self.log_end_offset += count;
        Appended {
            base_offset,
            log_append_time_ms: log_append_time_ms.unwrap_or(-1),
        }
    }

    /// The stored batches, oldest first.
    pub fn batches(&self) -> &[StoredBatch] {
        &self.batches
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// Offset the next record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Offset up to which records are committed to every in-sync replica: the log end offset.
    pub fn high_watermark(&self) -> i64 {
        self.log_end_offset
    }

    /// Offset below which no transaction is open: without transactions, the high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        self.high_watermark()
    }

    /// Whole batches holding offsets from `from` up to (not including) `until`, concatenated,
    /// stopping before `max_bytes` would be passed — except that the first batch is always
    /// returned whole when `first_may_exceed` (KIP-74: a consumer must be able to make progress).
    pub fn read(&self, from: i64, until: i64, max_bytes: usize, first_may_exceed: bool) -> Bytes {
        let start = self.batches.partition_point(|b| b.last_offset < from);
        let mut size = 0;
        let taken = self.batches[start..]
            .iter()
            .take_while(|b| b.base_offset < until)
            .take_while(|b| {
                let fits = size + b.bytes.size() <= max_bytes;
                let taken = fits || size == 0 && first_may_exceed;
                if taken {
                    size += b.bytes.size();
                }
                taken
            })
            .count();
        let mut out = BytesMut::with_capacity(size);
        for batch in &self.batches[start..start + taken] {
            batch.bytes.write_to(&mut out);
        }
        out.freeze()
    }

    /// The earliest record whose timestamp is at least `timestamp`: `(offset, its timestamp)`,
    /// or `None` when every record is older (Kafka answers offset -1 then).
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<(i64, i64)> {
        self.batches
            .iter()
            .filter(|b| b.max_timestamp >= timestamp)
            .find_map(|b| b.bytes.first_record_at_or_after(timestamp))
    }

    /// The record with the largest timestamp, the earliest such: `(offset, timestamp)`
    /// (ListOffsets MAX_TIMESTAMP, KIP-734), or `None` for an empty log.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let newest = self.batches.iter().map(|b| b.max_timestamp).max()?;
        self.offset_for_timestamp(newest)
    }
}
