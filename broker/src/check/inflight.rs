//! `inflight-exceeded`: more Produce requests (acks ≠ 0) outstanding on one connection than the
//! client may have, for every producer connection.
//!
//! A request is outstanding from its arrival until its answer was written; one never answered
//! (its connection closed first) stays outstanding for the rest of its connection. The limit
//! is [`Checks::max_in_flight`]:
//!
//! - **set** (`max_in_flight(n)`, `kmock check --max-in-flight N`, `"max_in_flight"` in
//!   `POST /check`): every producer connection is held to it, with or without a producer id,
//!   so a client configured with one request in flight (Java's
//!   `max.in.flight.requests.per.connection=1`, Sarama's `Net.MaxOpenRequests = 1`,
//!   librdkafka's `max.in.flight=1`) that puts a second on the wire is named;
//! - **unset** (the default): only connections sending batches with a producer id are held,
//!   to [`IDEMPOTENT_MAX_IN_FLIGHT`], the bound of Kafka's idempotence (the broker keeps the
//!   last five batches of each producer to recognize a retry; the Java client and librdkafka
//!   refuse a larger limit with idempotence on). A producer without an id has no bound in
//!   Kafka, and correct clients go past five: librdkafka's non-idempotent default is
//!   `max.in.flight=1000000`, and pipelines dozens of requests under load; the Java client's
//!   default is 5 either way. A default that held them would be a false alarm.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::{Checks, EntryRef, Severity, Violation};
use crate::journal::{Entry, RequestSummary};

/// Produce requests an idempotent producer may have outstanding on one connection when no
/// limit is set: Kafka's bound for idempotence (`max.in.flight.requests.per.connection` ≤ 5).
pub const IDEMPOTENT_MAX_IN_FLIGHT: usize = 5;

/// For each Produce request, the Produce requests sent before it on its connection that were
/// still unanswered when it arrived; one violation per request over the limit.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    if !checks.runs("inflight-exceeded") {
        return Vec::new();
    }
    // Per connection: (answer time, seq) of each outstanding request, earliest answer first.
    let mut outstanding: HashMap<u64, BinaryHeap<Reverse<(u64, u64)>>> = HashMap::new();
    let by_seq: HashMap<u64, &Entry> = entries.iter().map(|e| (e.seq, e)).collect();
    let mut violations = Vec::new();
    for entry in entries {
        let Some(RequestSummary::Produce(p)) = &entry.request else {
            continue;
        };
        if p.acks == 0 {
            continue; // never answered, so never outstanding
        }
        let limit = match checks.max_in_flight {
            Some(limit) => limit,
            None if p.partitions.iter().any(|b| b.producer_id >= 0) => IDEMPOTENT_MAX_IN_FLIGHT,
            None => continue,
        };
        let pending = outstanding.entry(entry.conn).or_default();
        while pending
            .peek()
            .is_some_and(|Reverse((answered, _))| *answered <= entry.at_us)
        {
            pending.pop();
        }
        if pending.len() + 1 > limit {
            let mut involved: Vec<EntryRef> = pending
                .iter()
                .filter_map(|Reverse((_, seq))| by_seq.get(seq).map(|e| EntryRef::from(*e)))
                .collect();
            involved.sort_by_key(|e| e.seq);
            involved.push(EntryRef::from(entry));
            violations.push(Violation {
                kind: "inflight-exceeded".into(),
                severity: Severity::Violation,
                key: format!("conn {}", entry.conn),
                entries: involved,
                message: format!(
                    "Produce seq {} (conn {}, client id {}) was sent with {} Produce requests still unanswered on its connection, more than the limit of {limit}",
                    entry.seq,
                    entry.conn,
                    entry.client_id.as_deref().unwrap_or("none"),
                    pending.len()
                ),
            });
        }
        // An unanswered request stays outstanding for good.
        let answered = entry.response.as_ref().map_or(u64::MAX, |r| r.at_us);
        pending.push(Reverse((answered, entry.seq)));
    }
    violations
}
