//! Produce sequence, per (producer id, topic, partition), in arrival order: every idempotent
//! batch the client sent is checked against the batches the broker stored before it (answered
//! NONE, or applied before a fault dropped the answer), as Apache Kafka's producer state
//! (`ProducerStateEntry`) judges it.
//!
//! - `epoch-regression`: a batch from an older producer epoch after a newer one;
//! - `epoch-not-reset`: the first batch of a new epoch does not start at sequence 0;
//! - `sequence-gap`: a batch starts after the next expected sequence (some were skipped);
//! - `sequence-reorder`: a batch starts before the next expected sequence without overlapping
//!   any batch sent before (it was sent after a later one), or repeats a batch stored too long
//!   ago to be recognised as a retry (a sequence restarted without a new epoch);
//! - `sequence-overlap`: a batch overlaps sequences sent before without being a retry of the
//!   same batch (a re-batched retry: Kafka answers it OUT_OF_ORDER_SEQUENCE_NUMBER);
//!
//! **Retries.** A batch is a retry, never a finding, when it has the epoch, base sequence and
//! record count of one of the last five batches stored for its producer and partition in that
//! epoch (Kafka's `ProducerStateEntry.findDuplicateBatch` over its `batchMetadata`,
//! [`BATCHES_RETAINED`]): Kafka answers it NONE with the original offset. The same batch after
//! five others were stored is not recognised: Kafka, and kmock, answer it
//! OUT_OF_ORDER_SEQUENCE_NUMBER (45), and it is judged as any other batch. A batch the broker
//! refused or never applied does not count as stored, and one in a request never handled (cut
//! off with its connection) is not judged. Sequences wrap from 2^31−1 to 0.
//!
//! **Severity follows the outcome.** An epoch or sequence anomaly is a
//! [`Severity::Warning`] when kmock refused the batch with OUT_OF_ORDER_SEQUENCE_NUMBER and
//! the producer recovered: a later batch to the same partition was stored with a higher epoch
//! of the same producer id, or with a new producer id (first stored after the refusal, same
//! client id).
//! That is what librdkafka ≥ 1.9 does (KIP-360: bump the epoch, start again at 0) and loses
//! nothing the broker acknowledged: a refused batch was not written, and every batch answered
//! NONE stays stored (the log checks `lost-write` and `duplicate-write` judge the log itself).
//! It stays a [`Severity::Violation`] when the producer did not recover (it keeps being
//! refused, or stops), when the batch was stored or its answer lost, or when kmock refused it
//! with another error (`epoch-regression` is answered INVALID_PRODUCER_EPOCH). Batches of a
//! producer and partition refused the same way one after another, with nothing stored between
//! them, are one finding that counts them: a producer refused over and over.

use std::collections::HashMap;

use super::{
    applied_unanswered, error_name, sequence_ahead, Checks, EntryRef, Severity, Violation,
    SEQUENCE_SPACE,
};
use crate::journal::{Entry, RequestSummary};
pub use crate::state::producer_state::BATCHES_RETAINED;

/// Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER error code.
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;

#[derive(Default)]
struct Producer<'a> {
    epoch: i16,
    /// Next expected sequence: the end of the highest batch stored in this epoch.
    next: i64,
    /// `(base, count, entry)` of every batch stored in this epoch, in the order stored; the
    /// last [`BATCHES_RETAINED`] are those a retry may repeat.
    sent: Vec<(i64, i64, &'a Entry)>,
    /// The finding of the last batch judged, while no batch has been stored since: an index
    /// into the findings, to count the same refusal repeated.
    open: Option<usize>,
}

/// An anomaly on one batch, before its outcome is known.
struct Anomaly<'a> {
    kind: &'static str,
    key: String,
    producer_id: i64,
    epoch: i16,
    topic: &'a str,
    partition: i32,
    client_id: Option<&'a str>,
    /// The entries it is about; the batch's own entry is the last.
    involved: Vec<&'a Entry>,
    message: String,
    /// What the broker did with the batch: `Some(0)` stored, `Some(code)` refused, `None`
    /// applied but unanswered.
    answer: Option<i16>,
    /// Later batches of the same producer and partition refused the same way before anything
    /// was stored: (how many, the last one).
    repeats: Option<(usize, &'a Entry)>,
}

/// A batch the broker stored, in arrival order: where a recovery is looked for.
struct Stored<'a> {
    entry: &'a Entry,
    producer_id: i64,
    epoch: i16,
    topic: &'a str,
    partition: i32,
}

/// Runs the produce-sequence checks.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    let mut anomalies: Vec<Anomaly<'_>> = Vec::new();
    let mut stored: Vec<Stored<'_>> = Vec::new();
    // The arrival seq of each producer id's first stored batch: a new producer id is one first
    // stored after a refusal.
    let mut first_stored: HashMap<i64, u64> = HashMap::new();
    let mut producers: HashMap<(i64, &str, i32), Producer<'_>> = HashMap::new();
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
            if applied {
                let (producer_id, epoch) = (b.producer_id, b.producer_epoch);
                stored.push(Stored {
                    entry,
                    producer_id,
                    epoch,
                    topic: &b.topic,
                    partition: b.partition,
                });
                first_stored.entry(producer_id).or_insert(entry.seq);
            }
            let key = format!("producer {} {}-{}", b.producer_id, b.topic, b.partition);
            let (base, count) = (i64::from(b.base_sequence), i64::from(b.record_count.max(0)));
            let end = (base + count).rem_euclid(SEQUENCE_SPACE);
            let slot = (b.producer_id, &*b.topic, b.partition);
            let Some(state) = producers.get_mut(&slot) else {
                if applied {
                    let sent = vec![(base, count, entry)];
                    let (epoch, next) = (b.producer_epoch, end);
                    producers.insert(
                        slot,
                        Producer {
                            epoch,
                            next,
                            sent,
                            open: None,
                        },
                    );
                }
                continue;
            };
            let last = state.sent.last().map(|(_, _, e)| *e).unwrap_or(entry);
            let seqs = format!("{key} sequences {base}..{}", base + count);
            let found: Option<(&'static str, Vec<&Entry>, String)> = if b.producer_epoch
                < state.epoch
            {
                Some((
                    "epoch-regression",
                    vec![last, entry],
                    format!(
                        "Produce seq {} (conn {}) sent {key} with epoch {} after seq {} had used epoch {}",
                        entry.seq, entry.conn, b.producer_epoch, last.seq, state.epoch
                    ),
                ))
            } else if b.producer_epoch > state.epoch {
                let found = (base != 0).then(|| {
                    (
                        "epoch-not-reset",
                        vec![entry],
                        format!(
                            "Produce seq {} (conn {}) started epoch {} of {key} at sequence {base}, not 0",
                            entry.seq, entry.conn, b.producer_epoch
                        ),
                    )
                });
                if applied {
                    let sent = vec![(base, count, entry)];
                    *state = Producer {
                        epoch: b.producer_epoch,
                        next: end,
                        sent,
                        open: None,
                    };
                }
                found
            } else {
                let same = |s: &(i64, i64, &Entry)| s.0 == base && s.1 == count;
                let retained = state.sent.len().saturating_sub(BATCHES_RETAINED);
                if state.sent[retained..].iter().any(same) {
                    continue; // a retry of one of the last five batches stored
                }
                let ahead = sequence_ahead(state.next, base);
                let repeated = state.sent.iter().find(|s| same(s)).map(|(_, _, e)| *e);
                let overlapped = state
                    .sent
                    .iter()
                    .find(|(sb, sc, _)| {
                        let d = sequence_ahead(*sb, base);
                        d < *sc && -d < count
                    })
                    .map(|(_, _, e)| *e);
                let found = if ahead > 0 {
                    Some((
                        "sequence-gap",
                        vec![last, entry],
                        format!(
                            "Produce seq {} (conn {}) sent {key} from sequence {base} but {} was next after seq {}: {ahead} sequences were skipped",
                            entry.seq, entry.conn, state.next, last.seq
                        ),
                    ))
                } else if let Some(original) = repeated {
                    let since =
                        state.sent.len() - 1 - state.sent.iter().position(same).unwrap_or(0);
                    let why = if base == 0 {
                        "the producer restarted its sequence at 0 without a new epoch"
                    } else {
                        "a retry sent too late, or a sequence reused without a new epoch"
                    };
                    Some((
                        "sequence-reorder",
                        vec![original, entry],
                        format!(
                            "Produce seq {} (conn {}) sent {seqs} again, as seq {} had, after {since} later batches were stored: Kafka recognises a retry among the last {BATCHES_RETAINED} batches only, so this one is out of order ({why})",
                            entry.seq, entry.conn, original.seq
                        ),
                    ))
                } else if let Some(earlier) = overlapped {
                    Some((
                        "sequence-overlap",
                        vec![earlier, entry],
                        format!(
                            "Produce seq {} (conn {}) sent {seqs} overlapping the batch of seq {} without repeating it: a re-batched retry",
                            entry.seq, entry.conn, earlier.seq
                        ),
                    ))
                } else {
                    (ahead < 0).then(|| {
                        (
                            "sequence-reorder",
                            vec![last, entry],
                            format!(
                                "Produce seq {} (conn {}) sent {key} from sequence {base} after seq {} had already reached {}: batches went out of order",
                                entry.seq, entry.conn, last.seq, state.next
                            ),
                        )
                    })
                };
                if applied {
                    if sequence_ahead(state.next, end) > 0 {
                        state.next = end;
                    }
                    state.sent.push((base, count, entry));
                }
                found
            };
            if let Some((kind, involved, message)) = found {
                let answer = b.error_code;
                let open = state.open.and_then(|i| anomalies.get_mut(i));
                match open {
                    // The same refusal again, nothing stored since: counted on the first.
                    Some(a)
                        if a.kind == kind
                            && a.answer == answer
                            && a.epoch == b.producer_epoch
                            && !applied =>
                    {
                        let n = a.repeats.map_or(0, |(n, _)| n);
                        a.repeats = Some((n + 1, entry));
                    }
                    _ => {
                        state.open = Some(anomalies.len());
                        anomalies.push(Anomaly {
                            kind,
                            key,
                            producer_id: b.producer_id,
                            epoch: b.producer_epoch,
                            topic: &b.topic,
                            partition: b.partition,
                            client_id: entry.client_id.as_deref(),
                            involved,
                            message,
                            answer,
                            repeats: None,
                        });
                    }
                }
            }
            if applied {
                state.open = None; // something was stored: a refusal after it is a new finding
            }
        }
    }
    anomalies
        .into_iter()
        .filter(|a| checks.runs(a.kind))
        .map(|a| verdict(a, &stored, &first_stored))
        .collect()
}

/// The finding an anomaly makes once its outcome is known: a warning when kmock answered
/// OUT_OF_ORDER_SEQUENCE_NUMBER and the producer recovered on that partition afterwards (see
/// the module header),
/// else a violation; the sentence says which.
fn verdict(a: Anomaly<'_>, stored: &[Stored<'_>], first_stored: &HashMap<i64, u64>) -> Violation {
    let own = a.involved.last().map_or(0, |e| e.seq);
    let later = &stored[stored.partition_point(|s| s.entry.seq <= own)..];
    let recovery = (a.answer == Some(OUT_OF_ORDER_SEQUENCE_NUMBER))
        .then(|| {
            later.iter().find(|s| {
                if (s.topic, s.partition) != (a.topic, a.partition) {
                    false
                } else if s.producer_id == a.producer_id {
                    s.epoch > a.epoch
                } else {
                    a.client_id.is_some()
                        && s.entry.client_id.as_deref() == a.client_id
                        && first_stored
                            .get(&s.producer_id)
                            .is_some_and(|&first| first > own)
                }
            })
        })
        .flatten();
    let repeats = match a.repeats {
        None => String::new(),
        Some((n, e)) => format!(
            ", and {n} later batch{} of it the same way up to Produce seq {} (conn {})",
            if n == 1 { "" } else { "es" },
            e.seq,
            e.conn
        ),
    };
    let outcome = match (a.answer, recovery) {
        (Some(code), Some(s)) => {
            let how = if s.producer_id == a.producer_id {
                format!("with epoch {}", s.epoch)
            } else {
                format!("as producer {}", s.producer_id)
            };
            format!(
                "kmock answered it {}{repeats}, and the producer recovered: Produce seq {} (conn {}) had a batch of it stored {how}",
                error_name(code),
                s.entry.seq,
                s.entry.conn
            )
        }
        (Some(0), None) => "the broker stored it".to_owned(),
        (Some(OUT_OF_ORDER_SEQUENCE_NUMBER), None) => format!(
            "kmock answered it {}{repeats}, and the producer never recovered: no batch to that partition was stored afterwards with a new epoch or a new producer id",
            error_name(OUT_OF_ORDER_SEQUENCE_NUMBER)
        ),
        (Some(code), None) => format!("kmock answered it {}{repeats}", error_name(code)),
        (None, _) => "its answer was lost with its connection, so the journal does not say whether kmock stored or refused it, and no recovery is credited".to_owned(),
    };
    let mut involved: Vec<EntryRef> = a.involved.iter().map(|e| EntryRef::from(*e)).collect();
    involved.extend(a.repeats.map(|(_, e)| EntryRef::from(e)));
    involved.extend(recovery.map(|s| EntryRef::from(s.entry)));
    involved.sort_by_key(|e| e.seq);
    involved.dedup();
    Violation {
        kind: a.kind.into(),
        severity: if recovery.is_some() {
            Severity::Warning
        } else {
            Severity::Violation
        },
        key: a.key,
        entries: involved,
        message: format!("{}; {outcome}", a.message),
    }
}
