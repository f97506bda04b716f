//! `read-committed-saw-aborted`: a read_committed Fetch answered with records of an aborted
//! transaction that its aborted-transactions list did not name, so the consumer delivers them.
//!
//! Kafka answers read_committed up to the last stable offset, and lists the aborted
//! transactions met in the offsets read (`collectAbortedTransactions`): the client drops the
//! records of each listed producer id from the listed first offset up to its abort marker.
//! Records of an aborted transaction are thus only seen when the list misses them, or when
//! they were answered past the last stable offset, while their transaction was still open.
//! kmock must never do either: this is an invariant of kmock itself, read from the journal.
//!
//! A transactional batch's outcome is that of the first applied EndTxn (answered NONE, or
//! applied before a fault dropped the answer) of its producer id and epoch after it; a
//! transaction the coordinator aborted (fencing, timeout) has none and is not judged, nor is a
//! batch whose offset was never answered, nor a Fetch answer recorded without its last offset
//! and aborted list (older journals). A deleted topic's offsets are not compared with those of
//! a topic created again under its name.

use std::collections::HashMap;

use super::{ended_txn, Checks, EntryRef, Severity, Violation};
use crate::journal::{Entry, RequestSummary};

/// A transactional batch stored, and the EndTxn that aborted its transaction.
struct Aborted<'a> {
    producer_id: i64,
    first: i64,
    last: i64,
    produce: &'a Entry,
    end: &'a Entry,
}

const READ_COMMITTED: i8 = 1;

/// Runs `read-committed-saw-aborted`.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    const KIND: &str = "read-committed-saw-aborted";
    if !checks.runs(KIND) {
        return Vec::new();
    }
    // Per topic, the seqs of deletions that were not refused: a topic's incarnation at an
    // entry is the number of them before it.
    let mut deletions: HashMap<&str, Vec<u64>> = HashMap::new();
    for entry in entries {
        if let Some(RequestSummary::DeleteTopics(topics)) = &entry.request {
            for t in topics
                .iter()
                .filter(|t| t.error_code.is_none_or(|c| c == 0))
            {
                deletions
                    .entry(t.topic.as_str())
                    .or_default()
                    .push(entry.seq);
            }
        }
    }
    let incarnation = |topic: &str, seq: u64| {
        deletions
            .get(topic)
            .map_or(0, |d| d.iter().filter(|s| **s < seq).count())
    };
    // (topic, partition, incarnation) → aborted batches stored there.
    let mut aborted: HashMap<(&str, i32, usize), Vec<Aborted<'_>>> = HashMap::new();
    // (producer id, epoch) → stored batches of its open transaction.
    let mut open: HashMap<(i64, i16), Vec<(&Entry, usize)>> = HashMap::new();
    for entry in entries {
        match &entry.request {
            Some(RequestSummary::Produce(p)) if p.transactional_id.is_some() => {
                for (i, b) in p.partitions.iter().enumerate() {
                    if b.producer_id >= 0 && b.error_code == Some(0) && b.base_offset.is_some() {
                        open.entry((b.producer_id, b.producer_epoch))
                            .or_default()
                            .push((entry, i));
                    }
                }
            }
            Some(RequestSummary::EndTxn(_)) => {
                let Some(end) = ended_txn(entry) else {
                    continue;
                };
                let Some(batches) = open.remove(&(end.producer_id, end.producer_epoch)) else {
                    continue;
                };
                if end.committed {
                    continue;
                }
                for (produce, i) in batches {
                    let Some(RequestSummary::Produce(p)) = &produce.request else {
                        continue;
                    };
                    let b = &p.partitions[i];
                    let first = b.base_offset.unwrap_or_default();
                    aborted
                        .entry((&b.topic, b.partition, incarnation(&b.topic, produce.seq)))
                        .or_default()
                        .push(Aborted {
                            producer_id: b.producer_id,
                            first,
                            last: first + i64::from(b.record_count.max(1)) - 1,
                            produce,
                            end: entry,
                        });
                }
            }
            _ => {}
        }
    }
    let mut violations = Vec::new();
    for entry in entries {
        let Some(RequestSummary::Fetch(f)) = &entry.request else {
            continue;
        };
        if f.isolation_level != READ_COMMITTED {
            continue;
        }
        let answered_us = entry.response.as_ref().map_or(u64::MAX, |r| r.at_us);
        for p in &f.partitions {
            let (Some(0), Some(last), Some(listed)) =
                (p.error_code, p.last_offset, &p.aborted_transactions)
            else {
                continue;
            };
            let key = (
                p.topic.as_str(),
                p.partition,
                incarnation(&p.topic, entry.seq),
            );
            for a in aborted.get(&key).into_iter().flatten() {
                let answered = a.first <= last && a.last >= p.fetch_offset;
                let named = listed
                    .iter()
                    .any(|t| t.producer_id == a.producer_id && t.first_offset <= a.first);
                if !answered || named {
                    continue;
                }
                let why = if a.end.at_us > answered_us {
                    format!(
                        "while that transaction was still open (EndTxn seq {} aborted it later): past the last stable offset",
                        a.end.seq
                    )
                } else {
                    format!(
                        "of a transaction EndTxn seq {} had aborted, without naming it among the answer's aborted transactions",
                        a.end.seq
                    )
                };
                violations.push(Violation {
                    kind: KIND.into(),
                    severity: Severity::Violation,
                    key: format!("{}-{}", p.topic, p.partition),
                    entries: in_order(&[a.produce, a.end, entry]),
                    message: format!(
                        "read_committed Fetch seq {} (conn {}) was answered {}-{} from offset {} to {last}, holding producer {}'s records at offsets {}..={} (Produce seq {}) {why}: the consumer delivers aborted records",
                        entry.seq,
                        entry.conn,
                        p.topic,
                        p.partition,
                        p.fetch_offset,
                        a.producer_id,
                        a.first,
                        a.last,
                        a.produce.seq,
                    ),
                });
            }
        }
    }
    violations
}

/// References to `entries`, in arrival order.
fn in_order(entries: &[&Entry]) -> Vec<EntryRef> {
    let mut refs: Vec<EntryRef> = entries.iter().map(|e| EntryRef::from(*e)).collect();
    refs.sort_by_key(|r| r.seq);
    refs
}
