//! librdkafka's own commit ordering: which `offset-commit-regression` violations are the client
//! re-sending a commit that was not stored after newer ones were, or sending late commits it
//! made while it had no coordinator (real client behaviours that Kafka stores the same way),
//! recognized from the journal; and a group's coordinator changes, from the operations.

use kmock::journal::{RequestSummary, TopicPartitions};
use kmock::{Entry, Violation};

use super::groups::{offsets_partition, CONSUMER_OFFSETS};

/// One partition of an OffsetCommit request, as journaled.
pub struct Committed {
    /// The request's seq and arrival time (µs since the cluster started).
    pub seq: u64,
    pub at_us: u64,
    /// The member id it carried.
    pub member: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// Its answer for that partition (`None`: never answered).
    pub error_code: Option<i16>,
}

/// Every partition of every OffsetCommit in a journal's `entries`, in arrival order.
pub fn commits(entries: &[Entry]) -> Vec<Committed> {
    entries
        .iter()
        .filter_map(|e| match &e.request {
            Some(RequestSummary::OffsetCommit(c)) => Some((e, c)),
            _ => None,
        })
        .flat_map(|(e, c)| {
            c.partitions.iter().map(move |p| Committed {
                seq: e.seq,
                at_us: e.at_us,
                member: c.member_id.clone(),
                topic: p.topic.clone(),
                partition: p.partition,
                offset: p.offset,
                error_code: p.error_code,
            })
        })
        .collect()
}

/// Whether an `offset-commit-regression` is librdkafka re-sending, after newer commits were
/// stored, a commit an earlier attempt did not store: the lower offset was first sent, by the
/// same member for the same partition, and refused (NOT_COORDINATOR, or another coordinator
/// error while the group moved) or never answered (its connection cut by the broker going
/// down).
pub fn is_stale_commit_retry(entries: &[Entry], violation: &Violation) -> bool {
    let Some(lower) = violation.entries.last() else {
        return false;
    };
    let all = commits(entries);
    all.iter().filter(|c| c.seq == lower.seq).any(|c| {
        violation
            .key
            .ends_with(&format!("/{}-{}", c.topic, c.partition))
            && all.iter().any(|earlier| {
                earlier.seq < lower.seq
                    && earlier.member == c.member
                    && earlier.topic == c.topic
                    && earlier.partition == c.partition
                    && earlier.offset == c.offset
                    && earlier.error_code != Some(0)
            })
    })
}

/// Whether an `offset-commit-regression` of `group` is librdkafka sending late a commit it
/// made while it had no coordinator. After the group's coordinator moves, the commits the
/// application asks for until the member has found the new one wait in librdkafka, and some go
/// out after newer ones were stored: in a burst behind one carrying the newest positions, or
/// alone tens of milliseconds later behind a retry (about 1 run in 40 of the rebalance test,
/// e.g. t-1 stored at 198, then 8, 28, …, 188 on the same connection). Recognized as: the lower
/// commit's offset lies between the member's last commit of the partition stored before the
/// latest coordinator change (0 if none) and the offset of its first commit of the partition
/// stored after that change, and came after that first one. So it is a position the member
/// passed while it had no coordinator, not one it was sent back to.
pub fn is_held_commit_sent_late(entries: &[Entry], group: &str, violation: &Violation) -> bool {
    let Some(lower) = violation.entries.last() else {
        return false;
    };
    let Some(change) = coordinator_changes(entries, group)
        .into_iter()
        .rev()
        .find(|c| c.seq < lower.seq)
    else {
        return false;
    };
    let all = commits(entries);
    all.iter().filter(|c| c.seq == lower.seq).any(|late| {
        let same = |c: &&Committed| {
            c.member == late.member && c.topic == late.topic && c.partition == late.partition
        };
        let stored = |c: &&Committed| c.error_code == Some(0);
        let floor = all
            .iter()
            .rev()
            .filter(same)
            .filter(stored)
            .find(|c| c.seq < change.seq)
            .map_or(0, |c| c.offset);
        let first_after = all
            .iter()
            .filter(same)
            .filter(stored)
            .find(|c| c.seq > change.seq);
        violation
            .key
            .ends_with(&format!("/{}-{}", late.topic, late.partition))
            && first_after.is_some_and(|first| {
                first.seq < late.seq && (floor..=first.offset).contains(&late.offset)
            })
    })
}

/// The coordinator changes of `group` journaled in `entries`: each operation that moved its
/// `__consumer_offsets` partition, in order.
pub fn coordinator_changes(entries: &[Entry], group: &str) -> Vec<Change> {
    let partition = offsets_partition(group);
    entries
        .iter()
        .filter_map(|e| Some((e, e.operation.as_ref()?)))
        .flat_map(|(e, op)| {
            op.leader_changes()
                .iter()
                .filter(|c| c.topic == CONSUMER_OFFSETS && c.partition == partition)
                .map(move |c| Change {
                    seq: e.seq,
                    at_us: e.at_us,
                    from: c.from,
                    to: c.to,
                    leader_epoch: c.leader_epoch,
                })
        })
        .collect()
}

/// A move of a group's coordinator, from its journaled operation.
#[derive(Debug, Clone, Copy)]
pub struct Change {
    /// The operation's seq and time (µs since the cluster started): journaled under the state
    /// lock with the change itself, so a request handled after the change is answered later.
    pub seq: u64,
    pub at_us: u64,
    /// The coordinator's node id before and after.
    pub from: i32,
    pub to: i32,
    /// The `__consumer_offsets` partition's leader epoch after the change.
    pub leader_epoch: i32,
}

/// Whether an `offset-commit-regression` is librdkafka (2.12, `group.protocol=consumer`)
/// sending, at the end of a KIP-848 revocation, the commit it built when the revocation began.
/// A heartbeat answer takes partitions away from the member; the member goes on consuming and
/// committing what it keeps, then, just before the heartbeat that reports the revocation done,
/// sends one OffsetCommit carrying its positions from when the revocation began, so partitions
/// it kept move backwards (journal of issue 20: member `…Gd5Bg` told at seq 11491 to give up
/// orders-3,4,5 went on committing orders-2 up to 722, then sent `orders-2@687, orders-4@680`).
///
/// Recognized as: the lower commit's member had, before it, a heartbeat answer assigning it
/// fewer partitions than its previous answer did (the start), and no heartbeat of its own since
/// reported the revocation done (owned partitions without the revoked ones, or a leave); and
/// every partition of that commit carries one of the member's positions around the start: an
/// offset it committed for that partition from its last commit before the heartbeat preceding
/// the start up to the start's answer. (A position, not the last commit before the start: in
/// the journals the commit in flight when the previous heartbeat's connection was cut, e.g.
/// `orders-4@680`, is the one carried.)
pub fn is_revocation_commit_sent_late(entries: &[Entry], violation: &Violation) -> bool {
    let Some(lower) = violation.entries.last() else {
        return false;
    };
    let all = commits(entries);
    let late: Vec<&Committed> = all.iter().filter(|c| c.seq == lower.seq).collect();
    let Some(member) = late.first().map(|c| c.member.as_str()) else {
        return false;
    };
    if !late.iter().any(|c| {
        violation
            .key
            .ends_with(&format!("/{}-{}", c.topic, c.partition))
    }) {
        return false;
    }
    let beats = heartbeats(entries, member);
    let Some(start) = revocations(&beats)
        .into_iter()
        .rev()
        .find(|r| r.start.seq < lower.seq)
    else {
        return false;
    };
    if start.end.is_some_and(|end| end < lower.seq) {
        return false;
    }
    let previous_beat = beats
        .iter()
        .rev()
        .find(|b| b.seq < start.start.seq)
        .map_or(0, |b| b.seq);
    let answered_us = start.start.response.as_ref().map_or(0, |r| r.at_us);
    late.iter().all(|c| {
        let of_partition =
            |x: &&Committed| x.member == member && x.topic == c.topic && x.partition == c.partition;
        let from = all
            .iter()
            .filter(of_partition)
            .rfind(|x| x.seq < previous_beat)
            .map_or(0, |x| x.seq);
        all.iter()
            .filter(of_partition)
            .filter(|x| x.seq >= from && (x.seq < start.start.seq || x.at_us <= answered_us))
            .any(|x| x.offset == c.offset)
    })
}

/// Whether an `offset-commit-regression` is librdkafka sending late a commit it made while its
/// connection to the coordinator was being replaced. When that connection is cut (here by a
/// lost heartbeat answer: `disconnect_after_apply`), the commits the application asks for
/// until librdkafka has connected again wait, and go out in a burst on the new connection
/// behind one carrying the newest positions (journal of issue 20: `orders-5` stored at 957,
/// then 955, 955, 956, 957 in the same millisecond). [`is_held_commit_sent_late`] with the
/// member's new coordinator connection as the change: the lower commit's offset lies between
/// the member's last stored commit of the partition before its last request on another
/// connection (0 if none) and its first stored commit of the partition after that request,
/// and came after that first one.
pub fn is_held_commit_sent_after_reconnect(entries: &[Entry], violation: &Violation) -> bool {
    let Some(lower) = violation.entries.last() else {
        return false;
    };
    let all = commits(entries);
    all.iter().filter(|c| c.seq == lower.seq).any(|late| {
        let mut member_requests = entries.iter().filter(|e| match &e.request {
            Some(RequestSummary::OffsetCommit(c)) => c.member_id == late.member,
            Some(RequestSummary::ConsumerGroupHeartbeat(h)) => {
                h.answered_member_id.as_deref().unwrap_or(&h.member_id) == late.member
            }
            _ => false,
        });
        let Some(change) = member_requests
            .rfind(|e| e.seq < lower.seq && e.conn != lower.conn)
            .map(|e| e.seq)
        else {
            return false;
        };
        let same = |c: &&Committed| {
            c.member == late.member && c.topic == late.topic && c.partition == late.partition
        };
        let stored = |c: &&Committed| c.error_code == Some(0);
        let floor = all
            .iter()
            .rev()
            .filter(same)
            .filter(stored)
            .find(|c| c.seq < change)
            .map_or(0, |c| c.offset);
        let first_after = all
            .iter()
            .filter(same)
            .filter(stored)
            .find(|c| c.seq > change);
        violation
            .key
            .ends_with(&format!("/{}-{}", late.topic, late.partition))
            && first_after.is_some_and(|first| {
                first.seq < late.seq && (floor..=first.offset).contains(&late.offset)
            })
    })
}

/// The ConsumerGroupHeartbeats of `member` (by the member id sent or answered), in order.
fn heartbeats<'a>(entries: &'a [Entry], member: &str) -> Vec<&'a Entry> {
    entries
        .iter()
        .filter(|e| match &e.request {
            Some(RequestSummary::ConsumerGroupHeartbeat(h)) => {
                h.answered_member_id.as_deref().unwrap_or(&h.member_id) == member
            }
            _ => false,
        })
        .collect()
}

/// A KIP-848 revocation of one member: the heartbeat whose answer took partitions away, and the
/// seq of the member's first later heartbeat that no longer owns any of them (or leaves).
struct Revocation<'a> {
    start: &'a Entry,
    end: Option<u64>,
}

/// The revocations in a member's heartbeats (from [`heartbeats`]).
fn revocations<'a>(beats: &[&'a Entry]) -> Vec<Revocation<'a>> {
    type Names = std::collections::BTreeSet<(String, i32)>;
    let set = |tps: &[TopicPartitions]| -> Names {
        tps.iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), *p)))
            .collect()
    };
    let mut current: Option<Names> = None;
    let mut out: Vec<(Revocation<'a>, Names)> = Vec::new();
    for e in beats {
        let Some(RequestSummary::ConsumerGroupHeartbeat(h)) = &e.request else {
            continue;
        };
        let owned = h.owned.as_deref().map(set);
        for (r, revoked) in out.iter_mut().filter(|(r, _)| r.end.is_none()) {
            let done = h.member_epoch < 0 || owned.as_ref().is_some_and(|o| o.is_disjoint(revoked));
            if done {
                r.end = Some(e.seq);
            }
        }
        if let Some(assigned) = h.assignment.as_deref().map(set) {
            let revoked: Names = current
                .as_ref()
                .map(|c| c.difference(&assigned).cloned().collect())
                .unwrap_or_default();
            if !revoked.is_empty() {
                out.push((
                    Revocation {
                        start: e,
                        end: None,
                    },
                    revoked,
                ));
            }
            current = Some(assigned);
        }
    }
    out.into_iter().map(|(r, _)| r).collect()
}
