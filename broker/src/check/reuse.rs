//! `sequence-reused`, per (producer id, topic, partition), in arrival order: a batch that Kafka
//! takes for a retry of a batch it stored — same producer epoch, base sequence and record
//! count as one of the last five batches stored in that epoch (`ProducerStateEntry.
//! findDuplicateBatch`, `NUM_BATCHES_TO_RETAIN`) — and that the client was told was written
//! (answered NONE, with the original's base offset), but whose records are not the original's:
//! their digests differ (`state::batch::digest`). The client reused sequence numbers
//! for other data, and those records were never stored although it was told they were.
//!
//! The check follows the batches, not the answers: the model of the last five batches stored
//! is kept as Kafka keeps it (a batch stored in a new epoch clears it; a sixth evicts the
//! oldest), a batch counts as stored when it was answered NONE without being such a retry, or
//! applied before a fault dropped its answer. A batch without digests (journal off, records
//! never walked, an older journal) is not judged.

use std::collections::{HashMap, VecDeque};

use super::{applied_unanswered, Checks, EntryRef, Severity, Violation};
use crate::journal::{Entry, ProducePartition, RequestSummary};
use crate::state::producer_state::BATCHES_RETAINED;

/// A batch stored, as the duplicate check remembers it.
struct Stored<'a> {
    entry: &'a Entry,
    batch: &'a ProducePartition,
}

/// The batches Kafka keeps for one producer and partition: its epoch and the last five.
struct Window<'a> {
    epoch: i16,
    stored: VecDeque<Stored<'a>>,
}

/// Runs `sequence-reused`.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    if !checks.runs("sequence-reused") {
        return Vec::new();
    }
    let mut violations = Vec::new();
    let mut windows: HashMap<(i64, &str, i32), Window<'_>> = HashMap::new();
    for entry in entries {
        let Some(RequestSummary::Produce(produce)) = &entry.request else {
            continue;
        };
        for b in produce.partitions.iter().filter(|b| b.producer_id >= 0) {
            let stored_or_retry = match b.error_code {
                Some(code) => code == 0,
                None => applied_unanswered(entry),
            };
            if !stored_or_retry {
                continue;
            }
            let slot = (b.producer_id, &*b.topic, b.partition);
            let window = windows.entry(slot).or_insert(Window {
                epoch: b.producer_epoch,
                stored: VecDeque::new(),
            });
            let original = (window.epoch == b.producer_epoch)
                .then(|| {
                    window.stored.iter().find(|s| {
                        s.batch.base_sequence == b.base_sequence
                            && s.batch.record_count == b.record_count
                    })
                })
                .flatten();
            if let Some(original) = original {
                // Answered as written (an unanswered retry told the client nothing).
                if b.error_code == Some(0) {
                    if let Some(v) = reused(original, entry, b) {
                        violations.push(v);
                    }
                }
                continue;
            }
            if window.epoch != b.producer_epoch {
                window.epoch = b.producer_epoch;
                window.stored.clear();
            }
            if window.stored.len() == BATCHES_RETAINED {
                window.stored.pop_front();
            }
            window.stored.push_back(Stored { entry, batch: b });
        }
    }
    violations
}

/// The violation when `b` of `entry`, a retry of `original` by its header, holds other records.
fn reused(original: &Stored<'_>, entry: &Entry, b: &ProducePartition) -> Option<Violation> {
    let (Some(was), Some(now)) = (&original.batch.digests, &b.digests) else {
        return None;
    };
    if was == now {
        return None;
    }
    let differing = was.iter().zip(now).filter(|(a, b)| a != b).count();
    let key = format!("producer {} {}-{}", b.producer_id, b.topic, b.partition);
    let at = match original.batch.base_offset {
        Some(offset) => format!(" at offset {offset}"),
        None => String::new(),
    };
    let count = b.record_count;
    let (records, differ) = match count {
        1 => ("1 record".to_owned(), "its record differs".to_owned()),
        n => (
            format!("{n} records"),
            format!("{differing} of its {n} records differ"),
        ),
    };
    Some(Violation {
        kind: "sequence-reused".into(),
        severity: Severity::Violation,
        key: key.clone(),
        entries: vec![EntryRef::from(original.entry), EntryRef::from(entry)],
        message: format!(
            "Produce seq {} (conn {}) sent {key} epoch {} sequence {} ({records}), the header of the batch seq {} (conn {}) had stored{at}, but {differ}: answered as a duplicate, they were never written",
            entry.seq,
            entry.conn,
            b.producer_epoch,
            b.base_sequence,
            original.entry.seq,
            original.entry.conn,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::produce;
    use super::*;
    use crate::journal::RequestSummary;

    fn found(entries: &[Entry]) -> Vec<String> {
        check(entries, &Checks::default())
            .into_iter()
            .map(|v| v.message)
            .collect()
    }

    /// `entry` with its batch at another producer epoch.
    fn at_epoch(mut entry: Entry, epoch: i16) -> Entry {
        if let Some(RequestSummary::Produce(p)) = &mut entry.request {
            p.partitions[0].producer_epoch = epoch;
        }
        entry
    }

    #[test]
    fn a_retry_of_the_same_records_is_clean() {
        let entries = [produce(1, 7, (0, 2), 0, 1), produce(2, 7, (0, 2), 0, 1)];
        assert_eq!(found(&entries), Vec::<String>::new());
    }

    #[test]
    fn other_records_under_a_stored_batch_s_sequence_are_named_with_both_entries() {
        let entries = [produce(1, 7, (0, 2), 0, 1), produce(2, 7, (0, 2), 0, 2)];
        assert_eq!(
            found(&entries),
            ["Produce seq 2 (conn 1) sent producer 7 t-0 epoch 0 sequence 0 (2 records), the header of the batch seq 1 (conn 1) had stored at offset 0, but 2 of its 2 records differ: answered as a duplicate, they were never written"]
        );
    }

    #[test]
    fn only_the_last_five_batches_of_the_epoch_are_retries() {
        let mut entries = vec![produce(1, 7, (0, 1), 0, 1)];
        // Five more batches evict the first from Kafka's cache: a batch with its header is
        // then no retry (Kafka refuses it), whatever its answer here.
        entries.extend((1..=5).map(|i| produce(1 + i as u64, 7, (i, 1), i64::from(i), 9)));
        entries.push(produce(7, 7, (0, 1), 0, 2));
        assert_eq!(found(&entries), Vec::<String>::new());
        // The fifth before is still kept.
        entries.pop();
        entries.push(produce(7, 7, (1, 1), 1, 2));
        assert_eq!(found(&entries).len(), 1);
    }

    #[test]
    fn a_new_epoch_clears_the_batches_kept() {
        let entries = [
            produce(1, 7, (0, 1), 0, 1),
            at_epoch(produce(2, 7, (0, 1), 1, 2), 1),
            // Epoch 0's header again: an older epoch, no retry of anything kept.
            produce(3, 7, (0, 1), 0, 3),
        ];
        assert_eq!(found(&entries), Vec::<String>::new());
    }
}
