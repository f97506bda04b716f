//! Commit order, per (group, topic, partition), over OffsetCommit requests the broker applied
//! (answered NONE for that partition, or applied before a fault dropped the answer), in
//! arrival order.
//!
//! - `offset-commit-regression`: a committed offset lower than the last one committed (by the
//!   same member in the same generation, or by anyone with [`CommitScope::Group`]) — the
//!   committed position moved backwards, so a restart re-delivers messages;
//! - `commit-for-unassigned-partition`: a member commits a partition that neither its SyncGroup
//!   assignment of that generation nor its previous one gave it (a cooperative rebalance
//!   revokes partitions after the new assignment), when assignments decode as the consumer
//!   protocol's;
//! - `stale-generation-commit`: a commit whose generation is older than one the same member had
//!   already been answered by JoinGroup when the commit arrived (whatever the broker answered:
//!   the client sent it).

use std::collections::{BTreeMap, HashMap};

use super::{applied_unanswered, Checks, CommitScope, EntryRef, Severity, Violation};
use crate::journal::{Entry, RequestSummary};

/// `(topic, partition)`s of an assignment.
type Partitions = Vec<(String, i32)>;

/// A commit accepted earlier: who, where, what.
struct Last<'a> {
    entry: &'a Entry,
    offset: i64,
}

/// Runs the commit-order checks.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    let mut violations = Vec::new();
    // (group, topic, partition, scope key) → last commit applied.
    let mut last: HashMap<(String, String, i32, String), Last<'_>> = HashMap::new();
    // (group, member) → generation → assigned (topic, partition)s.
    let mut assignments: HashMap<(String, String), BTreeMap<i32, Partitions>> = HashMap::new();
    // (group, member) → (answered at, generation) of each JoinGroup answer the member got.
    let mut joined: HashMap<(String, String), Vec<(u64, i32)>> = HashMap::new();
    for entry in entries {
        if let (Some(RequestSummary::JoinGroup(j)), Some(response)) =
            (&entry.request, &entry.response)
        {
            if let (Some(g), Some(member)) =
                (j.generation_id.filter(|g| *g >= 0), &j.assigned_member_id)
            {
                joined
                    .entry((j.group_id.clone(), member.clone()))
                    .or_default()
                    .push((response.at_us, g));
            }
        }
    }
    for entry in entries {
        match &entry.request {
            Some(RequestSummary::SyncGroup(s)) => {
                if let Some(assigned) = &s.assignment {
                    let partitions = assigned
                        .iter()
                        .flat_map(|tp| tp.partitions.iter().map(move |p| (tp.topic.clone(), *p)))
                        .collect();
                    assignments
                        .entry((s.group_id.clone(), s.member_id.clone()))
                        .or_default()
                        .insert(s.generation_id, partitions);
                }
            }
            Some(RequestSummary::OffsetCommit(c)) => {
                let key_of = |topic: &str, p: i32| format!("{}/{topic}-{p}", c.group_id);
                let member = (c.group_id.clone(), c.member_id.clone());
                // The newest generation this member had been answered before the commit arrived.
                let known = joined.get(&member).and_then(|answers| {
                    answers
                        .iter()
                        .filter(|(at, _)| *at < entry.at_us)
                        .map(|(_, g)| *g)
                        .max()
                });
                if checks.runs("stale-generation-commit") {
                    if let Some(newest) =
                        known.filter(|n| c.generation_id >= 0 && c.generation_id < *n)
                    {
                        violations.push(Violation {
                            kind: "stale-generation-commit".into(),
                            severity: Severity::Violation,
                            key: c.group_id.clone(),
                            entries: vec![EntryRef::from(entry)],
                            message: format!(
                                "OffsetCommit seq {} (conn {}) from member {} used generation {} after that member had joined generation {}",
                                entry.seq, entry.conn, c.member_id, c.generation_id, newest
                            ),
                        });
                    }
                }
                for p in &c.partitions {
                    let applied = match p.error_code {
                        Some(code) => code == 0,
                        None => applied_unanswered(entry),
                    };
                    if !applied {
                        continue;
                    }
                    if checks.runs("commit-for-unassigned-partition") && c.generation_id >= 0 {
                        // The generation's assignment, and (for cooperative rebalancing, where
                        // partitions are revoked after the new assignment) the one before it.
                        let owned = assignments.get(&member).and_then(|by_generation| {
                            let current = by_generation.get(&c.generation_id)?;
                            let previous = by_generation
                                .range(..c.generation_id)
                                .next_back()
                                .map(|(_, p)| p);
                            Some((current, previous))
                        });
                        if let Some((current, previous)) = owned {
                            let has = |list: &Vec<(String, i32)>| {
                                list.iter()
                                    .any(|(t, ap)| *t == p.topic && *ap == p.partition)
                            };
                            if !has(current) && !previous.is_some_and(has) {
                                violations.push(Violation {
                                    kind: "commit-for-unassigned-partition".into(),
                                    severity: Severity::Violation,
                                    key: key_of(&p.topic, p.partition),
                                    entries: vec![EntryRef::from(entry)],
                                    message: format!(
                                        "OffsetCommit seq {} (conn {}) from member {} committed {}-{} in generation {}, but its assignment was {:?}",
                                        entry.seq, entry.conn, c.member_id, p.topic, p.partition, c.generation_id, current
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
                                severity: Severity::Violation,
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
