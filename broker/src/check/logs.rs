//! Log integrity, per partition, over the stored batches and the journal's Produce answers
//! (in process only: an exported journal has no logs).
//!
//! - `duplicate-write`: the same producer id, epoch and base sequence stored twice;
//! - `out-of-order-write`: an idempotent producer's batches stored in an order other than
//!   their sequence order (within one epoch);
//! - `lost-write`: a batch answered with success whose base offset, still in the log, does not
//!   hold it.

use std::collections::HashMap;

use super::{sequence_ahead, Checks, EntryRef, Violation};
use crate::journal::{Entry, RequestSummary};
use crate::state::ClusterState;

/// Runs the log-integrity checks.
pub fn check(state: &ClusterState, entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (name, topic) in &state.topics {
        for (index, partition) in topic.partitions.iter().enumerate() {
            let key = format!("{name}-{index}");
            let mut seen: HashMap<(i64, i16, i32), i64> = HashMap::new();
            let mut last_sequence: HashMap<(i64, i16), (i32, i64)> = HashMap::new();
            for batch in partition.log.batches() {
                let (pid, epoch, sequence) = batch.producer;
                if pid < 0 {
                    continue;
                }
                if let Some(first) = seen.insert((pid, epoch, sequence), batch.base_offset) {
                    if checks.runs("duplicate-write") {
                        violations.push(Violation {
                            kind: "duplicate-write".into(),
                            key: key.clone(),
                            entries: Vec::new(),
                            message: format!(
                                "producer {pid} epoch {epoch} sequence {sequence} is stored twice in {key}, at offsets {first} and {}",
                                batch.base_offset
                            ),
                        });
                    }
                }
                if let Some((previous, at)) =
                    last_sequence.insert((pid, epoch), (sequence, batch.base_offset))
                {
                    if sequence_ahead(i64::from(previous), i64::from(sequence)) < 0
                        && checks.runs("out-of-order-write")
                    {
                        violations.push(Violation {
                            kind: "out-of-order-write".into(),
                            key: key.clone(),
                            entries: Vec::new(),
                            message: format!(
                                "producer {pid} epoch {epoch}: sequence {sequence} is stored at offset {} after sequence {previous} at offset {at} in {key}",
                                batch.base_offset
                            ),
                        });
                    }
                }
            }
        }
    }
    if checks.runs("lost-write") {
        violations.extend(lost_writes(state, entries));
    }
    violations
}

fn lost_writes(state: &ClusterState, entries: &[Entry]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for entry in entries {
        let Some(RequestSummary::Produce(produce)) = &entry.request else {
            continue;
        };
        for b in produce
            .partitions
            .iter()
            .filter(|b| b.error_code == Some(0))
        {
            let Some(offset) = b.base_offset else {
                continue;
            };
            let key = format!("{}-{}", b.topic, b.partition);
            // A partition deleted (or re-created shorter) since says nothing about the write.
            let Some(log) = state
                .topics
                .get(&b.topic)
                .and_then(|t| t.partition(b.partition))
                .map(|p| &p.log)
            else {
                continue;
            };
            if offset < log.log_start_offset() || offset >= log.log_end_offset() {
                continue;
            }
            let stored = log
                .batches()
                .iter()
                .find(|s| s.base_offset == offset)
                .is_some_and(|s| s.producer == (b.producer_id, b.producer_epoch, b.base_sequence));
            if !stored {
                violations.push(Violation {
                    kind: "lost-write".into(),
                    key,
                    entries: vec![EntryRef::from(entry)],
                    message: format!(
                        "Produce seq {} (conn {}) was answered with offset {offset} for {}-{}, but the log holds no such batch there",
                        entry.seq, entry.conn, b.topic, b.partition
                    ),
                });
            }
        }
    }
    violations
}
