//! Commit order, per (group, topic, partition), over OffsetCommit requests the broker accepted
//! (answered NONE for that partition), in arrival order.
//!
//! - `offset-commit-regression`: a committed offset lower than the last one committed (by the
//!   same member in the same generation, or by anyone with [`CommitScope::Group`]) — the
//!   committed position moved backwards, so a restart re-delivers messages;
//! - `commit-for-unassigned-partition`: a member commits a partition its SyncGroup assignment
//!   of that generation did not give it (when the assignment decodes as the consumer
//!   protocol's);
//! - `stale-generation-commit`: a commit whose generation is older than the group's newest,
//!   as JoinGroup answers tell it (whatever the broker answered: the client sent it).

use std::collections::{BTreeMap, HashMap};

use super::{Checks, CommitScope, EntryRef, Violation};
use crate::journal::{Entry, RequestSummary};

/// A commit accepted earlier: who, where, what.
struct Last<'a> {
    entry: &'a Entry,
    offset: i64,
}

/// Runs the commit-order checks.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    let mut violations = Vec::new();
    // (group, topic, partition, scope key) → last accepted commit.
    let mut last: HashMap<(String, String, i32, String), Last<'_>> = HashMap::new();
    // (group, generation, member) → assigned (topic, partition)s.
    let mut assignments: HashMap<(String, i32, String), Vec<(String, i32)>> = HashMap::new();
    // group → newest generation answered by JoinGroup.
    let mut generations: BTreeMap<String, i32> = BTreeMap::new();
    for entry in entries {
        match &entry.request {
            Some(RequestSummary::JoinGroup(j)) => {
                if let Some(g) = j.generation_id.filter(|g| *g >= 0) {
                    let newest = generations.entry(j.group_id.clone()).or_insert(g);
                    *newest = (*newest).max(g);
                }
            }
            Some(RequestSummary::SyncGroup(s)) => {
                if let Some(assigned) = &s.assignment {
                    let partitions = assigned
                        .iter()
                        .flat_map(|tp| tp.partitions.iter().map(move |p| (tp.topic.clone(), *p)))
                        .collect();
                    assignments.insert(
                        (s.group_id.clone(), s.generation_id, s.member_id.clone()),
                        partitions,
                    );
                }
            }
            Some(RequestSummary::OffsetCommit(c)) => {
                let key_of = |topic: &str, p: i32| format!("{}/{topic}-{p}", c.group_id);
                if checks.runs("stale-generation-commit") {
                    if let Some(&newest) = generations.get(&c.group_id) {
                        if c.generation_id >= 0 && c.generation_id < newest {
                            violations.push(Violation {
                                kind: "stale-generation-commit".into(),
                                key: c.group_id.clone(),
                                entries: vec![EntryRef::from(entry)],
                                message: format!(
                                    "OffsetCommit seq {} (conn {}) from member {} used generation {} after the group had reached generation {}",
                                    entry.seq, entry.conn, c.member_id, c.generation_id, newest
                                ),
                            });
                        }
                    }
                }
                for p in c.partitions.iter().filter(|p| p.error_code == Some(0)) {
                    if checks.runs("commit-for-unassigned-partition") && c.generation_id >= 0 {
                        let assignment = assignments.get(&(
                            c.group_id.clone(),
                            c.generation_id,
                            c.member_id.clone(),
                        ));
                        if let Some(assigned) = assignment {
                            if !assigned
                                .iter()
                                .any(|(t, ap)| *t == p.topic && *ap == p.partition)
                            {
                                violations.push(Violation {
                                    kind: "commit-for-unassigned-partition".into(),
                                    key: key_of(&p.topic, p.partition),
                                    entries: vec![EntryRef::from(entry)],
                                    message: format!(
                                        "OffsetCommit seq {} (conn {}) from member {} committed {}-{} in generation {}, but its assignment was {:?}",
                                        entry.seq, entry.conn, c.member_id, p.topic, p.partition, c.generation_id, assigned
                                    ),
                                });
                            }
                        }
                    }
                    if !checks.runs("offset-commit-regression") {
                        continue;
                    }
                    let allowed = checks
                        .allowed_regressions
                        .iter()
                        .any(|(g, t, ap)| *g == c.group_id && *t == p.topic && *ap == p.partition);
                    let scope = match checks.commit_scope {
                        CommitScope::Member => format!("{}@{}", c.member_id, c.generation_id),
                        CommitScope::Group => String::new(),
                    };
                    let slot = (c.group_id.clone(), p.topic.clone(), p.partition, scope);
                    if let Some(previous) = last.get(&slot) {
                        if p.offset < previous.offset && !allowed {
                            violations.push(Violation {
                                kind: "offset-commit-regression".into(),
                                key: key_of(&p.topic, p.partition),
                                entries: vec![EntryRef::from(previous.entry), EntryRef::from(entry)],
                                message: format!(
                                    "OffsetCommit seq {} (conn {}) set {} to {} after seq {} (conn {}) had set it to {}: the committed offset moved backwards",
                                    entry.seq,
                                    entry.conn,
                                    key_of(&p.topic, p.partition),
                                    p.offset,
                                    previous.entry.seq,
                                    previous.entry.conn,
                                    previous.offset
                                ),
                            });
                        }
                    }
                    last.insert(
                        slot,
                        Last {
                            entry,
                            offset: p.offset,
                        },
                    );
                }
            }
            _ => {}
        }
    }
    violations
}
