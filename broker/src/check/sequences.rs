//! Produce sequence, per (producer id, topic, partition), in arrival order: every idempotent
//! batch the client sent is checked against the batches the broker stored before it (answered
//! NONE, or applied before a fault dropped the answer).
//!
//! - `epoch-regression`: a batch from an older producer epoch after a newer one;
//! - `epoch-not-reset`: the first batch of a new epoch does not start at sequence 0;
//! - `sequence-gap`: a batch starts after the next expected sequence (some were skipped);
//! - `sequence-reorder`: a batch starts before the next expected sequence without overlapping
//!   any batch sent before (it was sent after a later one);
//! - `sequence-overlap`: a batch overlaps sequences sent before without being a retry of the
//!   same batch (a re-batched retry: Kafka answers it OUT_OF_ORDER_SEQUENCE_NUMBER);
//!
//! A retry of a batch already stored (same epoch, base sequence and record count) is never a
//! violation; a batch the broker refused or never applied does not count as sent, and one in a
//! request never handled (cut off with its connection) is not judged. Sequences wrap from
//! 2^31−1 to 0.

use std::collections::HashMap;

use super::{
    applied_unanswered, sequence_ahead, Checks, EntryRef, Severity, Violation, SEQUENCE_SPACE,
};
use crate::journal::{Entry, RequestSummary};

#[derive(Default)]
struct Producer<'a> {
    epoch: i16,
    /// Next expected sequence: the end of the highest batch stored in this epoch.
    next: i64,
    /// `(base, count, entry)` of every batch stored in this epoch.
    sent: Vec<(i64, i64, &'a Entry)>,
}

/// Runs the produce-sequence checks.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut producers: HashMap<(i64, String, i32), Producer<'_>> = HashMap::new();
    for entry in entries {
        let Some(RequestSummary::Produce(produce)) = &entry.request else {
            continue;
        };
        // A request never handled (its connection closed before its turn, as behind one a
        // `disconnect` dropped) was judged by no broker: the client resends its batches, and
        // those are checked.
        if entry.response.is_none() && !applied_unanswered(entry) {
            continue;
        }
        for b in produce.partitions.iter().filter(|b| b.producer_id >= 0) {
            // Only batches the broker stored move the producer's state on; every batch handled
            // is checked against it.
            let applied = match b.error_code {
                Some(code) => code == 0,
                None => applied_unanswered(entry),
            };
            let key = format!("producer {} {}-{}", b.producer_id, b.topic, b.partition);
            let mut report = |kind: &str, involved: Vec<&Entry>, message: String| {
                if checks.runs(kind) {
                    violations.push(Violation {
                        kind: kind.into(),
                        severity: Severity::Violation,
                        key: key.clone(),
                        entries: involved.into_iter().map(EntryRef::from).collect(),
                        message,
                    });
                }
            };
            let (base, count) = (i64::from(b.base_sequence), i64::from(b.record_count.max(0)));
            let end = (base + count).rem_euclid(SEQUENCE_SPACE);
            let slot = (b.producer_id, b.topic.clone(), b.partition);
            let Some(state) = producers.get_mut(&slot) else {
                if applied {
                    producers.insert(
                        slot,
                        Producer {
                            epoch: b.producer_epoch,
                            next: end,
                            sent: vec![(base, count, entry)],
                        },
                    );
                }
                continue;
            };
            let last = state.sent.last().map(|(_, _, e)| *e).unwrap_or(entry);
            if b.producer_epoch < state.epoch {
                report(
                    "epoch-regression",
                    vec![last, entry],
                    format!(
                        "Produce seq {} (conn {}) sent {key} with epoch {} after seq {} had used epoch {}",
                        entry.seq, entry.conn, b.producer_epoch, last.seq, state.epoch
                    ),
                );
                continue;
            }
            if b.producer_epoch > state.epoch {
                if base != 0 {
                    report(
                        "epoch-not-reset",
                        vec![entry],
                        format!(
                            "Produce seq {} (conn {}) started epoch {} of {key} at sequence {base}, not 0",
                            entry.seq, entry.conn, b.producer_epoch
                        ),
                    );
                }
                if applied {
                    *state = Producer {
                        epoch: b.producer_epoch,
                        next: end,
                        sent: vec![(base, count, entry)],
                    };
                }
                continue;
            }
            if state
                .sent
                .iter()
                .any(|(sb, sc, _)| *sb == base && *sc == count)
            {
                continue; // a retry of a batch already stored
            }
            let ahead = sequence_ahead(state.next, base);
            let overlapped = state
                .sent
                .iter()
                .find(|(sb, sc, _)| {
                    let d = sequence_ahead(*sb, base);
                    d < *sc && -d < count
                })
                .map(|(_, _, e)| *e);
            if ahead > 0 {
                report(
                    "sequence-gap",
                    vec![last, entry],
                    format!(
                        "Produce seq {} (conn {}) sent {key} from sequence {base} but {} was next after seq {}: {ahead} sequences were skipped",
                        entry.seq, entry.conn, state.next, last.seq
                    ),
                );
            } else if let Some(earlier) = overlapped {
                report(
                    "sequence-overlap",
                    vec![earlier, entry],
                    format!(
                        "Produce seq {} (conn {}) sent {key} sequences {base}..{} overlapping the batch of seq {} without repeating it: a re-batched retry",
                        entry.seq, entry.conn, base + count, earlier.seq
                    ),
                );
            } else if ahead < 0 {
                report(
                    "sequence-reorder",
                    vec![last, entry],
                    format!(
                        "Produce seq {} (conn {}) sent {key} from sequence {base} after seq {} had already reached {}: batches went out of order",
                        entry.seq, entry.conn, last.seq, state.next
                    ),
                );
            }
            if applied {
                if sequence_ahead(state.next, end) > 0 {
                    state.next = end;
                }
                state.sent.push((base, count, entry));
            }
        }
    }
    violations
}
