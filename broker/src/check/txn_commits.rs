//! `txn-offset-commit-regression`: an offset committed by a committed transaction lower than
//! the one the last committed transaction left for the same group/topic/partition (by the
//! same member in the same generation, or by anyone with [`CommitScope::Group`]), as
//! `offset-commit-regression` judges plain commits.
//!
//! A TxnOffsetCommit is only pending until its transaction ends (Kafka's
//! `pendingTransactionalOffsetCommits`): the offsets become the group's committed ones when the
//! transaction's EndTxn commits, and are dropped when it aborts. So each transaction's offsets
//! (the last one it sent per partition, applied: answered NONE, or applied before a fault
//! dropped the answer) are compared in the order of the EndTxn that committed them (the first
//! applied EndTxn of the same transactional id, producer id and epoch after them); an aborted
//! transaction's offsets are never compared. A transaction ended by the coordinator (a fencing
//! InitProducerId, its timeout) has no EndTxn: it aborted, and its offsets are dropped too.

use std::collections::{BTreeMap, HashMap};

use super::{applied_unanswered, ended_txn, Checks, CommitScope, EntryRef, Severity, Violation};
use crate::journal::{Entry, RequestSummary};

/// Runs `txn-offset-commit-regression`.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    const KIND: &str = "txn-offset-commit-regression";
    if !checks.runs(KIND) {
        return Vec::new();
    }
    // (group, topic, partition, scope key).
    type Slot = (String, String, i32, String);
    // Per slot, the last offset a transaction applied and its TxnOffsetCommit.
    type Pending<'a> = BTreeMap<Slot, (&'a Entry, i64)>;
    // Open transactions, by (transactional id, producer id, epoch).
    let mut open: HashMap<(&str, i64, i16), Pending<'_>> = HashMap::new();
    // Per slot, the last committed transaction's offset: (TxnOffsetCommit, EndTxn, offset).
    let mut last: HashMap<Slot, (&Entry, &Entry, i64)> = HashMap::new();
    let mut violations = Vec::new();
    for entry in entries {
        match &entry.request {
            Some(RequestSummary::TxnOffsetCommit(c)) => {
                let scope = match checks.commit_scope {
                    CommitScope::Member => format!("{}@{}", c.member_id, c.generation_id),
                    CommitScope::Group => String::new(),
                };
                let txn = open
                    .entry((&c.transactional_id, c.producer_id, c.producer_epoch))
                    .or_default();
                for p in &c.partitions {
                    let applied = match p.error_code {
                        Some(code) => code == 0,
                        None => applied_unanswered(entry),
                    };
                    if applied {
                        let slot = (
                            c.group_id.clone(),
                            p.topic.clone(),
                            p.partition,
                            scope.clone(),
                        );
                        txn.insert(slot, (entry, p.offset));
                    }
                }
            }
            Some(RequestSummary::EndTxn(_)) => {
                let Some(end) = ended_txn(entry) else {
                    continue;
                };
                let Some(offsets) = open.remove(&(
                    end.transactional_id.as_str(),
                    end.producer_id,
                    end.producer_epoch,
                )) else {
                    continue;
                };
                if !end.committed {
                    continue; // aborted: the offsets were dropped
                }
                for (slot, (commit, offset)) in offsets {
                    let (group, topic, partition, _) = &slot;
                    let allowed = checks
                        .allowed_regressions
                        .iter()
                        .any(|(g, t, p)| g == group && t == topic && p == partition);
                    if let Some((was_commit, was_end, was)) = last.get(&slot) {
                        if offset < *was && !allowed {
                            let key = format!("{group}/{topic}-{partition}");
                            violations.push(Violation {
                                kind: KIND.into(),
                                severity: Severity::Violation,
                                key: key.clone(),
                                entries: vec![
                                    EntryRef::from(*was_commit),
                                    EntryRef::from(*was_end),
                                    EntryRef::from(commit),
                                    EntryRef::from(entry),
                                ],
                                message: format!(
                                    "TxnOffsetCommit seq {} (conn {}) of transactional id {}, committed by EndTxn seq {}, set {key} to {offset} after seq {} (conn {}), committed by EndTxn seq {}, had set it to {was}: the committed offset moved backwards",
                                    commit.seq,
                                    commit.conn,
                                    end.transactional_id,
                                    entry.seq,
                                    was_commit.seq,
                                    was_commit.conn,
                                    was_end.seq,
                                ),
                            });
                        }
                    }
                    last.insert(slot, (commit, entry, offset));
                }
            }
            _ => {}
        }
    }
    violations
}
