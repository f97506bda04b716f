//! One partition's log: stored batches, log start offset, log end offset, high watermark.
//!
//! kmock keeps one replica per partition, so a batch is fully replicated the moment it is
//! appended: the high watermark is the log end offset, as on a Kafka cluster whose ISR is the
//! leader alone. The last stable offset is the first offset of the oldest transaction still
//! open on the partition, or the high watermark when none is (Kafka's `UnifiedLog.
//! firstUnstableOffset`); every aborted transaction is kept in an index, as Kafka's
//! `.txnindex`, for read_committed fetches.
//!
//! The batches are grouped into the segments Kafka would cut them into ([`super::segments`]);
//! retention ([`PartitionLog::delete_old_segments`]) deletes whole segments, moving the log
//! start offset to the first one kept. DeleteRecords moves the log start offset
//! ([`PartitionLog::delete_records_before`]); the batches below it stay stored until the
//! segments holding them are wholly below it and retention runs, as in Kafka, but no read goes
//! below it.

use std::collections::{HashMap, VecDeque};

use bytes::{Bytes, BytesMut};

use kafka_protocol::ResponseError;

use super::batch::{StoredBytes, ValidBatch};
use super::segments::{deletable, LogPolicy, Pass, Segment, StoredTotal};

/// An aborted transaction on a partition (Kafka's `AbortedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer whose transaction it was.
    pub producer_id: i64,
    /// Offset of the transaction's first record on this partition (the marker's offset when
    /// it wrote none).
    pub first_offset: i64,
    /// Offset of the abort marker.
    pub last_offset: i64,
}

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
    /// Whether it is a control batch (a transaction marker, written by the broker).
    pub control: bool,
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
    batches: VecDeque<StoredBatch>,
    /// The segments the batches fall into, oldest first; empty until the first append.
    segments: VecDeque<Segment>,
    /// Bytes of every stored batch.
    size: u64,
    /// The cluster's total of stored bytes, which this log's appends and deletions change.
    stored: StoredTotal,
    /// Segment and retention configs.
    policy: LogPolicy,
    log_start_offset: i64,
    log_end_offset: i64,
    /// First offset of each producer's open transaction on this partition.
    ongoing: HashMap<i64, i64>,
    /// Aborted transactions, by marker offset.
    aborted: Vec<AbortedTxn>,
}

impl Drop for PartitionLog {
    /// A deleted topic's (or a reset cluster's) bytes no longer count in the cluster's total.
    fn drop(&mut self) {
        self.stored.sub(self.size);
    }
}

impl PartitionLog {
    /// An empty log counting its bytes in `stored`, segmented and retained as `policy` says.
    pub fn new(stored: StoredTotal, policy: LogPolicy) -> Self {
        let mut log = Self::default();
        log.stored = stored;
        log.policy = policy;
        log
    }

    /// Changes the segment and retention configs (AlterConfigs): from the next append and the
    /// next retention check on, as in Kafka; segments already cut stay as they are.
    pub fn set_policy(&mut self, policy: LogPolicy) {
        self.policy = policy;
    }

    /// Appends a validated batch at wall-clock `now_ms` (ms since the Unix epoch, as the
    /// request read it once), assigning offsets from the log end offset; a new segment starts
    /// at it when Kafka's would ([`Segment::should_roll`], against `now_ms`).
    ///
    /// `log_append_time_ms` is `Some(now_ms)` for a topic with
    /// `message.timestamp.type=LogAppendTime`.
    pub fn append(
        &mut self,
        batch: ValidBatch,
        leader_epoch: i32,
        log_append_time_ms: Option<i64>,
        now_ms: i64,
    ) -> Appended {
        let base_offset = self.log_end_offset;
        let count = i64::from(batch.info.record_count);
        let max_timestamp = log_append_time_ms.unwrap_or(batch.info.max_timestamp);
        let producer = (
            batch.info.producer_id,
            batch.info.producer_epoch,
            batch.info.base_sequence,
        );
        let control = batch.is_control();
        if batch.info.transactional && !control {
            self.ongoing
                .entry(batch.info.producer_id)
                .or_insert(base_offset);
        }
        let bytes = batch.into_stored_bytes(base_offset, leader_epoch, log_append_time_ms);
        let size = bytes.size() as u64;
        let roll = match self.segments.back() {
            None => true,
            Some(active) => active.should_roll(&self.policy, size, max_timestamp, now_ms),
        };
        if roll {
            // Kafka re-creates an empty active segment rather than adding a second one.
            if self.segments.back().is_some_and(|s| s.batches == 0) {
                self.segments.pop_back();
            }
            self.segments.push_back(Segment::new(base_offset, now_ms));
        }
        if let Some(active) = self.segments.back_mut() {
            active.add(size, max_timestamp, now_ms);
        }
        self.size += size;
        self.stored.add(size);
        self.batches.push_back(StoredBatch {
            base_offset,
            last_offset: base_offset + count - 1,
            max_timestamp,
            producer,
            control,
            bytes,
        });
        self.log_end_offset += count;
        Appended {
            base_offset,
            log_append_time_ms: log_append_time_ms.unwrap_or(-1),
        }
    }

    /// The stored batches, oldest first.
    pub fn batches(&self) -> &VecDeque<StoredBatch> {
        &self.batches
    }

    /// Bytes stored in every log of the cluster (the total this log counts in).
    pub fn stored_total(&self) -> u64 {
        self.stored.get()
    }

    /// Bytes of every stored batch (DescribeLogDirs' partition size).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The segments Kafka would have cut the stored batches into, oldest first.
    pub fn segments(&self) -> &VecDeque<Segment> {
        &self.segments
    }

    /// Deletes the segments Kafka's retention check would (`UnifiedLog.deleteOldSegments`, see
    /// [`super::segments`]) at wall-clock `now_ms`: with `size_only`, only the `retention.bytes`
    /// pass (kmock's check on append). Returns the new log start offset when it moved.
    pub fn delete_old_segments(&mut self, now_ms: i64, size_only: bool) -> Option<i64> {
        let before = self.log_start_offset;
        let passes: &[Pass] = match (size_only, self.policy.delete) {
            (true, true) => &[Pass::Size],
            (true, false) => &[],
            (false, true) => &[Pass::LogStart, Pass::Size, Pass::Time],
            (false, false) => &[Pass::LogStart],
        };
        for &pass in passes {
            let count = deletable(
                &self.segments,
                pass,
                &self.policy,
                self.log_start_offset,
                self.size,
                now_ms,
            );
            if count > 0 {
                self.delete_segments(count, now_ms);
            }
        }
        (self.log_start_offset > before).then_some(self.log_start_offset)
    }

    /// Deletes the `count` oldest segments and their batches (`UnifiedLog.deleteSegments`):
    /// when that is every segment, a new empty one starts at the log end offset first. The log
    /// start offset moves up to the first segment kept.
    fn delete_segments(&mut self, count: usize, now_ms: i64) {
        if count == self.segments.len() {
            self.segments
                .push_back(Segment::new(self.log_end_offset, now_ms));
        }
        let mut freed = 0;
        for segment in self.segments.drain(..count) {
            self.batches.drain(..segment.batches);
            freed += segment.size;
        }
        self.size -= freed;
        self.stored.sub(freed);
        if let Some(first) = self.segments.front() {
            self.log_start_offset = self.log_start_offset.max(first.base_offset);
        }
        // An aborted transaction whose marker went with a deleted segment went with its
        // `.txnindex`.
        let start = self.log_start_offset;
        self.aborted.retain(|a| a.last_offset >= start);
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

    /// Offset below which no transaction is open: the first offset of the oldest open
    /// transaction (not below the log start offset, as Kafka's `UnifiedLog
    /// .maybeIncrementFirstUnstableOffset`), else the high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        self.ongoing
            .values()
            .copied()
            .min()
            .map_or(self.high_watermark(), |first| {
                first.max(self.log_start_offset).min(self.high_watermark())
            })
    }

    /// Moves the log start offset up to `offset` (DeleteRecords, Kafka's `UnifiedLog
    /// .maybeIncrementLogStartOffset`): an offset at or below the log start offset changes
    /// nothing. Returns whether it moved.
    ///
    /// # Errors
    /// OFFSET_OUT_OF_RANGE for an offset past the high watermark.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<bool, ResponseError> {
        if offset > self.high_watermark() {
            return Err(ResponseError::OffsetOutOfRange);
        }
        if offset <= self.log_start_offset {
            return Ok(false);
        }
        self.log_start_offset = offset;
        Ok(true)
    }

    /// The first offset of producer `producer_id`'s open transaction on this partition, -1
    /// when none is open (DescribeProducers' `current_txn_start_offset`).
    pub fn ongoing_transaction_start(&self, producer_id: i64) -> i64 {
        self.ongoing.get(&producer_id).copied().unwrap_or(-1)
    }

    /// Whether producer `producer_id` has a transaction open on this partition (a transactional
    /// batch appended and no marker since).
    pub fn has_ongoing_transaction(&self, producer_id: i64) -> bool {
        self.ongoing.contains_key(&producer_id)
    }

    /// Appends a commit or abort marker (a control batch, [`super::batch::control::marker`])
    /// and closes the producer's transaction on this partition; an abort goes into the aborted
    /// index, from the transaction's first offset (or the marker's, when it wrote nothing here)
    /// to the marker, as Kafka's `ProducerAppendInfo.appendEndTxnMarker`. Returns the marker's
    /// offset. `now_ms` is the wall clock the transaction's end read.
    pub fn append_marker(
        &mut self,
        marker: ValidBatch,
        commit: bool,
        leader_epoch: i32,
        now_ms: i64,
    ) -> i64 {
        let producer_id = marker.info.producer_id;
        let offset = self.append(marker, leader_epoch, None, now_ms).base_offset;
        let first_offset = self.ongoing.remove(&producer_id).unwrap_or(offset);
        if !commit {
            self.aborted.push(AbortedTxn {
                producer_id,
                first_offset,
                last_offset: offset,
            });
        }
        offset
    }

    /// The aborted transactions a read_committed fetch of offsets `from..until` must be told
    /// about: those whose range meets it (Kafka's `collectAbortedTransactions`).
    pub fn aborted_between(&self, from: i64, until: i64) -> Vec<AbortedTxn> {
        self.aborted
            .iter()
            .filter(|a| a.last_offset >= from && a.first_offset < until)
            .copied()
            .collect()
    }

    /// Whole batches holding offsets from `from` up to (not including) `until`, concatenated,
    /// stopping before `max_bytes` would be passed — except that the first batch is always
    /// returned whole when `first_may_exceed` (KIP-74: a consumer must be able to make progress).
    pub fn read(&self, from: i64, until: i64, max_bytes: usize, first_may_exceed: bool) -> Bytes {
        let start = self.batches.partition_point(|b| b.last_offset < from);
        let mut size = 0;
        let taken = self
            .batches
            .range(start..)
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
        for batch in self.batches.range(start..start + taken) {
            batch.bytes.write_to(&mut out);
        }
        out.freeze()
    }

    /// The earliest record at or after the log start offset whose timestamp is at least
    /// `timestamp`: `(offset, its timestamp)`, or `None` when every such record is older (Kafka
    /// answers offset -1 then; `LogSegment.findOffsetByTimestamp` from the log start offset).
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<(i64, i64)> {
        let start = self
            .batches
            .partition_point(|b| b.last_offset < self.log_start_offset);
        self.batches
            .range(start..)
            .filter(|b| b.max_timestamp >= timestamp)
            .find_map(|b| {
                b.bytes
                    .first_record_at_or_after(timestamp, self.log_start_offset)
            })
    }

    /// The record with the largest timestamp, the earliest such: `(offset, timestamp)`
    /// (ListOffsets MAX_TIMESTAMP, KIP-734), or `None` for an empty log. As Kafka's
    /// `UnifiedLog.fetchOffsetByTimestamp`, it searches every stored batch, below the log start
    /// offset too.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let newest = self.batches.iter().map(|b| b.max_timestamp).max()?;
        self.batches
            .iter()
            .filter(|b| b.max_timestamp >= newest)
            .find_map(|b| b.bytes.first_record_at_or_after(newest, i64::MIN))
    }
}
