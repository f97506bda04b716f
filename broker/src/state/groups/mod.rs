//! Consumer groups (classic protocol): membership, rebalances and committed offsets, as
//! Apache Kafka's `GroupCoordinator` and `GroupMetadata` keep them.
//!
//! A group moves Empty → PreparingRebalance → CompletingRebalance → Stable and back. A member
//! that joins or leaves, or whose session expires, starts a rebalance: every member must rejoin
//! (JoinGroup, which waits) before the rebalance timeout; then the generation id goes up, the
//! leader gets every member's metadata, and SyncGroup hands out the leader's assignment.
//!
//! Waiting requests (JoinGroup, follower SyncGroup) get a `oneshot` receiver; the state answers
//! them when the rebalance moves on. Timers (session and rebalance timeouts) are checked by
//! [`Groups::tick`], which the cluster calls every few milliseconds with Tokio's clock, so tests
//! can pause and advance time.
//!
//! One group's state is in [`group`], joining and leaving in [`membership`], the checks of
//! offset commits in [`commits`].

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;

mod commits;
pub mod consumer;
mod group;
mod membership;

pub use group::Group;

/// Kafka's `group.min.session.timeout.ms` default.
pub const MIN_SESSION_TIMEOUT_MS: i32 = 6_000;
/// Kafka's `group.max.session.timeout.ms` default.
pub const MAX_SESSION_TIMEOUT_MS: i32 = 1_800_000;
/// Kafka's `offset.metadata.max.bytes` default.
pub const MAX_METADATA_BYTES: usize = 4_096;

/// A group's state, named as Kafka names it (DescribeGroups, ListGroups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members; offsets may be kept.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Deleted.
    Dead,
}

impl GroupState {
    /// Kafka's name for the state.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Stable => "Stable",
            Self::Dead => "Dead",
        }
    }
}

/// What a JoinGroup asks.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// Group id.
    pub group_id: String,
    /// Member id: empty on a first join.
    pub member_id: String,
    /// Static membership id (KIP-345).
    pub group_instance_id: Option<String>,
    /// The client id, prefix of a generated member id.
    pub client_id: String,
    /// Client address, for DescribeGroups.
    pub client_host: String,
    /// Session timeout, ms.
    pub session_timeout_ms: i32,
    /// Rebalance timeout, ms (the session timeout before JoinGroup v1).
    pub rebalance_timeout_ms: i32,
    /// Protocol type, `consumer` for consumers.
    pub protocol_type: String,
    /// `(name, metadata)` of each protocol the member supports, in preference order.
    pub protocols: Vec<(String, Bytes)>,
    /// Whether the member must first get its id from MEMBER_ID_REQUIRED (JoinGroup v4+).
    pub require_known_member_id: bool,
    /// Whether the answer can tell a leader to skip the assignment (JoinGroup v9+).
    pub supports_skip_assignment: bool,
}

/// The answer to a JoinGroup.
#[derive(Debug, Clone, Default)]
pub struct JoinResult {
    /// NONE or the error.
    pub error: Option<ResponseError>,
    /// The new generation.
    pub generation_id: i32,
    /// Protocol type of the group.
    pub protocol_type: Option<String>,
    /// Protocol chosen.
    pub protocol_name: Option<String>,
    /// Member id of the leader.
    pub leader: String,
    /// The member's id (assigned on a first join).
    pub member_id: String,
    /// For the leader: `(member id, instance id, metadata)` of every member.
    pub members: Vec<(String, Option<String>, Bytes)>,
    /// The leader is told its members but need not assign again (a static leader replaced in
    /// a Stable group, JoinGroup v9+).
    pub skip_assignment: bool,
    /// Kafka never answers this join: the rebalance's protocol vote found no candidate the
    /// member supports ([`NO_CANDIDATE`]), and the member was removed; the connection is closed
    /// with this reason instead of an answer.
    pub closed: Option<String>,
}

/// Why a join is not answered when the member has no candidate protocol to vote for (Kafka's
/// `ClassicGroupMember.vote` throws it, and the rebalance never completes).
pub const NO_CANDIDATE: &str = "Member does not support any of the candidate protocols \
     (a protocol named twice counts twice): Kafka never answers such a join";

impl JoinResult {
    fn error(error: ResponseError, member_id: &str) -> Self {
        Self {
            error: Some(error),
            generation_id: -1,
            member_id: member_id.to_owned(),
            ..Self::default()
        }
    }
}

/// The answer to a SyncGroup: the member's assignment, or an error.
pub type SyncResult = Result<SyncAnswer, ResponseError>;

/// A member's assignment, with the group's protocol.
#[derive(Debug, Clone, Default)]
pub struct SyncAnswer {
    /// Protocol type of the group.
    pub protocol_type: Option<String>,
    /// Protocol chosen.
    pub protocol_name: Option<String>,
    /// The assignment bytes the leader gave this member.
    pub assignment: Bytes,
}

/// Either an answer now, or one to wait for.
#[derive(Debug)]
pub enum Pending<T> {
    /// Answered at once.
    Now(T),
    /// Answered when the rebalance moves on (the sender is dropped if the group goes away).
    Wait(oneshot::Receiver<T>),
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The offset.
    pub offset: i64,
    /// Leader epoch the client saw, -1 if none.
    pub leader_epoch: i32,
    /// Metadata string.
    pub metadata: Option<String>,
}

/// A group the coordinator converted between the classic and the consumer protocol
/// ([`consumer::classic`]), for the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    /// Group id.
    pub group_id: String,
    /// `consumer` (upgraded) or `classic` (downgraded).
    pub to: &'static str,
    /// The member whose joining or leaving converted it.
    pub member_id: String,
}

/// Every group of the cluster.
#[derive(Debug, Default)]
pub struct Groups {
    groups: BTreeMap<String, Group>,
    next_member: u64,
    /// Conversions not yet journaled ([`Self::take_conversions`]).
    conversions: Vec<Conversion>,
    /// Settings of KIP-848 consumer groups.
    pub consumer_config: consumer::ConsumerGroupConfig,
}

impl Groups {
    /// The groups converted since the last call, oldest first.
    pub fn take_conversions(&mut self) -> Vec<Conversion> {
        std::mem::take(&mut self.conversions)
    }

    /// The group, if it exists.
    pub fn get(&self, group_id: &str) -> Option<&Group> {
        self.groups.get(group_id)
    }

    /// Every group, by id.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Group)> {
        self.groups.iter()
    }

    /// The group, to change, if it exists.
    pub fn get_mut(&mut self, group_id: &str) -> Option<&mut Group> {
        self.groups.get_mut(group_id)
    }

    /// Forgets every group's committed offsets of a deleted topic (Kafka's
    /// `onPartitionsDeleted`).
    pub fn forget_topic(&mut self, topic: &str) {
        for group in self.groups.values_mut() {
            group.forget_topic(topic);
        }
    }

    /// Deletes an Empty group and its offsets.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND, or NON_EMPTY_GROUP while it has members.
    pub fn delete(&mut self, group_id: &str) -> Result<(), ResponseError> {
        if let Some(cg) = self.groups.get(group_id).and_then(|g| g.consumer.as_ref()) {
            if !cg.members.is_empty() {
                return Err(ResponseError::NonEmptyGroup);
            }
        }
        match self.groups.get(group_id).map(|g| g.state) {
            None | Some(GroupState::Dead) => Err(ResponseError::GroupIdNotFound),
            Some(GroupState::Empty) => {
                self.groups.remove(group_id);
                Ok(())
            }
            Some(_) => Err(ResponseError::NonEmptyGroup),
        }
    }

    /// The coordinator of the groups `moved` selects changed (their `__consumer_offsets`
    /// partition got a new leader, or none): waiting JoinGroup and SyncGroup requests are
    /// answered NOT_COORDINATOR, as Kafka's old coordinator does when it unloads the group,
    /// and the group is what the new coordinator loads: the last stored generation (a
    /// rebalance in progress is lost; its members rejoin), every member's session starting
    /// afresh.
    pub fn coordinator_moved(&mut self, moved: impl Fn(&str) -> bool, now: Instant) {
        for (group_id, group) in &mut self.groups {
            if !moved(group_id) {
                continue;
            }
            for (member_id, member) in &mut group.members {
                if let Some(tx) = member.awaiting_join.take() {
                    let _ = tx.send(JoinResult::error(ResponseError::NotCoordinator, member_id));
                }
                if let Some(tx) = member.awaiting_sync.take() {
                    let _ = tx.send(Err(ResponseError::NotCoordinator));
                }
            }
            // A consumer group is stored record by record: loaded whole.
            let consumer = group.consumer.take();
            group.reload(now);
            group.consumer = consumer.map(|mut c| {
                c.reload(now, self.consumer_config.session_timeout);
                c
            });
        }
    }

    /// Expires members whose session timed out, and completes rebalances whose timeout
    /// passed, in the groups `coordinated` selects (a group whose coordinator is offline has
    /// no timers running, as in Kafka). Called by the cluster every few milliseconds.
    pub fn tick(&mut self, now: Instant, coordinated: impl Fn(&str) -> bool) {
        let policy = self.consumer_config.migration_policy;
        for (group_id, group) in self.groups.iter_mut().filter(|(id, _)| coordinated(id)) {
            if let Some(cg) = group.consumer.as_ref() {
                for id in cg.expired(now) {
                    tracing::debug!(member = id, "consumer group member fenced by a timer");
                    if consumer::migration::fence_or_downgrade(group, &[id.as_str()], policy, now) {
                        self.conversions.push(Conversion {
                            group_id: group_id.clone(),
                            to: "classic",
                            member_id: id,
                        });
                        break;
                    }
                }
                continue;
            }
            let pending_before = group.pending.len();
            group.pending.retain(|_, expiry| *expiry > now);
            if group.pending.len() < pending_before {
                // An unused MEMBER_ID_REQUIRED id no longer holds the rebalance up.
                group.try_complete_join(now, false);
            }
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| {
                    m.awaiting_join.is_none()
                        && m.awaiting_sync.is_none()
                        && m.last_heartbeat + m.session_timeout <= now
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                tracing::debug!(member = id, "session expired: member removed");
                group.remove_member(&id, now);
            }
            if group.rebalance_deadline.is_some_and(|d| d <= now) {
                group.try_complete_join(now, true);
            }
        }
    }
}
