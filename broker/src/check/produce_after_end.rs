//! `produce-after-end-txn`: a transactional Produce batch of producer id P at epoch E arriving
//! after an EndTxn of P at E was applied (answered NONE, or applied before a fault dropped the
//! answer) and before P's next transaction began (its next AddPartitionsToTxn or
//! AddOffsetsToTxn not refused): the batch belongs to no transaction. This is KIP-890's hanging
//! transaction: a broker without its verification (Kafka before 3.6, or with
//! `transaction.partition.verification.enable=false`) stores the batch and opens a
//! transaction on the partition that no marker will ever close, holding back the partition's
//! last stable offset and every read_committed consumer. kmock verifies, as Kafka 3.6+ does, so
//! the batch is refused there; the client sent it either way, and its message says which.

use std::collections::HashMap;

use super::{applied_unanswered, ended_txn, error_name, Checks, EntryRef, Severity, Violation};
use crate::journal::{Entry, RequestSummary};

/// Runs `produce-after-end-txn`.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    const KIND: &str = "produce-after-end-txn";
    if !checks.runs(KIND) {
        return Vec::new();
    }
    // (producer id, epoch) → the EndTxn that ended its last transaction, until the next began.
    let mut ended: HashMap<(i64, i16), &Entry> = HashMap::new();
    let mut violations = Vec::new();
    for entry in entries {
        match &entry.request {
            Some(RequestSummary::EndTxn(_)) => {
                if let Some(end) = ended_txn(entry) {
                    ended.insert((end.producer_id, end.producer_epoch), entry);
                }
            }
            Some(RequestSummary::AddPartitionsToTxn(a)) if began(entry) => {
                ended.remove(&(a.producer_id, a.producer_epoch));
            }
            Some(RequestSummary::AddOffsetsToTxn(a)) if began(entry) => {
                ended.remove(&(a.producer_id, a.producer_epoch));
            }
            Some(RequestSummary::Produce(p)) => {
                let Some(txn_id) = &p.transactional_id else {
                    continue;
                };
                for b in &p.partitions {
                    let Some(end_entry) = ended.get(&(b.producer_id, b.producer_epoch)) else {
                        continue;
                    };
                    let Some(RequestSummary::EndTxn(end)) = &end_entry.request else {
                        continue;
                    };
                    let outcome = match (b.error_code, b.base_offset) {
                        (Some(0), Some(offset)) => format!(
                            "the broker stored it at offset {offset}, in a transaction no marker will close (KIP-890's hanging transaction)"
                        ),
                        (Some(code), _) if code != 0 => format!(
                            "refused with {} (KIP-890 verification); a broker without it would have left a transaction hanging on the partition",
                            error_name(code)
                        ),
                        _ => "unanswered; a broker without KIP-890 verification would have left a transaction hanging on the partition".to_owned(),
                    };
                    violations.push(Violation {
                        kind: KIND.into(),
                        severity: Severity::Violation,
                        key: format!("producer {} {}-{}", b.producer_id, b.topic, b.partition),
                        entries: vec![EntryRef::from(*end_entry), EntryRef::from(entry)],
                        message: format!(
                            "Produce seq {} (conn {}) of transactional id {txn_id} wrote {}-{} as producer {} epoch {} after EndTxn seq {} (conn {}) had {} that transaction and before the producer began another: {outcome}",
                            entry.seq,
                            entry.conn,
                            b.topic,
                            b.partition,
                            b.producer_id,
                            b.producer_epoch,
                            end_entry.seq,
                            end_entry.conn,
                            if end.committed { "committed" } else { "aborted" },
                        ),
                    });
                }
            }
            _ => {}
        }
    }
    violations
}

/// Whether an AddPartitionsToTxn or AddOffsetsToTxn began (or joined) a transaction: not
/// refused (a partition answered NONE, or applied before a fault dropped the answer).
fn began(entry: &Entry) -> bool {
    match &entry.request {
        Some(RequestSummary::AddPartitionsToTxn(a)) => {
            a.partitions.iter().any(|p| match p.error_code {
                Some(code) => code == 0,
                None => applied_unanswered(entry),
            })
        }
        Some(RequestSummary::AddOffsetsToTxn(a)) => match a.error_code {
            Some(code) => code == 0,
            None => applied_unanswered(entry),
        },
        _ => false,
    }
}
