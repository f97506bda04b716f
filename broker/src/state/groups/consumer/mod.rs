//! Consumer groups of the KIP-848 protocol (`group.protocol=consumer`), as Kafka 4.x's
//! `GroupMetadataManager` and `ConsumerGroup` keep them.
//!
//! There is no join phase: every member sends ConsumerGroupHeartbeat. A member joining or
//! leaving, a changed subscription or a subscribed topic gaining partitions bumps the **group
//! epoch**; the next heartbeat then computes the **target assignment** with the server-side
//! assignor ([`assignors`]: `uniform` by default, or `range`) and gives it the group epoch as
//! the **assignment epoch**. Each member then moves towards its target on its own heartbeats
//! ([`reconcile`], Kafka's `CurrentAssignmentBuilder`): it first revokes what the target took
//! away (keeping its **member epoch** until its heartbeat no longer lists them), then gets the
//! assignment epoch as its member epoch, and partitions another member still owns only once
//! that member released them. Each assigned partition remembers the member epoch it was
//! assigned at (KIP-1251's assignment epochs), which OffsetCommit checks.
//!
//! As Kafka 4.4, a target is computed at most once per `group.consumer.assignment.interval.ms`
//! (1 s): a heartbeat within that time of the last computation reconciles towards the last
//! target, and the group stays `Assigning` until a later heartbeat computes the next one.
//!
//! Timers run in [`super::Groups::tick`]: a member whose session expires (no heartbeat for
//! `group.consumer.session.timeout.ms`) or that does not revoke within its rebalance timeout is
//! fenced: removed, and the group epoch bumped.

mod advance;
pub mod assignors;
pub mod classic;
#[cfg(test)]
mod classic_tests;
pub mod heartbeat;
mod heterogeneous;
#[cfg(test)]
mod heterogeneous_tests;
mod members;
pub mod migration;
pub mod reconcile;
pub mod regex;
pub mod subscriptions;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

pub use heartbeat::HeartbeatRequest;
pub use migration::MigrationPolicy;
pub use subscriptions::{SubscribedNames, TopicIndex};

/// Partitions by topic id.
pub type Partitions = BTreeMap<Uuid, BTreeSet<i32>>;

/// Partitions by topic id, each with the member epoch it was assigned at (KIP-1251).
pub type EpochPartitions = BTreeMap<Uuid, BTreeMap<i32, i32>>;

/// The group epoch after a bump. Kafka's epochs are int32 and its coordinator adds one
/// unchecked; here the epoch stays at `i32::MAX` rather than wrap (or panic in a debug build)
/// after 2^31 bumps, a limit no group reaches in practice.
pub(crate) fn next_epoch(epoch: i32) -> i32 {
    epoch.saturating_add(1)
}

/// The epoch of a member that left for good (`LEAVE_GROUP_MEMBER_EPOCH`).
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// The epoch of a static member that left for now, keeping its assignment for its session
/// (`LEAVE_GROUP_STATIC_MEMBER_EPOCH`).
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// The server-side assignors, Kafka's `group.consumer.assignors` default (the first is the
/// default one).
pub const ASSIGNORS: &[&str] = &["uniform", "range"];

/// The orders of the assignors kmock has that `group.consumer.assignors` may name.
const ASSIGNOR_LISTS: [&[&str]; 4] = [
    &["uniform", "range"],
    &["range", "uniform"],
    &["uniform"],
    &["range"],
];

/// The assignor list `names` as Kafka's `group.consumer.assignors` takes it (the first is the
/// group's default), from kmock's two (`uniform`, `range`), each at most once.
///
/// # Errors
/// The list is empty, repeats one, or names another (a custom assignor class in Kafka).
pub fn assignor_list(names: &[impl AsRef<str>]) -> Result<&'static [&'static str], String> {
    ASSIGNOR_LISTS
        .into_iter()
        .find(|l| l.len() == names.len() && l.iter().zip(names).all(|(a, b)| *a == b.as_ref()))
        .ok_or_else(|| {
            let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
            format!(
                "consumer group assignors {names:?}: name uniform and/or range, each once (kmock has no other server-side assignor)"
            )
        })
}

/// Settings of consumer groups, Kafka's broker configs of the same names.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.session.timeout.ms`: 45 s.
    pub session_timeout: Duration,
    /// `group.consumer.heartbeat.interval.ms`: 5 s.
    pub heartbeat_interval: Duration,
    /// `group.consumer.max.size`: unlimited.
    pub max_size: usize,
    /// `group.consumer.assignment.interval.ms` (Kafka 4.4): 1 s. A new target assignment is
    /// computed on a heartbeat at most once in this interval; in between, members reconcile
    /// towards the last one.
    pub assignment_interval: Duration,
    /// `group.consumer.assignors`: the assignors members may name, the first the default
    /// ([`ASSIGNORS`]: `uniform`, `range`); from [`assignor_list`].
    pub assignors: &'static [&'static str],
    /// `group.consumer.migration.policy`: whether a live classic group may become a consumer
    /// group and back ([`MigrationPolicy`]; Kafka 4's default `bidirectional`).
    pub migration_policy: MigrationPolicy,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        Self {
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(5),
            max_size: usize::MAX,
            assignment_interval: Duration::from_secs(1),
            assignors: ASSIGNORS,
            migration_policy: MigrationPolicy::Bidirectional,
        }
    }
}

/// Where a member is in its reconciliation (Kafka's `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// At its target, or at the assignment epoch with nothing left to do.
    Stable,
    /// Asked to revoke partitions; keeps its epoch until it has.
    UnrevokedPartitions,
    /// At the assignment epoch, waiting for partitions other members still own.
    UnreleasedPartitions,
}

impl MemberState {
    /// Kafka's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stable => "stable",
            Self::UnrevokedPartitions => "unrevoked_partitions",
            Self::UnreleasedPartitions => "unreleased_partitions",
        }
    }
}

/// One member of a consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    /// Static membership id.
    pub instance_id: Option<String>,
    /// Rack of the member.
    pub rack_id: Option<String>,
    /// Current member epoch (-2 while a static member is away).
    pub member_epoch: i32,
    /// The epoch before the last change, accepted once more when a heartbeat answer was lost.
    pub previous_member_epoch: i32,
    /// Reconciliation state.
    pub state: MemberState,
    /// Rebalance timeout.
    pub rebalance_timeout: Duration,
    /// Client id of its last heartbeat.
    pub client_id: String,
    /// Client address (`/ip`).
    pub client_host: String,
    /// Subscribed topic names.
    pub subscribed_topic_names: Vec<String>,
    /// Subscribed topic regex (KIP-848's server-side regex), `None` for none.
    pub subscribed_topic_regex: Option<String>,
    /// Server assignor the member asked for.
    pub server_assignor: Option<String>,
    /// What the member owns, with the epoch each partition was assigned at.
    pub assigned: EpochPartitions,
    /// What it was asked to revoke and still owns.
    pub pending_revocation: EpochPartitions,
    /// For a member speaking the classic protocol (JoinGroup, SyncGroup, Heartbeat) inside
    /// the consumer group: its session timeout and protocols; `None` for a KIP-848 member.
    pub classic: Option<classic::ClassicMember>,
    pub(crate) session_deadline: Instant,
    /// `(deadline, member epoch)`: fenced if still revoking at that epoch at the deadline.
    pub(crate) rebalance_deadline: Option<(Instant, i32)>,
}

impl ConsumerMember {
    fn new(now: Instant, session: Duration) -> Self {
        Self {
            instance_id: None,
            rack_id: None,
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            rebalance_timeout: Duration::ZERO,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            assigned: BTreeMap::new(),
            pending_revocation: BTreeMap::new(),
            classic: None,
            session_deadline: now + session,
            rebalance_deadline: None,
        }
    }

    /// The assigned partitions without their epochs.
    pub fn assigned_partitions(&self) -> Partitions {
        without_epochs(&self.assigned)
    }

    /// Whether the member is at `epoch` with nothing left to do.
    fn is_reconciled_to(&self, epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == epoch
    }
}

/// Drops the epochs.
pub fn without_epochs(p: &EpochPartitions) -> Partitions {
    p.iter()
        .map(|(t, ps)| (*t, ps.keys().copied().collect()))
        .collect()
}

/// A group's state, named as Kafka names it (`ConsumerGroupState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The group epoch moved past the assignment epoch: a target is to be computed.
    Assigning,
    /// Some member is not at its target yet.
    Reconciling,
    /// Every member is at its target.
    Stable,
}

impl ConsumerGroupState {
    /// Kafka's name for the state.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Assigning => "Assigning",
            Self::Reconciling => "Reconciling",
            Self::Stable => "Stable",
        }
    }
}

/// A KIP-848 consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    /// The group epoch.
    pub group_epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// Members by member id.
    pub members: BTreeMap<String, ConsumerMember>,
    /// Target assignment by member id.
    pub target: BTreeMap<String, Partitions>,
    /// What the last target was computed from: subscribed topic name → (id, partitions).
    pub(crate) subscription_metadata: BTreeMap<String, (Uuid, i32)>,
    /// When the last target was computed.
    pub(crate) assigned_at: Option<Instant>,
    /// The members' subscriptions, counted by name (kept by heartbeats and [`Self::fence`]).
    pub(crate) subscribed: SubscribedNames,
    /// The members' regexes, counted, with their resolutions ([`regex`]).
    pub(crate) regexes: regex::Regexes,
}

impl Default for ConsumerGroup {
    /// A new group: group epoch 1 and assignment epoch 0, as Kafka 4.4's `ModernGroup`
    /// starts one, so that its first member joins at epoch 2.
    fn default() -> Self {
        Self {
            group_epoch: 1,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            subscription_metadata: BTreeMap::new(),
            assigned_at: None,
            subscribed: SubscribedNames::default(),
            regexes: regex::Regexes::default(),
        }
    }
}

impl ConsumerGroup {
    /// The group's state, as Kafka's `ConsumerGroup.maybeUpdateGroupState`.
    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch != self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| !m.is_reconciled_to(self.assignment_epoch))
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    /// The assignor of the group among `assignors` (the configured list): the one most
    /// members named, else the first (Kafka's `ConsumerGroup.preferredServerAssignor`).
    pub fn assignor(&self, assignors: &'static [&'static str]) -> &'static str {
        let mut votes: BTreeMap<&'static str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(name) = m
                .server_assignor
                .as_deref()
                .and_then(|a| assignors.iter().find(|n| **n == a))
            {
                *votes.entry(name).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(_, v)| *v)
            .map_or(assignors[0], |(n, _)| n)
    }

    /// The member with static id `instance`.
    pub fn static_member(&self, instance: &str) -> Option<&String> {
        self.members
            .iter()
            .find(|(_, m)| m.instance_id.as_deref() == Some(instance))
            .map(|(id, _)| id)
    }

    /// The member epoch of the member owning `(topic, partition)` (assigned or pending
    /// revocation), -1 if no member owns it (Kafka's `currentPartitionEpoch`).
    pub fn current_partition_epoch(&self, topic: Uuid, partition: i32) -> i32 {
        self.members
            .values()
            .find(|m| {
                [&m.assigned, &m.pending_revocation]
                    .iter()
                    .any(|p| p.get(&topic).is_some_and(|ps| ps.contains_key(&partition)))
            })
            .map_or(-1, |m| m.member_epoch)
    }

    /// Removes a member and bumps the group epoch (Kafka's `consumerGroupFenceMember`).
    pub(crate) fn fence(&mut self, member_id: &str) {
        if let Some(member) = self.members.remove(member_id) {
            self.subscribed.remove_names(&member.subscribed_topic_names);
            if let Some(r) = &member.subscribed_topic_regex {
                self.regexes.remove(r);
            }
            self.target.remove(member_id);
            self.group_epoch = next_epoch(self.group_epoch);
        }
    }

    /// Checks an OffsetCommit (at `version`) as Kafka 4.4's `ConsumerGroup.validateOffsetCommit`;
    /// `Ok` holds the member whose partitions each need [`Self::check_commit_partition`], or
    /// `None` when every partition is accepted.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION (a KIP-848 member below v9), STALE_MEMBER_EPOCH
    /// (an epoch newer than the member's; ILLEGAL_GENERATION for a classic member).
    pub fn check_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        member_epoch: i32,
        transactional: bool,
        version: i16,
    ) -> Result<Option<&ConsumerMember>, ResponseError> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(None);
        }
        if transactional && member_epoch == -1 && member_id.is_empty() && instance_id.is_none() {
            return Ok(None);
        }
        let member = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        // A member speaking the classic protocol commits at any version, its generation
        // the member epoch (ILLEGAL_GENERATION where a KIP-848 member is STALE_MEMBER_EPOCH).
        let classic = member.classic.is_some();
        if !transactional && !classic && version < 9 {
            return Err(ResponseError::UnsupportedVersion);
        }
        if member_epoch == member.member_epoch {
            return Ok(None);
        }
        if member_epoch > member.member_epoch {
            return Err(if classic {
                ResponseError::IllegalGeneration
            } else {
                ResponseError::StaleMemberEpoch
            });
        }
        Ok(Some(member))
    }

    /// A commit at `member_epoch`, older than `member`'s, for one partition: accepted if the
    /// member owns it (assigned or pending revocation) since that epoch or earlier (KIP-1251,
    /// Kafka 4.4's `createAssignmentEpochValidator`).
    ///
    /// # Errors
    /// STALE_MEMBER_EPOCH.
    pub fn check_commit_partition(
        member: &ConsumerMember,
        member_epoch: i32,
        topic: Uuid,
        partition: i32,
    ) -> Result<(), ResponseError> {
        let epoch = [&member.assigned, &member.pending_revocation]
            .iter()
            .find_map(|p| p.get(&topic).and_then(|ps| ps.get(&partition)).copied());
        match epoch {
            Some(assigned_at) if member_epoch >= assigned_at => Ok(()),
            _ => Err(ResponseError::StaleMemberEpoch),
        }
    }

    /// Checks an OffsetFetch as Kafka's `ConsumerGroup.validateOffsetFetch`.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a classic member).
    pub fn check_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        let Some(member_id) = member_id else {
            if member_epoch < 0 {
                return Ok(());
            }
            return Err(ResponseError::UnknownMemberId);
        };
        let member = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if member.member_epoch != member_epoch {
            return Err(if member.classic.is_some() {
                ResponseError::IllegalGeneration
            } else {
                ResponseError::StaleMemberEpoch
            });
        }
        Ok(())
    }

    /// Members whose session expired, who did not revoke in time, or (classic members) did
    /// not rejoin or sync in time: to be fenced.
    pub(crate) fn expired(&self, now: Instant) -> Vec<String> {
        let mut expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| {
                m.session_deadline <= now
                    || m.rebalance_deadline.is_some_and(|(d, epoch)| {
                        d <= now
                            && m.member_epoch == epoch
                            && m.state == MemberState::UnrevokedPartitions
                    })
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in self.classic_timed_out(now) {
            if !expired.contains(&id) {
                expired.push(id);
            }
        }
        expired
    }

    /// The group as a new coordinator loads it: every record Kafka writes is stored, so all
    /// of it, each member's session starting afresh.
    pub(crate) fn reload(&mut self, now: Instant, session: Duration) {
        for m in self.members.values_mut() {
            // A classic member's session is its JoinGroup's.
            m.session_deadline = now + m.classic.as_ref().map_or(session, |c| c.session_timeout);
            if let Some((_, epoch)) = m.rebalance_deadline {
                m.rebalance_deadline = Some((now + m.rebalance_timeout, epoch));
            }
        }
    }
}
