//! `end-txn-with-produce-in-flight`: an EndTxn of producer id P at epoch E arriving while a
//! transactional Produce batch of P at E, which arrived before it, was still unanswered.
//!
//! A transactional producer must have every Produce of the transaction answered before it
//! ends it (the Java client and librdkafka flush first): a Produce still on its way may be
//! appended after the markers, outside the transaction (KIP-890's hanging transaction, which
//! `produce-after-end-txn` names when it happens), or lost with the transaction the client
//! believes committed.
//!
//! A Produce counts as answered from the moment its answer began to be handed to the socket
//! (the response's `sending_us`; `at_us` in older journals), since a client cannot have read it
//! earlier. One never answered stays unanswered until its connection closed: at once for a
//! fault that closes it (`disconnect`, `disconnect_after_apply`), when its broker was taken
//! down, otherwise for the rest of the journal (a fault that `silence`s the answer, or a
//! client that gave up waiting: the request may still land, which is the hazard itself). The
//! journal does not say when a client closed a connection it gave up on, and a correct client
//! may time a Produce out, close, and abort: so an EndTxn is a violation only when each Produce
//! it overtook was answered later, and a warning when one of them was never answered.

use std::collections::HashMap;

use super::{Checks, EntryRef, Severity, Violation};
use crate::journal::{ClusterOperation, Entry, RequestSummary};

/// Runs `end-txn-with-produce-in-flight`.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    const KIND: &str = "end-txn-with-produce-in-flight";
    if !checks.runs(KIND) {
        return Vec::new();
    }
    // When each broker was taken down, in arrival order: its connections closed then.
    let downs: Vec<(i32, u64)> = entries
        .iter()
        .filter_map(|e| match &e.operation {
            Some(ClusterOperation::BrokerDown { node_id, .. }) => Some((*node_id, e.at_us)),
            _ => None,
        })
        .collect();
    // When a Produce stopped being outstanding: answered, or its connection closed.
    let settled = |p: &Entry| -> u64 {
        if let Some(r) = &p.response {
            return r.sending_us.unwrap_or(r.at_us);
        }
        if p.faults
            .iter()
            .any(|f| f.ends_with("disconnect") || f.ends_with("disconnect_after_apply"))
        {
            return p.at_us;
        }
        downs
            .iter()
            .find(|(broker, at)| *broker == p.broker && *at >= p.at_us)
            .map_or(u64::MAX, |(_, at)| *at)
    };
    // (producer id, epoch) → the transactional Produce requests sent since its last EndTxn.
    let mut sent: HashMap<(i64, i16), Vec<&Entry>> = HashMap::new();
    let mut violations = Vec::new();
    for entry in entries {
        match &entry.request {
            Some(RequestSummary::Produce(p)) if p.transactional_id.is_some() => {
                let mut ids: Vec<(i64, i16)> = p
                    .partitions
                    .iter()
                    .filter(|b| b.producer_id >= 0)
                    .map(|b| (b.producer_id, b.producer_epoch))
                    .collect();
                ids.dedup();
                for id in ids {
                    sent.entry(id).or_default().push(entry);
                }
            }
            Some(RequestSummary::EndTxn(end)) => {
                let Some(produces) = sent.remove(&(end.producer_id, end.producer_epoch)) else {
                    continue;
                };
                let pending: Vec<&Entry> = produces
                    .into_iter()
                    .filter(|p| settled(p) > entry.at_us)
                    .collect();
                if pending.is_empty() {
                    continue;
                }
                let seqs: Vec<String> = pending
                    .iter()
                    .map(|p| format!("seq {} (conn {})", p.seq, p.conn))
                    .collect();
                let mut involved: Vec<EntryRef> =
                    pending.iter().map(|p| EntryRef::from(*p)).collect();
                involved.push(EntryRef::from(entry));
                let never_answered = pending.iter().any(|p| p.response.is_none());
                violations.push(Violation {
                    kind: KIND.into(),
                    severity: if never_answered {
                        Severity::Warning
                    } else {
                        Severity::Violation
                    },
                    key: format!("producer {} epoch {}", end.producer_id, end.producer_epoch),
                    entries: involved,
                    message: format!(
                        "EndTxn seq {} (conn {}) of transactional id {} ({} the transaction of producer {} epoch {}) arrived while its Produce {} had not been answered{}",
                        entry.seq,
                        entry.conn,
                        end.transactional_id,
                        if end.committed { "committing" } else { "aborting" },
                        end.producer_id,
                        end.producer_epoch,
                        seqs.join(", "),
                        if never_answered {
                            " (one never was: the client may have given up on it)"
                        } else {
                            ""
                        },
                    ),
                });
            }
            _ => {}
        }
    }
    violations
}
