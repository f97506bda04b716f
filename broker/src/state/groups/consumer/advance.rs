//! One step of a consumer group after a member's request, shared by ConsumerGroupHeartbeat
//! and a classic member's JoinGroup ([`super::classic`]): the group epoch moved by changed
//! subscriptions, a new target assignment when due, and the member reconciled towards it
//! ([`super::reconcile`]), as Kafka 4.4's `GroupMetadataManager` runs these steps for both.

use std::collections::{BTreeMap, HashMap};

use tokio::time::Instant;
use uuid::Uuid;

use super::assignors::{self, MemberSpec};
use super::subscriptions::subscription_metadata;
use super::{next_epoch, reconcile, ConsumerGroup, MemberState, Partitions, TopicIndex};

/// The group after a member's request: `bump` (the member's subscription or assignor
/// changed) and a changed subscription metadata move the group epoch; a new target is computed
/// when due (Kafka 4.4's `canComputeNextTargetAssignment`), and the member moves one step
/// towards its target given what it says it `owned` (Kafka's `maybeReconcile`). Shared by
/// ConsumerGroupHeartbeat and a classic member's JoinGroup. Returns what the member had
/// assigned before.
pub(super) fn advance(
    cg: &mut ConsumerGroup,
    member_id: &str,
    mut bump: bool,
    owned: Option<&Partitions>,
    topics: &impl TopicIndex,
    now: Instant,
    config: &super::ConsumerGroupConfig,
) -> Partitions {
    bump |= cg.regexes.apply_pending();
    cg.regexes.maybe_resolve(topics, now);
    let metadata = subscription_metadata(cg, topics);
    if metadata != cg.subscription_metadata {
        cg.subscription_metadata = metadata;
        bump = true;
    }
    if bump {
        cg.group_epoch = next_epoch(cg.group_epoch);
    }
    // Kafka 4.4's `canComputeNextTargetAssignment`: at most once per interval.
    let due = cg
        .assigned_at
        .is_none_or(|at| now.saturating_duration_since(at) >= config.assignment_interval);
    if cg.group_epoch > cg.assignment_epoch && due {
        let specs: BTreeMap<String, MemberSpec> = cg
            .members
            .iter()
            .map(|(id, m)| {
                let spec = MemberSpec {
                    topics: subscribed_topics(cg, m),
                    previous: cg.target.get(id).cloned().unwrap_or_default(),
                };
                (id.clone(), spec)
            })
            .collect();
        cg.target = assignors::assign(
            cg.assignor(config.assignors),
            &specs,
            &cg.subscription_metadata,
        );
        cg.assignment_epoch = cg.group_epoch;
        cg.assigned_at = Some(now);
    }
    // The member is cloned for reconciliation without its subscription (put back below).
    let member = cg.members.get_mut(member_id).expect("ensured above");
    let subscription = std::mem::take(&mut member.subscribed_topic_names);
    let before = member.clone();
    let mut after = before.clone();
    if !before.is_reconciled_to(cg.assignment_epoch) {
        let target = cg.target.get(member_id).cloned().unwrap_or_default();
        // Indexed at the first partition asked about: a member whose target needs no
        // partition of another (most heartbeats) pays nothing for it.
        let owners = std::cell::OnceCell::new();
        let owner = |t: Uuid, p: i32| {
            owners
                .get_or_init(|| owner_epochs(cg, member_id))
                .get(&(t, p))
                .copied()
                .unwrap_or(-1)
        };
        after = reconcile::next(&before, cg.assignment_epoch, &target, owned, owner);
        if after.state == MemberState::UnrevokedPartitions {
            if before.state != MemberState::UnrevokedPartitions
                || before.member_epoch != after.member_epoch
            {
                after.rebalance_deadline =
                    Some((now + after.rebalance_timeout, after.member_epoch));
            }
        } else {
            after.rebalance_deadline = None;
        }
    }
    after.subscribed_topic_names = subscription;
    after.session_deadline = now
        + after
            .classic
            .as_ref()
            .map_or(config.session_timeout, |c| c.session_timeout);
    let assigned_before = before.assigned_partitions();
    cg.members.insert(member_id.to_owned(), after);
    assigned_before
}

/// The member epoch of each other member's owned partitions (assigned or pending
/// revocation), the first member in id order for a partition two claim, as
/// [`ConsumerGroup::current_partition_epoch`] answers it, indexed at most once per heartbeat.
fn owner_epochs(cg: &ConsumerGroup, member_id: &str) -> HashMap<(Uuid, i32), i32> {
    let mut out = HashMap::new();
    for (id, m) in &cg.members {
        if id == member_id {
            continue;
        }
        for owned in [&m.assigned, &m.pending_revocation] {
            for (t, ps) in owned {
                for p in ps.keys() {
                    out.entry((*t, *p)).or_insert(m.member_epoch);
                }
            }
        }
    }
    out
}

/// A member's topics for the assignor: its names, with what its regex resolved to (borrowed
/// when it has no regex, so a long subscription is not copied for each target).
fn subscribed_topics<'a>(
    cg: &'a ConsumerGroup,
    m: &'a super::ConsumerMember,
) -> std::borrow::Cow<'a, [String]> {
    let Some(r) = &m.subscribed_topic_regex else {
        return std::borrow::Cow::Borrowed(&m.subscribed_topic_names);
    };
    let mut all: Vec<String> = m.subscribed_topic_names.clone();
    all.extend(cg.regexes.topics(r).cloned());
    all.sort();
    all.dedup();
    std::borrow::Cow::Owned(all)
}
