//! Segments cut and deleted as Kafka's `UnifiedLog` would, on logs built by appending.

use kafka_protocol::records::Compression;

use super::*;
use crate::state::batch;
use crate::state::log::PartitionLog;

const T0: i64 = 1_700_000_000_000;

/// A one-record batch whose record has timestamp `timestamp`.
fn batch_at(timestamp: i64) -> batch::ValidBatch {
    let record = kafka_protocol::records::Record {
        timestamp,
        ..kmock_client::record(b"k", b"0123456789")
    };
    let bytes = kmock_client::encode_batch(&[record], Compression::None).unwrap();
    let rules = batch::Rules {
        max_message_bytes: 1 << 20,
        key_required: false,
    };
    batch::validate(&bytes, &rules).unwrap()
}

/// The size of one [`batch_at`] batch.
fn batch_size() -> i64 {
    batch_at(T0).size() as i64
}

/// A log with `policy`, counting in `stored`, holding one batch a timestamp, appended at `T0`.
fn log_with(policy: LogPolicy, stored: &StoredTotal, timestamps: &[i64]) -> PartitionLog {
    let mut log = PartitionLog::new(stored.clone(), policy);
    for &ts in timestamps {
        log.append(batch_at(ts), 0, None, T0);
    }
    log
}

fn bases(log: &PartitionLog) -> Vec<i64> {
    log.segments().iter().map(|s| s.base_offset).collect()
}

#[test]
fn segment_bytes_rolls_before_the_batch_that_would_pass_it() {
    // Room for two batches and a half: the third starts a new segment.
    let policy = LogPolicy {
        segment_bytes: batch_size() * 5 / 2,
        ..LogPolicy::default()
    };
    let log = log_with(policy, &StoredTotal::default(), &[T0; 5]);
    assert_eq!(bases(&log), vec![0, 2, 4]);
    // Exactly two batches fit: size + batch > segment.bytes rolls, equal does not.
    let policy = LogPolicy {
        segment_bytes: batch_size() * 2,
        ..LogPolicy::default()
    };
    let log = log_with(policy, &StoredTotal::default(), &[T0; 5]);
    assert_eq!(bases(&log), vec![0, 2, 4]);
}

#[test]
fn segment_ms_rolls_on_the_record_time_after_the_first_batch() {
    let policy = LogPolicy {
        segment_ms: 10,
        ..LogPolicy::default()
    };
    // 10 ms after the first batch is not more than segment.ms; 11 is.
    let log = log_with(
        policy,
        &StoredTotal::default(),
        &[T0, T0 + 10, T0 + 11, T0 + 5, T0 + 22],
    );
    assert_eq!(bases(&log), vec![0, 2, 4]);
}

#[test]
fn retention_bytes_deletes_the_oldest_segments_while_the_rest_holds_at_least_it() {
    let stored = StoredTotal::default();
    let policy = LogPolicy {
        segment_bytes: batch_size() * 2,
        retention_bytes: batch_size() * 3,
        ..LogPolicy::default()
    };
    let mut log = log_with(policy, &stored, &[T0; 5]);
    assert_eq!(stored.get(), 5 * batch_size() as u64);
    // Segments of 2, 2 and 1 batches: deleting the first leaves 3 batches, the second 1.
    assert_eq!(log.delete_old_segments(T0, true), Some(2));
    assert_eq!(bases(&log), vec![2, 4]);
    assert_eq!(log.log_start_offset(), 2);
    assert_eq!(log.batches().len(), 3);
    assert_eq!(log.size(), 3 * batch_size() as u64);
    assert_eq!(stored.get(), 3 * batch_size() as u64);
    assert_eq!(log.delete_old_segments(T0, true), None);
    drop(log);
    assert_eq!(stored.get(), 0, "a dropped log no longer counts");
}

#[test]
fn retention_ms_deletes_segments_whose_largest_timestamp_is_older() {
    let policy = LogPolicy {
        segment_ms: 1,
        retention_ms: 1000,
        ..LogPolicy::default()
    };
    let mut log = log_with(policy, &StoredTotal::default(), &[T0, T0 + 10, T0 + 20]);
    assert_eq!(bases(&log), vec![0, 1, 2]);
    // The size-only check (kmock's on append) leaves time alone.
    assert_eq!(log.delete_old_segments(T0 + 5000, true), None);
    // More than 1000 ms after T0 + 10, not after T0 + 20.
    assert_eq!(log.delete_old_segments(T0 + 1011, false), Some(2));
    assert_eq!(bases(&log), vec![2]);
    assert_eq!(log.read(0, 10, 1 << 20, true).len() as i64, batch_size());
}

#[test]
fn the_active_segment_goes_too_and_the_log_starts_at_its_end() {
    let stored = StoredTotal::default();
    let policy = LogPolicy {
        retention_ms: 1000,
        ..LogPolicy::default()
    };
    let mut log = log_with(policy, &stored, &[T0, T0]);
    assert_eq!(log.delete_old_segments(T0 + 1001, false), Some(2));
    assert_eq!(bases(&log), vec![2], "a new empty segment at the log end");
    assert_eq!(log.log_end_offset(), 2);
    assert!(log.batches().is_empty());
    assert_eq!(stored.get(), 0);
    // An empty last segment is never deleted.
    assert_eq!(log.delete_old_segments(T0 + 5000, false), None);
    assert_eq!(log.append(batch_at(T0 + 6000), 0, None, T0).base_offset, 2);
    assert_eq!(bases(&log), vec![2]);
}

#[test]
fn compact_alone_deletes_only_segments_below_the_log_start_offset() {
    let policy = LogPolicy {
        segment_bytes: batch_size() * 2,
        retention_bytes: 0,
        retention_ms: 1,
        delete: false,
        ..LogPolicy::default()
    };
    let mut log = log_with(policy, &StoredTotal::default(), &[T0; 5]);
    assert_eq!(log.delete_old_segments(T0 + 10_000, false), None);
    assert_eq!(log.batches().len(), 5);
    // DeleteRecords to 3: the segment [0, 2) is wholly below it, [2, 4) is not.
    assert_eq!(log.delete_records_before(3), Ok(true));
    assert_eq!(log.delete_old_segments(T0 + 10_000, false), None);
    assert_eq!(bases(&log), vec![2, 4]);
    assert_eq!(log.log_start_offset(), 3);
}

#[test]
fn a_segment_without_timestamps_is_timed_by_its_last_write() {
    let policy = LogPolicy {
        retention_ms: 1000,
        ..LogPolicy::default()
    };
    let mut log = log_with(policy, &StoredTotal::default(), &[-1]);
    assert_eq!(log.delete_old_segments(T0 + 1000, false), None);
    assert_eq!(log.delete_old_segments(T0 + 1001, false), Some(1));
}
