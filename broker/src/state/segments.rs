//! Where a partition's log would be cut into segments, and which segments retention deletes, as
//! Kafka's `UnifiedLog` decides it.
//!
//! kmock keeps no segment files: a [`Segment`] is the run of stored batches that one of Kafka's
//! segments would hold, with what Kafka's retention reads of it (size, largest timestamp, the
//! first batch's timestamp, creation and last-modified times). So the log start offset moves at
//! exactly the offsets where Kafka's would, given the same batches, configs and check times:
//!
//! - **Rolling** (`UnifiedLog.maybeRoll`, `LogSegment.shouldRoll`), before a batch is appended:
//!   a new segment starts at the batch when the active segment's size plus the batch's passes
//!   `segment.bytes` (`internal.segment.bytes` instead when the topic sets it, Kafka 4.x's
//!   `LogConfig.segmentSize()`; 0 or less rolls before every batch), or when the active segment is not empty and the batch's largest timestamp
//!   is more than `segment.ms` after the active segment's first batch's (its creation time's,
//!   measured to now, when that timestamp is negative). `segment.jitter.ms` is 0 (Kafka's
//!   default; kmock does not know the config). Kafka also rolls when a segment's offset or time
//!   index is full (10 MiB, `segment.index.bytes`) or its offsets pass 2³¹ from its base: not
//!   copied (with the default index size, an index fills only past about 5 GB of batches of
//!   4 KiB, more than a segment's maximum of 2 GiB holds).
//! - **Deleting** (`UnifiedLog.deleteOldSegments`, three passes in Kafka's order): segments
//!   wholly below the log start offset (DeleteRecords), whatever the policy; then, when
//!   `cleanup.policy` includes `delete`, the oldest segments while the log without them still
//!   holds at least `retention.bytes` (`deleteRetentionSizeBreachedSegments`), then the oldest
//!   segments whose largest timestamp (their last write's time when they hold no timestamp) is
//!   more than `retention.ms` before now. Each pass stops at the first segment it keeps; the last
//!   segment is deleted too when it qualifies and is not empty, a new empty one starting at the
//!   log end offset (Kafka rolls first). The log start offset becomes the first kept segment's
//!   base offset.
//!
//! `cleanup.policy=compact` alone deletes nothing by retention, as Kafka; compaction itself is
//! not done (a compacted topic keeps every record).
//!
//! Deviation from Apache Kafka: the cluster-wide broker configs `log.retention.ms` and
//! `log.retention.bytes` (AlterConfigs or IncrementalAlterConfigs on a broker resource) are
//! stored but not applied: a topic without its own `retention.ms` / `retention.bytes`
//! keeps Kafka's defaults (7 days, unlimited), where Kafka makes them the topics' defaults.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What decides a log's segments and its retention: the topic's configs, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogPolicy {
    /// `segment.bytes`, or `internal.segment.bytes` when set: the most bytes of batches a
    /// segment holds (a bigger batch gets a segment to itself).
    pub segment_bytes: i64,
    /// `segment.ms`: ms of record time after a segment's first batch beyond which a batch starts
    /// a new segment.
    pub segment_ms: i64,
    /// `retention.bytes` per partition; -1: no limit.
    pub retention_bytes: i64,
    /// `retention.ms`; -1: no limit.
    pub retention_ms: i64,
    /// Whether `cleanup.policy` includes `delete` (else retention deletes nothing).
    pub delete: bool,
}

impl Default for LogPolicy {
    /// Kafka's defaults: 1 GiB and 7-day segments, 7-day retention, no size limit, `delete`.
    fn default() -> Self {
        Self {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3_600_000,
            retention_bytes: -1,
            retention_ms: 7 * 24 * 3_600_000,
            delete: true,
        }
    }
}

/// The run of batches one of Kafka's segment files would hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Offset of its first batch (the log end offset when it started).
    pub base_offset: i64,
    /// How many stored batches it holds.
    pub batches: usize,
    /// Bytes of those batches.
    pub size: u64,
    /// Largest timestamp of its batches; -1 while none has one (Kafka's `maxTimestampSoFar`).
    pub max_timestamp: i64,
    /// Its first batch's largest timestamp (Kafka's `rollingBasedTimestamp`), once it has one.
    pub first_batch_timestamp: Option<i64>,
    /// Wall-clock ms when it started.
    pub created_ms: i64,
    /// Wall-clock ms of its last append (the file's modification time in Kafka).
    pub last_modified_ms: i64,
}

impl Segment {
    /// An empty segment starting at `base_offset`, at wall-clock `now_ms`.
    pub fn new(base_offset: i64, now_ms: i64) -> Self {
        Self {
            base_offset,
            batches: 0,
            size: 0,
            max_timestamp: -1,
            first_batch_timestamp: None,
            created_ms: now_ms,
            last_modified_ms: now_ms,
        }
    }

    /// Whether a batch of `size` bytes whose largest timestamp is `max_timestamp` starts a new
    /// segment after this one (`LogSegment.shouldRoll`, jitter 0).
    pub fn should_roll(
        &self,
        policy: &LogPolicy,
        size: u64,
        max_timestamp: i64,
        now_ms: i64,
    ) -> bool {
        let waited = match self.first_batch_timestamp {
            Some(first) if first >= 0 => max_timestamp.saturating_sub(first),
            _ => now_ms.saturating_sub(self.created_ms),
        };
        (self.size as i64) > policy.segment_bytes.saturating_sub(size as i64)
            || (self.size > 0 && waited > policy.segment_ms)
    }

    /// Records a batch appended to it.
    pub fn add(&mut self, size: u64, max_timestamp: i64, now_ms: i64) {
        if self.batches == 0 {
            self.first_batch_timestamp = Some(max_timestamp);
        }
        self.batches += 1;
        self.size += size;
        self.max_timestamp = self.max_timestamp.max(max_timestamp);
        self.last_modified_ms = now_ms;
    }

    /// The timestamp `retention.ms` is measured from (`LogSegment.largestTimestamp`).
    fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            self.max_timestamp
        } else {
            self.last_modified_ms
        }
    }
}

/// Which retention passes to run ([`deletable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Segments wholly below the log start offset.
    LogStart,
    /// `retention.bytes`.
    Size,
    /// `retention.ms`.
    Time,
}

/// How many of the oldest `segments` pass `pass` deletes (`UnifiedLog.deletableSegments`):
/// counted from the oldest while the pass's predicate holds; the last segment only when it is
/// not empty. `log_size` is the bytes of every segment.
pub fn deletable(
    segments: &VecDeque<Segment>,
    pass: Pass,
    policy: &LogPolicy,
    log_start_offset: i64,
    log_size: u64,
    now_ms: i64,
) -> usize {
    let mut diff = match pass {
        Pass::Size if policy.retention_bytes < 0 || (log_size as i64) < policy.retention_bytes => {
            return 0
        }
        Pass::Size => log_size as i64 - policy.retention_bytes,
        Pass::Time if policy.retention_ms < 0 => return 0,
        _ => 0,
    };
    let mut count = 0;
    for (i, segment) in segments.iter().enumerate() {
        let next = segments.get(i + 1);
        let delete = match pass {
            Pass::LogStart => next.is_some_and(|n| n.base_offset <= log_start_offset),
            Pass::Size => {
                let delete = diff - segment.size as i64 >= 0;
                if delete {
                    diff -= segment.size as i64;
                }
                delete
            }
            Pass::Time => now_ms.saturating_sub(segment.largest_timestamp()) > policy.retention_ms,
        };
        let last_and_empty = next.is_none() && segment.size == 0;
        if !delete || last_and_empty {
            break;
        }
        count += 1;
    }
    count
}

/// The bytes stored in every partition log of a cluster, for its cap on stored bytes: each log
/// adds what it appends and takes off what it deletes, and what it still holds when dropped.
#[derive(Debug, Clone, Default)]
pub struct StoredTotal(Arc<AtomicU64>);

impl StoredTotal {
    /// Bytes stored now.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    pub(super) fn add(&self, bytes: u64) {
        self.0.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(super) fn sub(&self, bytes: u64) {
        self.0.fetch_sub(bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
