//! `reorder-on-retry`, per producer and partition, in arrival order: records of a Produce
//! request that failed (answered with an error such as NOT_LEADER_OR_FOLLOWER, or never
//! answered and not applied: its connection closed first) were sent again and stored after
//! records the same producer first sent later to that partition. Kafka stores what arrives,
//! so the partition holds them out of produce order; this is what a producer without
//! idempotence does with retries and more than one request in flight (Java documents it for
//! `max.in.flight.requests.per.connection` > 1, librdkafka for `max.in.flight` > 1), and what
//! no producer configured for one request in flight may do.
//!
//! **Which producer.** With a producer id, the batches of that id. Without one, the client id:
//! a producer sends a partition's batches over its connection to the partition's leader, and
//! over a new one after its connection broke or the leader moved. So a resend on another
//! connection counts only when the failed request's connection sent nothing more to the
//! partition in between, and the later batch must have come over the failed request's
//! connection or the resend's. Two producers sharing a client id and a partition can still be
//! confused when one of them reconnects: give producers their own client id (the Java client
//! does by default) where it matters.
//!
//! **Which records** (`relation`). A batch resends a failed one when it carries some of its
//! records, and the batch stored in between must be new data, all produced after the failed
//! records: with the same producer id and epoch by sequences (overlapping; all after), else by
//! the record timestamp ranges of the batch headers (overlapping; all after; Sarama leaves the
//! largest timestamp unset, so its batches are taken to start where their first record is).
//! Where the journal cannot tell, there is no verdict. The Java client and librdkafka keep a
//! record's timestamp across retries; Sarama stamps a record when it adds it to a batch, so
//! its retries are recognized only when the application sets `ProducerMessage.Timestamp`. A
//! batch of new data sharing a millisecond with a failed one is taken for its resend: the
//! check can miss a reorder then, not invent one, as long as a producer's timestamps do not
//! go backwards.
//!
//! Requests with acks = 0 are not judged (never answered, never known to have failed).

use std::collections::HashMap;

use super::{applied_unanswered, sequence_ahead, Checks, EntryRef, Severity, Violation};
use crate::journal::{Entry, ProducePartition, RequestSummary};

/// Failed batches of one producer and partition kept waiting for their resend; past it the
/// oldest are forgotten (a producer that gave up on them).
const MAX_WAITING: usize = 10_000;

/// How the records of a later batch stand to those of an earlier one of the same producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    /// It carries some of the same records: a resend.
    Shares,
    /// Every record of it was produced after every record of the earlier one: new data.
    After,
    /// The journal cannot tell (neither is judged).
    Unknown,
}

/// How `later`'s records stand to `earlier`'s, as far as the journal tells: with the same
/// producer id and epoch, by sequences (overlapping, or all after); otherwise by the record
/// timestamp ranges `[first_timestamp, max_timestamp]` of the headers (overlapping, or all
/// after). Where a header leaves the largest timestamp unset, as Sarama's do, a batch is taken
/// to end at its first record when it is the earlier one and to run on when it is the later
/// one. The one function to change when the journal keeps record digests: a digest in common,
/// else new data.
fn relation(earlier: &ProducePartition, later: &ProducePartition) -> Relation {
    if earlier.producer_id >= 0
        && earlier.producer_id == later.producer_id
        && earlier.producer_epoch == later.producer_epoch
    {
        let d = sequence_ahead(
            i64::from(earlier.base_sequence),
            i64::from(later.base_sequence),
        );
        return if d < i64::from(earlier.record_count) && -d < i64::from(later.record_count) {
            Relation::Shares
        } else if d >= i64::from(earlier.record_count) {
            Relation::After
        } else {
            Relation::Unknown // an earlier sequence: a client renumbering, or reordering
        };
    }
    if earlier.first_timestamp < 0 || later.first_timestamp < 0 {
        return Relation::Unknown;
    }
    let known_max =
        |b: &ProducePartition| Some(b.max_timestamp).filter(|m| *m >= b.first_timestamp);
    let earlier_end = known_max(earlier).unwrap_or(earlier.first_timestamp);
    let later_end = known_max(later).unwrap_or(i64::MAX);
    if later.first_timestamp > earlier_end {
        Relation::After
    } else if earlier.first_timestamp <= later_end {
        Relation::Shares
    } else {
        Relation::Unknown
    }
}

/// Who sent a batch: its producer id, or without one its client id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Producer {
    Id(i64),
    ClientId(Option<std::sync::Arc<str>>),
}

/// A batch of one stream, with its entry.
#[derive(Clone, Copy)]
struct Sent<'a> {
    entry: &'a Entry,
    batch: &'a ProducePartition,
}

/// A stored batch and the arrival of the first request that carried any of its records.
struct Stored<'a> {
    sent: Sent<'a>,
    origin: u64,
}

/// A batch whose answer the client never saw succeed, waiting to be sent again.
#[derive(Clone, Copy)]
struct Waiting<'a> {
    /// This send.
    last: Sent<'a>,
    /// The first request that carried its records (this one, or the failed one it resent).
    first: Sent<'a>,
    /// Whether its records are in the log already (a fault dropped the answer after the
    /// broker applied this batch or an earlier send): their resend is a duplicate.
    applied: bool,
}

/// The batches of one producer to one partition so far.
#[derive(Default)]
struct Stream<'a> {
    /// Batches not yet sent again, in arrival order: refused, never handled, or applied
    /// with the answer lost.
    waiting: Vec<Waiting<'a>>,
    /// Stored batches, in arrival order.
    stored: Vec<Stored<'a>>,
    /// Per connection, the arrival of its last batch to this partition.
    last_on_conn: HashMap<u64, u64>,
}

/// Runs `reorder-on-retry`.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    if !checks.runs("reorder-on-retry") {
        return Vec::new();
    }
    let mut violations = Vec::new();
    let mut streams: HashMap<(Producer, &str, i32), Stream<'_>> = HashMap::new();
    for entry in entries {
        let Some(RequestSummary::Produce(produce)) = &entry.request else {
            continue;
        };
        if produce.acks == 0 {
            continue;
        }
        for batch in &produce.partitions {
            // Answered with success, or applied before a fault dropped the answer.
            let (answered_ok, applied) = match batch.error_code {
                Some(code) => (code == 0, code == 0),
                None => (false, applied_unanswered(entry)),
            };
            let producer = match batch.producer_id {
                id if id >= 0 => Producer::Id(id),
                _ => Producer::ClientId(entry.client_id.clone()),
            };
            let by_id = matches!(producer, Producer::Id(_));
            let stream = streams
                .entry((producer, &*batch.topic, batch.partition))
                .or_default();
            let sent = Sent { entry, batch };
            let resent = take_resent(stream, sent, by_id);
            let first = resent
                .iter()
                .map(|w| w.first)
                .min_by_key(|f| f.entry.seq)
                .unwrap_or(sent);
            if applied {
                // A resend of records that failed everywhere before, stored now after
                // records first sent later: the reorder.
                let failed = resent
                    .iter()
                    .filter(|w| !w.applied)
                    .min_by_key(|w| w.first.entry.seq);
                if let Some(v) = failed.and_then(|w| overtaken(stream, w, sent, by_id)) {
                    violations.push(v);
                }
                stream.stored.push(Stored {
                    sent,
                    origin: first.entry.seq,
                });
            }
            if !answered_ok {
                if stream.waiting.len() == MAX_WAITING {
                    stream.waiting.remove(0);
                }
                stream.waiting.push(Waiting {
                    last: sent,
                    first,
                    applied: applied || (!resent.is_empty() && resent.iter().all(|w| w.applied)),
                });
            }
            stream.last_on_conn.insert(entry.conn, entry.seq);
        }
    }
    violations
}

/// Takes off `stream`'s waiting list the batches `batch` sends again, in arrival order.
fn take_resent<'a>(stream: &mut Stream<'a>, batch: Sent<'a>, by_id: bool) -> Vec<Waiting<'a>> {
    let conn = batch.entry.conn;
    // Without a producer id, a resend on another connection only once the failed request's
    // connection stopped sending to this partition.
    let last_on_conn = &stream.last_on_conn;
    let same_producer = |w: &Waiting<'_>| {
        let f = w.last.entry;
        by_id || f.conn == conn || last_on_conn.get(&f.conn) == Some(&f.seq)
    };
    let (resent, waiting): (Vec<Waiting<'a>>, Vec<Waiting<'a>>) = stream
        .waiting
        .iter()
        .partition(|w| same_producer(w) && relation(w.last.batch, batch.batch) == Relation::Shares);
    stream.waiting = waiting;
    resent
}

/// The first stored batch of `stream` whose records were first sent after `failed`'s and
/// produced after them, by the same producer: `resend` stored `failed`'s records after it.
fn overtaken(
    stream: &Stream<'_>,
    failed: &Waiting<'_>,
    resend: Sent<'_>,
    by_id: bool,
) -> Option<Violation> {
    let f = failed.first.entry;
    let conns = [f.conn, failed.last.entry.conn, resend.entry.conn];
    // Stored in arrival order; a batch first sent after `f` arrived after it.
    let after = stream.stored.partition_point(|b| b.sent.entry.seq <= f.seq);
    let later = stream.stored[after..].iter().find(|b| {
        b.origin > f.seq
            && (by_id || conns.contains(&b.sent.entry.conn))
            && relation(failed.first.batch, b.sent.batch) == Relation::After
    })?;
    Some(reorder(failed.first, &later.sent, resend))
}

/// The violation: `failed`'s records, stored again by `resend`, came after `later`'s.
fn reorder(failed: Sent<'_>, later: &Sent<'_>, resend: Sent<'_>) -> Violation {
    let (f, l, r) = (failed.entry, later.entry, resend.entry);
    let b = failed.batch;
    let who = match (b.producer_id, f.client_id.as_deref()) {
        (id, _) if id >= 0 => format!("producer {id}"),
        (_, Some(client)) => format!("client {client}"),
        (_, None) => "client (no id)".to_owned(),
    };
    let (key, partition) = (
        format!("{who} {}-{}", b.topic, b.partition),
        format!("{}-{}", b.topic, b.partition),
    );
    let why = match b.error_code {
        Some(code) => format!("was refused with {}", super::error_name(code)),
        None => "got no answer (its connection closed)".to_owned(),
    };
    let offset = |s: &Sent<'_>| {
        s.batch.base_offset.map_or_else(
            || "an offset never answered".to_owned(),
            |o| format!("offset {o}"),
        )
    };
    Violation {
        kind: "reorder-on-retry".into(),
        severity: Severity::Violation,
        key: key.clone(),
        entries: [f, l, r].into_iter().map(EntryRef::from).collect(),
        message: format!(
            "Produce seq {} (conn {}) of {who} to {partition} {why}; seq {} (conn {}), sent after it, was stored at {} before seq {} (conn {}) stored its records again at {}: the partition holds them out of produce order",
            f.seq,
            f.conn,
            l.seq,
            l.conn,
            offset(later),
            r.seq,
            r.conn,
            offset(&resend)
        ),
    }
}
