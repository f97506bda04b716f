//! Commit order, per (group, topic, partition), over OffsetCommit requests the broker applied
//! (answered NONE for that partition, or applied before a fault dropped the answer), in
//! arrival order.
//!
//! - `offset-commit-regression`: a committed offset lower than the last one committed (by the
//!   same member in the same generation, or by anyone with [`CommitScope::Group`]) — the
//!   committed position moved backwards, so a restart re-delivers messages;
//! - `commit-for-unassigned-partition`: a member commits a partition it did not own when the
//!   commit arrived, as the group's rebalance protocol says (`rebalance`): under an
//!   eager one (`range`, `roundrobin`, `sticky`) it owns nothing from its JoinGroup until its
//!   SyncGroup answer, then exactly its new assignment; under a cooperative one
//!   (`cooperative-sticky`) it keeps its assignment across the rebalance, and may still commit
//!   what the new assignment took away until it joins again. Judged when its assignments decode
//!   as the consumer protocol's;
//! - `stale-generation-commit`: a commit whose generation is older than one the same member had
//!   already been answered by JoinGroup when the commit arrived: a warning when the broker
//!   refused it (ILLEGAL_GENERATION; librdkafka under `cooperative-sticky` sends its commits at
//!   the old generation until its SyncGroup answer, and commits again in the new one), a
//!   violation when the broker stored it. A KIP-848 member's member epoch is its generation,
//!   from its ConsumerGroupHeartbeat answers: a refused commit at an older epoch
//!   (STALE_MEMBER_EPOCH) is a warning; a stored one is not reported here, as Kafka 4.4 stores
//!   it for partitions the member has owned since that epoch (KIP-1251), and
//!   `commit-for-unassigned-partition` judges the others. The same holds for a classic member
//!   while its group is a consumer group (KIP-848's online migration: from a ConsumerGroupHeartbeat
//!   answered in the group or a `group_converted` entry to `consumer`, until one to `classic`),
//!   whose generation is its member epoch.

use std::collections::{HashMap, HashSet};

use super::rebalance::{Members, Owned};
use super::{applied_unanswered, Checks, CommitScope, EntryRef, Severity, Violation};
use crate::journal::summary::{CommitPartition, OffsetCommitSummary};
use crate::journal::{ClusterOperation, Entry, RequestSummary};

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
    // What each member owns when, as its rebalance protocol says.
    let members = Members::new(entries);
    // (group, member) → (answered at, generation) of each JoinGroup answer the member got,
    // and of each ConsumerGroupHeartbeat answer (its member epoch) of a KIP-848 member.
    let mut joined: HashMap<(String, String), Vec<(u64, i32)>> = HashMap::new();
    // KIP-848 members, by (group, member).
    let mut kip848: HashSet<(String, String)> = HashSet::new();
    // Group → (at, whether it became a consumer group) of each change of its type.
    let mut group_types: HashMap<String, Vec<(u64, bool)>> = HashMap::new();
    for entry in entries {
        if let Some(ClusterOperation::GroupConverted { group_id, to, .. }) = &entry.operation {
            group_types
                .entry(group_id.clone())
                .or_default()
                .push((entry.at_us, to == "consumer"));
        }
        match (&entry.request, &entry.response) {
            (Some(RequestSummary::JoinGroup(j)), Some(response)) => {
                if let (Some(g), Some(member)) =
                    (j.generation_id.filter(|g| *g >= 0), &j.assigned_member_id)
                {
                    joined
                        .entry((j.group_id.clone(), member.clone()))
                        .or_default()
                        .push((response.at_us, g));
                }
            }
            (Some(RequestSummary::ConsumerGroupHeartbeat(h)), Some(response)) => {
                if let (Some(e), Some(member)) = (
                    h.answered_member_epoch.filter(|e| *e > 0),
                    &h.answered_member_id,
                ) {
                    let key = (h.group_id.clone(), member.clone());
                    joined
                        .entry(key.clone())
                        .or_default()
                        .push((response.at_us, e));
                    kip848.insert(key);
                    group_types
                        .entry(h.group_id.clone())
                        .or_default()
                        .push((response.at_us, true));
                }
            }
            _ => {}
        }
    }
    for entry in entries {
        let Some(RequestSummary::OffsetCommit(c)) = &entry.request else {
            continue;
        };
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
        // Whether the group was a consumer group when the commit arrived (the last change
        // before it; the changes of each group are in journal order).
        let consumer_group = group_types.get(&c.group_id).is_some_and(|changes| {
            changes
                .iter()
                .filter(|(at, _)| *at < entry.at_us)
                .max_by_key(|(at, _)| *at)
                .is_some_and(|(_, consumer)| *consumer)
        });
        let by_member_epoch = kip848.contains(&member) || consumer_group;
        if checks.runs("stale-generation-commit") {
            if let Some(newest) = known.filter(|n| c.generation_id >= 0 && c.generation_id < *n) {
                // Kafka refuses a generation it has moved on from: the client recovers
                // by committing in the new one. Stored, it is a broken guarantee.
                let stored = c.partitions.iter().any(|p| applied(entry, p));
                let (severity, outcome) = if stored {
                    (Severity::Violation, "and the broker stored it")
                } else {
                    (Severity::Warning, "(refused, nothing stored)")
                };
                let (used, had) = if kip848.contains(&member) {
                    ("member epoch", "been answered member epoch")
                } else {
                    ("generation", "joined generation")
                };
                // Kafka 4.4 stores a KIP-848 member's commit at an older epoch for the
                // partitions it has owned since (KIP-1251), and a classic member's in a
                // consumer group: `commit-for-unassigned-partition` judges what it owned; only
                // the refusals are said here.
                if !(stored && by_member_epoch) {
                    violations.push(Violation {
                        kind: "stale-generation-commit".into(),
                        severity,
                        key: c.group_id.clone(),
                        entries: vec![EntryRef::from(entry)],
                        message: format!(
                            "OffsetCommit seq {} (conn {}) from member {} used {used} {} after that member had {had} {} {outcome}",
                            entry.seq, entry.conn, c.member_id, c.generation_id, newest
                        ),
                    });
                }
            }
        }
        // What the member owned when the commit arrived (members' commits only).
        let owned = (checks.runs("commit-for-unassigned-partition") && c.generation_id >= 0)
            .then(|| members.owned(&c.group_id, &c.member_id, entry));
        for p in &c.partitions {
            if !applied(entry, p) {
                continue;
            }
            if let Some(owned) = &owned {
                if owned.allows(&p.topic, p.partition) == Some(false) {
                    violations.push(unassigned(entry, c, &p.topic, p.partition, owned));
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
    violations
}

/// Whether the broker stored partition `p` of the OffsetCommit `entry`: answered NONE, or
/// applied before a fault dropped the answer.
fn applied(entry: &Entry, p: &CommitPartition) -> bool {
    match p.error_code {
        Some(code) => code == 0,
        None => applied_unanswered(entry),
    }
}

/// The `commit-for-unassigned-partition` finding of `commit`'s `topic`-`partition`, which
/// `owned` does not allow.
fn unassigned(
    entry: &Entry,
    c: &OffsetCommitSummary,
    topic: &str,
    partition: i32,
    owned: &Owned<'_>,
) -> Violation {
    let head = format!(
        "OffsetCommit seq {} (conn {}) from member {} committed {topic}-{partition} in generation {}",
        entry.seq, entry.conn, c.member_id, c.generation_id
    );
    let (cause, message) = match owned {
        Owned::Nothing { join, protocol } => (
            *join,
            format!(
                "{head} after its JoinGroup seq {} had started a rebalance: under {} ({}) a member gives up every partition when it rejoins and owns none until its SyncGroup answer",
                join.seq, protocol.name, protocol.rebalance
            ),
        ),
        Owned::Partitions {
            sync,
            generation,
            protocol,
            assigned,
            revoking,
        } => {
            let list = |ps: &super::rebalance::Partitions| {
                let names: Vec<String> = ps.iter().map(|(t, p)| format!("{t}-{p}")).collect();
                format!("[{}]", names.join(", "))
            };
            let giving_up = if revoking.is_empty() {
                String::new()
            } else {
                format!(", still giving up {}", list(revoking))
            };
            (
                *sync,
                format!(
                    "{head}, but it owned {}{giving_up} ({} seq {} of generation {generation}, {} ({}))",
                    list(assigned),
                    sync.api.as_deref().unwrap_or("SyncGroup"),
                    sync.seq,
                    protocol.name,
                    protocol.rebalance
                ),
            )
        }
        Owned::Unknown => unreachable!("an unknown ownership allows every commit"),
    };
    Violation {
        kind: "commit-for-unassigned-partition".into(),
        severity: Severity::Violation,
        key: format!("{}/{topic}-{partition}", c.group_id),
        entries: vec![EntryRef::from(cause), EntryRef::from(entry)],
        message,
    }
}
