//! A member's move towards its target assignment, as Kafka's `CurrentAssignmentBuilder`.
//!
//! From `Stable` at an older epoch (or `UnreleasedPartitions`), the member keeps what the
//! target still gives it; what the target took away is pending revocation, and while the
//! member's heartbeat still lists any of it the member stays at its epoch in
//! `UnrevokedPartitions`. Otherwise it moves to the assignment epoch with the partitions no
//! other member owns added (assigned at that epoch); those another member still owns wait, in
//! `UnreleasedPartitions`.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::{ConsumerMember, EpochPartitions, MemberState, Partitions};

/// `member` moved one step towards `target` at `target_epoch`, as Kafka's
/// `CurrentAssignmentBuilder.build`; `owned` is what its heartbeat listed (`None`: not sent),
/// `owner_epoch(topic, partition)` the epoch of the member owning a partition (-1: none).
pub fn next(
    member: &ConsumerMember,
    target_epoch: i32,
    target: &Partitions,
    owned: Option<&Partitions>,
    owner_epoch: impl Fn(Uuid, i32) -> i32,
) -> ConsumerMember {
    match member.state {
        MemberState::Stable if member.member_epoch == target_epoch => member.clone(),
        MemberState::Stable | MemberState::UnreleasedPartitions => compute(
            member,
            member.member_epoch,
            target_epoch,
            target,
            owned,
            owner_epoch,
        ),
        MemberState::UnrevokedPartitions => {
            if owns_any(owned, &member.pending_revocation) {
                member.clone()
            } else {
                compute(
                    member,
                    member.member_epoch + 1,
                    target_epoch,
                    target,
                    owned,
                    owner_epoch,
                )
            }
        }
    }
}

/// Whether `owned` lists any partition of `revoking` (an absent list owns everything).
fn owns_any(owned: Option<&Partitions>, revoking: &EpochPartitions) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(topic, ps)| {
        revoking
            .get(topic)
            .is_some_and(|r| ps.iter().any(|p| r.contains_key(p)))
    })
}

/// Kafka's `computeNextAssignment`.
fn compute(
    member: &ConsumerMember,
    member_epoch: i32,
    target_epoch: i32,
    target: &Partitions,
    owned: Option<&Partitions>,
    owner_epoch: impl Fn(Uuid, i32) -> i32,
) -> ConsumerMember {
    let mut unreleased = false;
    let mut assigned: EpochPartitions = BTreeMap::new();
    let mut revoking: EpochPartitions = BTreeMap::new();
    let mut to_assign: Partitions = BTreeMap::new();
    let topics: std::collections::BTreeSet<Uuid> = target
        .keys()
        .chain(member.assigned.keys())
        .copied()
        .collect();
    let empty_target = Default::default();
    let empty_current = BTreeMap::new();
    for topic in topics {
        let target = target.get(&topic).unwrap_or(&empty_target);
        let current = member.assigned.get(&topic).unwrap_or(&empty_current);
        let kept: BTreeMap<i32, i32> = current
            .iter()
            .filter(|(p, _)| target.contains(p))
            .map(|(p, e)| (*p, *e))
            .collect();
        let revoked: BTreeMap<i32, i32> = current
            .iter()
            .filter(|(p, _)| !target.contains(p))
            .map(|(p, e)| (*p, *e))
            .collect();
        let mut pending: std::collections::BTreeSet<i32> = target
            .iter()
            .filter(|p| !kept.contains_key(p))
            .copied()
            .collect();
        let before = pending.len();
        pending.retain(|p| owner_epoch(topic, *p) == -1);
        unreleased |= pending.len() < before;
        if !kept.is_empty() {
            assigned.insert(topic, kept);
        }
        if !revoked.is_empty() {
            revoking.insert(topic, revoked);
        }
        if !pending.is_empty() {
            to_assign.insert(topic, pending);
        }
    }
    let mut next = member.clone();
    // Kafka's `updateMemberEpoch`: the previous epoch is the one before, even if unchanged.
    let update_epoch = |m: &mut ConsumerMember, epoch: i32| {
        m.previous_member_epoch = m.member_epoch;
        m.member_epoch = epoch;
    };
    if !revoking.is_empty() && owns_any(owned, &revoking) {
        next.state = MemberState::UnrevokedPartitions;
        update_epoch(&mut next, member_epoch);
        next.assigned = assigned;
        next.pending_revocation = revoking;
        return next;
    }
    for (topic, ps) in to_assign {
        let entry = assigned.entry(topic).or_default();
        for p in ps {
            entry.insert(p, target_epoch);
        }
    }
    next.state = if unreleased {
        MemberState::UnreleasedPartitions
    } else {
        MemberState::Stable
    };
    update_epoch(&mut next, target_epoch);
    next.assigned = assigned;
    next.pending_revocation = BTreeMap::new();
    next
}
