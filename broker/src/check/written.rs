//! Log integrity from the journal alone, for `kmock check` on an exported journal, which has
//! no partition logs: where each batch was written, as the Produce answers say, per partition
//! in arrival order. In process the same checks read the logs instead ([`super::logs`]).
//!
//! - `duplicate-write`: one batch — same producer id, epoch, base sequence and record count —
//!   answered as written at two different base offsets: the partition holds it twice (the
//!   message says whether the record digests show the same records). A retry Kafka
//!   recognises is answered with the original's offset, so it never counts.
//! - `lost-write`: two batches answered as written at overlapping offsets that are not one
//!   batch: one offset cannot hold both, so one of them is not where its producer was told
//!   it is. kmock's followers are never behind, so no failover truncates a log; only a deleted
//!   topic (or a reset, after which checks start afresh) gives offsets out again.
//!
//! Only batches answered NONE with a base offset count: one whose answer was lost was stored
//! somewhere the journal does not say. Weaker than the in-process checks, never stricter: a
//! batch answered at an offset that no other answer claims is not judged.

use std::collections::HashMap;

use super::{Checks, EntryRef, Severity, Violation};
use crate::journal::{Entry, ProducePartition, RequestSummary};

/// A batch answered as written: where, and which.
struct Written<'a> {
    entry: &'a Entry,
    batch: &'a ProducePartition,
    base_offset: i64,
}

impl Written<'_> {
    fn end(&self) -> i64 {
        self.base_offset + i64::from(self.batch.record_count.max(1))
    }

    /// Whether `other` is this batch by its idempotent header (the in-process checks' test
    /// too); a batch with this header and other records is `sequence-reused`'s.
    fn same_batch(&self, other: &ProducePartition) -> bool {
        let b = self.batch;
        b.producer_id >= 0
            && (
                b.producer_id,
                b.producer_epoch,
                b.base_sequence,
                b.record_count,
            ) == (
                other.producer_id,
                other.producer_epoch,
                other.base_sequence,
                other.record_count,
            )
    }
}

/// Runs `duplicate-write` and `lost-write` over the journal's answers.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    let (duplicates, losses) = (checks.runs("duplicate-write"), checks.runs("lost-write"));
    if !duplicates && !losses {
        return Vec::new();
    }
    let mut violations = Vec::new();
    let mut partitions: HashMap<(&str, i32), Vec<Written<'_>>> = HashMap::new();
    for entry in entries {
        match &entry.request {
            // A deleted topic's offsets are given out again from 0 (a deletion answered with
            // an error deleted nothing; one never answered may have).
            Some(RequestSummary::DeleteTopics(topics)) => {
                for t in topics
                    .iter()
                    .filter(|t| t.error_code.is_none_or(|c| c == 0))
                {
                    partitions.retain(|(topic, _), _| *topic != t.topic);
                }
            }
            Some(RequestSummary::Produce(produce)) => {
                for b in &produce.partitions {
                    let (Some(0), Some(base_offset)) = (b.error_code, b.base_offset) else {
                        continue;
                    };
                    let written = partitions.entry((&*b.topic, b.partition)).or_default();
                    let new = Written {
                        entry,
                        batch: b,
                        base_offset,
                    };
                    if let Some(v) = judge(written, &new, duplicates, losses) {
                        violations.push(v);
                    }
                    written.push(new);
                }
            }
            _ => {}
        }
    }
    violations
}

/// The violation, if any, of `new` against the batches written before it in its partition.
fn judge(
    written: &[Written<'_>],
    new: &Written<'_>,
    duplicates: bool,
    losses: bool,
) -> Option<Violation> {
    let b = new.batch;
    let key = format!("{}-{}", b.topic, b.partition);
    let violation = |kind: &str, earlier: &Written<'_>, message: String| Violation {
        kind: kind.into(),
        severity: Severity::Violation,
        key: key.clone(),
        entries: vec![EntryRef::from(earlier.entry), EntryRef::from(new.entry)],
        message,
    };
    for earlier in written.iter().rev() {
        let same = earlier.same_batch(b);
        if same && earlier.base_offset != new.base_offset && duplicates {
            let records = match (&earlier.batch.digests, &b.digests) {
                (Some(x), Some(y)) if x == y => ", the same records",
                (Some(_), Some(_)) => ", other records",
                _ => "",
            };
            return Some(violation(
                "duplicate-write",
                earlier,
                format!(
                    "producer {} epoch {} sequence {} ({} records) is written twice in {key}{records}: Produce seq {} (conn {}) was answered offset {} and Produce seq {} (conn {}) offset {}",
                    b.producer_id, b.producer_epoch, b.base_sequence, b.record_count,
                    earlier.entry.seq, earlier.entry.conn, earlier.base_offset,
                    new.entry.seq, new.entry.conn, new.base_offset
                ),
            ));
        }
        let overlap = earlier.base_offset < new.end() && new.base_offset < earlier.end();
        if !same && overlap && losses {
            return Some(violation(
                "lost-write",
                earlier,
                format!(
                    "Produce seq {} (conn {}) was answered offsets {}..{} of {key} and Produce seq {} (conn {}) offsets {}..{}, another batch: one of them is not where it was told",
                    earlier.entry.seq, earlier.entry.conn, earlier.base_offset, earlier.end(),
                    new.entry.seq, new.entry.conn, new.base_offset, new.end()
                ),
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::testing::produce;
    use super::*;

    fn found(entries: &[Entry]) -> Vec<(String, String)> {
        check(entries, &Checks::default())
            .into_iter()
            .map(|v| (v.kind, v.message))
            .collect()
    }

    #[test]
    fn batches_in_sequence_and_a_retry_answered_with_its_offset_are_clean() {
        let entries = [
            produce(1, 7, (0, 2), 0, 1),
            produce(2, 7, (2, 2), 2, 2),
            produce(3, 7, (0, 2), 0, 1), // a retry, answered with the original's offset
            produce(4, -1, (-1, 3), 4, 3),
        ];
        assert_eq!(found(&entries), vec![]);
    }

    #[test]
    fn one_batch_answered_at_two_offsets_is_a_duplicate_write() {
        let entries = [produce(1, 7, (0, 2), 0, 1), produce(2, 7, (0, 2), 2, 1)];
        assert_eq!(
            found(&entries),
            vec![(
                "duplicate-write".into(),
                "producer 7 epoch 0 sequence 0 (2 records) is written twice in t-0, the same records: Produce seq 1 (conn 1) was answered offset 0 and Produce seq 2 (conn 1) offset 2".into()
            )]
        );
    }

    #[test]
    fn two_batches_answered_at_overlapping_offsets_is_a_lost_write() {
        let entries = [produce(1, 7, (0, 2), 0, 1), produce(2, 8, (0, 3), 1, 2)];
        assert_eq!(
            found(&entries),
            vec![(
                "lost-write".into(),
                "Produce seq 1 (conn 1) was answered offsets 0..2 of t-0 and Produce seq 2 (conn 1) offsets 1..4, another batch: one of them is not where it was told".into()
            )]
        );
    }

    #[test]
    fn a_deleted_topic_gives_its_offsets_out_again() {
        let mut deletion: Entry = produce(2, 7, (0, 1), 0, 1);
        deletion.api = Some("DeleteTopics".into());
        deletion.request = Some(RequestSummary::DeleteTopics(vec![
            crate::journal::DeletedTopic {
                topic: "t".into(),
                error_code: Some(0),
            },
        ]));
        let entries = [
            produce(1, 7, (0, 2), 0, 1),
            deletion,
            produce(3, 8, (0, 2), 0, 2),
        ];
        assert_eq!(found(&entries), vec![]);
    }
}
