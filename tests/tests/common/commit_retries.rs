//! librdkafka's own commit ordering: which `offset-commit-regression` violations are the client
//! re-sending a commit that was not stored after newer ones were, or sending late commits it
//! made while it had no coordinator (real client behaviours that Kafka stores the same way),
//! recognized from the journal; and a group's coordinator changes, from the operations.

use kmock::journal::RequestSummary;
use kmock::{Entry, Violation};

use super::groups::{offsets_partition, CONSUMER_OFFSETS};

/// One partition of an OffsetCommit request, as journaled.
pub struct Committed {
    /// The request's seq.
    pub seq: u64,
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
            Some(RequestSummary::OffsetCommit(c)) => Some((e.seq, c)),
            _ => None,
        })
        .flat_map(|(seq, c)| {
            c.partitions.iter().map(move |p| Committed {
                seq,
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
