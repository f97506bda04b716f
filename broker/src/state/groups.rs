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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::Decodable;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;

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
}

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

#[derive(Debug)]
struct Member {
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    protocol_type: String,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    last_heartbeat: Instant,
    awaiting_join: Option<oneshot::Sender<JoinResult>>,
    awaiting_sync: Option<oneshot::Sender<SyncResult>>,
}

impl Member {
    /// The member as the group's stored record keeps it: no request waiting.
    fn stored(&self) -> Member {
        Member {
            group_instance_id: self.group_instance_id.clone(),
            client_id: self.client_id.clone(),
            client_host: self.client_host.clone(),
            session_timeout: self.session_timeout,
            rebalance_timeout: self.rebalance_timeout,
            protocol_type: self.protocol_type.clone(),
            protocols: self.protocols.clone(),
            assignment: self.assignment.clone(),
            last_heartbeat: self.last_heartbeat,
            awaiting_join: None,
            awaiting_sync: None,
        }
    }
}

/// What Kafka's coordinator writes of a group to `__consumer_offsets` (a group metadata
/// record, `GroupMetadataManager.storeGroup`): at the end of each rebalance, when the leader's
/// assignment makes the group Stable, or when the group is left Empty. A new coordinator loads
/// the group from it.
#[derive(Debug)]
struct StoredGroup {
    state: GroupState,
    generation_id: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
}

/// One group.
#[derive(Debug)]
pub struct Group {
    state: GroupState,
    generation_id: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Member ids given out with MEMBER_ID_REQUIRED, and when they expire.
    pending: HashMap<String, Instant>,
    rebalance_deadline: Option<Instant>,
    /// The group as last stored, which a new coordinator loads.
    stored: Option<StoredGroup>,
    /// Committed offsets by (topic, partition).
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
}

impl Group {
    fn new() -> Self {
        Self {
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending: HashMap::new(),
            rebalance_deadline: None,
            stored: None,
            offsets: BTreeMap::new(),
        }
    }

    /// The group's state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// Protocol type (`consumer`), if any member ever joined.
    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    /// Protocol chosen in the current generation.
    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }

    /// `(member id, instance id, client id, client host, metadata of the chosen protocol,
    /// assignment)` of every member, as DescribeGroups tells them: metadata and assignment only
    /// while Stable (Kafka's `GroupMetadata.summary`).
    pub fn described_members(&self) -> Vec<(String, Option<String>, String, String, Bytes, Bytes)> {
        let stable = self.state == GroupState::Stable;
        self.members()
            .into_iter()
            .map(|(id, instance, client, host, metadata, assignment)| {
                if stable {
                    (id, instance, client, host, metadata, assignment)
                } else {
                    (id, instance, client, host, Bytes::new(), Bytes::new())
                }
            })
            .collect()
    }

    /// `(member id, instance id, client id, client host, metadata of the chosen protocol,
    /// assignment)` of every member.
    pub fn members(&self) -> Vec<(String, Option<String>, String, String, Bytes, Bytes)> {
        self.members
            .iter()
            .map(|(id, m)| {
                let metadata = self
                    .protocol_name
                    .as_ref()
                    .and_then(|p| m.protocols.iter().find(|(n, _)| n == p))
                    .map(|(_, md)| md.clone())
                    .unwrap_or_default();
                (
                    id.clone(),
                    m.group_instance_id.clone(),
                    m.client_id.clone(),
                    m.client_host.clone(),
                    metadata,
                    m.assignment.clone(),
                )
            })
            .collect()
    }

    /// Whether the members' subscriptions may include `topic`, as Kafka's
    /// `ClassicGroup.isSubscribedToTopic`: for the consumer protocol, decoded from the members'
    /// metadata (its version-0 prefix, which every version starts with); metadata that does
    /// not decode counts as subscribed to everything.
    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        if self.protocol_type.as_deref() != Some("consumer") {
            return false;
        }
        self.members().into_iter().any(|(_, _, _, _, metadata, _)| {
            if metadata.len() < 2 {
                return true;
            }
            let mut buf = metadata.slice(2..);
            match <ConsumerProtocolSubscription as Decodable>::decode(&mut buf, 0) {
                Ok(sub) => sub.topics.iter().any(|t| t.as_str() == topic),
                Err(_) => true,
            }
        })
    }

    /// Forgets the committed offsets of a deleted topic.
    pub fn forget_topic(&mut self, topic: &str) {
        self.offsets.retain(|(t, _), _| t != topic);
    }

    /// Checks that `member_id` (with `instance_id`) is a current member, as Kafka's
    /// `ClassicGroup.validateMember`: an instance id no member owns is UNKNOWN_MEMBER_ID, one
    /// owned by another member id FENCED_INSTANCE_ID.
    fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<&Member, ResponseError> {
        if let Some(instance) = instance_id {
            let owner = self
                .members
                .iter()
                .find(|(_, m)| m.group_instance_id.as_deref() == Some(instance))
                .map(|(id, _)| id.as_str());
            match owner {
                None => return Err(ResponseError::UnknownMemberId),
                Some(owner) if owner != member_id => return Err(ResponseError::FencedInstanceId),
                Some(_) => {}
            }
        }
        self.members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)
    }

    /// Records the group as Kafka stores it (see [`StoredGroup`]).
    fn store(&mut self) {
        self.stored = Some(StoredGroup {
            state: self.state,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone(),
            members: self
                .members
                .iter()
                .map(|(id, m)| (id.clone(), m.stored()))
                .collect(),
        });
    }

    /// The group as a new coordinator loads it: as last stored, each member's session
    /// starting now (`GroupMetadataManager.onGroupLoaded`); never stored, an Empty group of
    /// generation 0 (its committed offsets are kept, being stored on their own). Requests
    /// waiting at the old coordinator must have been answered already.
    fn reload(&mut self, now: Instant) {
        let offsets = std::mem::take(&mut self.offsets);
        let stored = self.stored.take();
        *self = Group::new();
        self.offsets = offsets;
        if let Some(s) = stored {
            self.state = s.state;
            self.generation_id = s.generation_id;
            self.protocol_type = s.protocol_type.clone();
            self.protocol_name = s.protocol_name.clone();
            self.leader = s.leader.clone();
            self.members = s
                .members
                .iter()
                .map(|(id, m)| {
                    let mut member = m.stored();
                    member.last_heartbeat = now;
                    (id.clone(), member)
                })
                .collect();
            self.stored = Some(s);
        }
    }

    /// Starts a rebalance: every member must rejoin before the largest rebalance timeout.
    fn prepare_rebalance(&mut self, now: Instant) {
        if self.state == GroupState::CompletingRebalance {
            for member in self.members.values_mut() {
                member.assignment = Bytes::new();
                if let Some(waiter) = member.awaiting_sync.take() {
                    let _ = waiter.send(Err(ResponseError::RebalanceInProgress));
                }
            }
        }
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        self.state = GroupState::PreparingRebalance;
        self.rebalance_deadline = Some(now + timeout);
    }

    /// Completes the join phase once every member has rejoined and no MEMBER_ID_REQUIRED
    /// member is still expected, or when `force` (the rebalance timeout passed).
    fn try_complete_join(&mut self, now: Instant, force: bool) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let all_joined =
            self.members.values().all(|m| m.awaiting_join.is_some()) && self.pending.is_empty();
        if !(all_joined || force) {
            return;
        }
        // Dynamic members that did not rejoin in time leave the group; static ones stay (KIP-345),
        // and MEMBER_ID_REQUIRED ids stay until their own session expires.
        self.members
            .retain(|_, m| m.awaiting_join.is_some() || m.group_instance_id.is_some());
        self.rebalance_deadline = None;
        self.generation_id += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol_name = None;
            self.leader = None;
            self.store();
            return;
        }
        self.protocol_name = self.select_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.state = GroupState::CompletingRebalance;
        let leader = self.leader.clone().unwrap_or_default();
        let all: Vec<_> = self
            .members()
            .into_iter()
            .map(|(id, instance, _, _, metadata, _)| (id, instance, metadata))
            .collect();
        for (id, member) in &mut self.members {
            member.last_heartbeat = now;
            if let Some(waiter) = member.awaiting_join.take() {
                let _ = waiter.send(JoinResult {
                    error: None,
                    generation_id: self.generation_id,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    leader: leader.clone(),
                    member_id: id.clone(),
                    members: if *id == leader {
                        all.clone()
                    } else {
                        Vec::new()
                    },
                });
            }
        }
    }

    /// The protocol every member supports that most members prefer (Kafka's
    /// `GroupMetadata.selectProtocol`: each member votes for its first candidate).
    fn select_protocol(&self) -> Option<String> {
        let mut candidates: Option<HashSet<&str>> = None;
        for m in self.members.values() {
            let names: HashSet<&str> = m.protocols.iter().map(|(n, _)| n.as_str()).collect();
            candidates = Some(match candidates {
                None => names,
                Some(c) => c.intersection(&names).copied().collect(),
            });
        }
        let candidates = candidates?;
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((name, _)) = m
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(n.as_str()))
            {
                *votes.entry(name).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(_, v)| *v)
            .map(|(n, _)| n.to_owned())
    }

    /// Whether a member with these protocols could join (Kafka's `supportsProtocols`).
    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(n, _)| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(mn, _)| mn == n))
            })
    }

    fn remove_member(&mut self, member_id: &str, now: Instant) {
        if let Some(mut member) = self.members.remove(member_id) {
            if let Some(w) = member.awaiting_join.take() {
                let _ = w.send(JoinResult::error(ResponseError::UnknownMemberId, member_id));
            }
            if let Some(w) = member.awaiting_sync.take() {
                let _ = w.send(Err(ResponseError::UnknownMemberId));
            }
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => self.prepare_rebalance(now),
            GroupState::PreparingRebalance => {}
            GroupState::Empty | GroupState::Dead => return,
        }
        self.try_complete_join(now, self.members.is_empty());
    }
}

/// Every group of the cluster.
#[derive(Debug, Default)]
pub struct Groups {
    groups: BTreeMap<String, Group>,
    next_member: u64,
}

impl Groups {
    /// The group, if it exists.
    pub fn get(&self, group_id: &str) -> Option<&Group> {
        self.groups.get(group_id)
    }

    /// Every group, by id.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Group)> {
        self.groups.iter()
    }

    /// JoinGroup, as Kafka's `GroupCoordinator.handleJoinGroup` (classic protocol).
    pub fn join(&mut self, req: JoinRequest, now: Instant) -> Pending<JoinResult> {
        let fail = |e| Pending::Now(JoinResult::error(e, &req.member_id));
        if req.group_id.is_empty() {
            return fail(ResponseError::InvalidGroupId);
        }
        if !(MIN_SESSION_TIMEOUT_MS..=MAX_SESSION_TIMEOUT_MS).contains(&req.session_timeout_ms) {
            return fail(ResponseError::InvalidSessionTimeout);
        }
        if !req.member_id.is_empty() && !self.groups.contains_key(&req.group_id) {
            return fail(ResponseError::UnknownMemberId);
        }
        self.next_member += 1;
        // Kafka prefixes a static member's id with its instance id, a dynamic one's with the
        // client id.
        let prefix = req.group_instance_id.as_deref().unwrap_or(&req.client_id);
        let fresh_id = format!("{prefix}-{:016x}", self.next_member);
        let group = self
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(Group::new);
        if !group.supports(&req.protocol_type, &req.protocols) {
            return fail(ResponseError::InconsistentGroupProtocol);
        }
        let session = Duration::from_millis(req.session_timeout_ms as u64);
        let mut member_id = req.member_id.clone();
        if member_id.is_empty() {
            // A static member rejoining with a new id replaces (fences) its old id.
            let old = req.group_instance_id.as_ref().and_then(|instance| {
                group
                    .members
                    .iter()
                    .find(|(_, m)| m.group_instance_id.as_ref() == Some(instance))
                    .map(|(id, _)| id.clone())
            });
            if let Some(old) = old {
                if let Some(mut replaced) = group.members.remove(&old) {
                    if let Some(w) = replaced.awaiting_join.take() {
                        let _ = w.send(JoinResult::error(ResponseError::FencedInstanceId, &old));
                    }
                    if let Some(w) = replaced.awaiting_sync.take() {
                        let _ = w.send(Err(ResponseError::FencedInstanceId));
                    }
                    if group.leader.as_deref() == Some(old.as_str()) {
                        group.leader = None;
                    }
                }
            } else if req.require_known_member_id && req.group_instance_id.is_none() {
                group.pending.insert(fresh_id.clone(), now + session);
                return Pending::Now(JoinResult::error(
                    ResponseError::MemberIdRequired,
                    &fresh_id,
                ));
            }
            member_id = fresh_id;
        } else if group.pending.remove(&member_id).is_none() {
            if let Err(e) = group.check_member(&member_id, req.group_instance_id.as_deref()) {
                return fail(e);
            }
            let member = &group.members[&member_id];
            let unchanged = member.protocols == req.protocols;
            let is_leader = group.leader.as_deref() == Some(member_id.as_str());
            // A member rejoining with nothing changed gets the current generation back (the
            // leader with every member's metadata again) before the assignment is out, and a
            // follower after it too (Kafka's `doCurrentMemberJoinGroup`).
            if unchanged
                && (group.state == GroupState::CompletingRebalance
                    || (group.state == GroupState::Stable && !is_leader))
            {
                let members = if is_leader {
                    group
                        .members()
                        .into_iter()
                        .map(|(id, instance, _, _, metadata, _)| (id, instance, metadata))
                        .collect()
                } else {
                    Vec::new()
                };
                return Pending::Now(JoinResult {
                    error: None,
                    generation_id: group.generation_id,
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol_name.clone(),
                    leader: group.leader.clone().unwrap_or_default(),
                    member_id,
                    members,
                });
            }
        }
        let (tx, rx) = oneshot::channel();
        // The first member to join leads (Kafka's `GroupMetadata.add`).
        if group.leader.is_none() {
            group.leader = Some(member_id.clone());
        }
        let member = group.members.entry(member_id).or_insert_with(|| Member {
            group_instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout: session,
            rebalance_timeout: Duration::ZERO,
            protocol_type: req.protocol_type.clone(),
            protocols: Vec::new(),
            assignment: Bytes::new(),
            last_heartbeat: now,
            awaiting_join: None,
            awaiting_sync: None,
        });
        member.session_timeout = session;
        member.rebalance_timeout = Duration::from_millis(req.rebalance_timeout_ms.max(0) as u64);
        member.protocols = req.protocols;
        member.protocol_type = req.protocol_type.clone();
        member.last_heartbeat = now;
        if let Some(previous) = member.awaiting_join.replace(tx) {
            drop(previous);
        }
        group.protocol_type = Some(req.protocol_type);
        if group.state != GroupState::PreparingRebalance {
            group.prepare_rebalance(now);
        }
        group.try_complete_join(now, false);
        Pending::Wait(rx)
    }

    /// SyncGroup, as Kafka's `GroupCoordinator.handleSyncGroup`.
    #[allow(clippy::too_many_arguments)]
    pub fn sync(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> Pending<SyncResult> {
        let Some(group) = self.groups.get_mut(group_id) else {
            return Pending::Now(Err(ResponseError::UnknownMemberId));
        };
        if let Err(e) = group.check_member(member_id, instance_id) {
            return Pending::Now(Err(e));
        }
        if generation_id != group.generation_id {
            return Pending::Now(Err(ResponseError::IllegalGeneration));
        }
        let mismatch = |asked: Option<&str>, actual: &Option<String>| {
            asked.is_some_and(|a| Some(a) != actual.as_deref())
        };
        if mismatch(protocol_type, &group.protocol_type)
            || mismatch(protocol_name, &group.protocol_name)
        {
            return Pending::Now(Err(ResponseError::InconsistentGroupProtocol));
        }
        let answer = |group: &Group, id: &str| SyncAnswer {
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol_name.clone(),
            assignment: group
                .members
                .get(id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        };
        match group.state {
            GroupState::Empty | GroupState::Dead => {
                Pending::Now(Err(ResponseError::UnknownMemberId))
            }
            GroupState::PreparingRebalance => Pending::Now(Err(ResponseError::RebalanceInProgress)),
            GroupState::Stable => {
                if let Some(member) = group.members.get_mut(member_id) {
                    member.last_heartbeat = now;
                }
                Pending::Now(Ok(answer(group, member_id)))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                if let Some(member) = group.members.get_mut(member_id) {
                    member.awaiting_sync = Some(tx);
                }
                if group.leader.as_deref() == Some(member_id) {
                    let mut given: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for (id, member) in &mut group.members {
                        member.assignment = given.remove(id).unwrap_or_default();
                    }
                    group.state = GroupState::Stable;
                    group.store();
                    let ids: Vec<String> = group.members.keys().cloned().collect();
                    for id in ids {
                        let reply = answer(group, &id);
                        // An answered member's session starts again (Kafka's propagateAssignment).
                        if let Some(member) = group.members.get_mut(&id) {
                            member.last_heartbeat = now;
                            if let Some(w) = member.awaiting_sync.take() {
                                let _ = w.send(Ok(reply));
                            }
                        }
                    }
                }
                Pending::Wait(rx)
            }
        }
    }

    /// Heartbeat, as Kafka's `GroupCoordinator.handleHeartbeat`.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: Instant,
    ) -> Result<(), ResponseError> {
        let group = self
            .groups
            .get_mut(group_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        group.check_member(member_id, instance_id)?;
        if generation_id != group.generation_id {
            return Err(ResponseError::IllegalGeneration);
        }
        if let Some(member) = group.members.get_mut(member_id) {
            member.last_heartbeat = now;
        }
        match group.state {
            GroupState::Empty | GroupState::Dead => Err(ResponseError::UnknownMemberId),
            GroupState::PreparingRebalance => Err(ResponseError::RebalanceInProgress),
            GroupState::CompletingRebalance | GroupState::Stable => Ok(()),
        }
    }

    /// LeaveGroup for each `(member id, instance id)`: the error of each, or a group-level one.
    pub fn leave(
        &mut self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now: Instant,
    ) -> Vec<Result<(), ResponseError>> {
        let Some(group) = self.groups.get_mut(group_id) else {
            return members
                .iter()
                .map(|_| Err(ResponseError::UnknownMemberId))
                .collect();
        };
        members
            .iter()
            .map(|(member_id, instance)| {
                // A member id handed out with MEMBER_ID_REQUIRED that never joined.
                if group.pending.remove(member_id).is_some() {
                    group.try_complete_join(now, false);
                    return Ok(());
                }
                // A static member may leave by instance id alone (KIP-345).
                let id = match (member_id.as_str(), instance) {
                    ("", Some(instance)) => group
                        .members
                        .iter()
                        .find(|(_, m)| m.group_instance_id.as_ref() == Some(instance))
                        .map(|(id, _)| id.clone())
                        .ok_or(ResponseError::UnknownMemberId)?,
                    (id, instance) => {
                        group.check_member(id, instance.as_deref())?;
                        id.to_owned()
                    }
                };
                group.remove_member(&id, now);
                Ok(())
            })
            .collect()
    }

    /// Checks an OffsetCommit (at `version`) against the group, as Kafka's
    /// `validateOffsetCommit` (and REBALANCE_IN_PROGRESS while CompletingRebalance); creates
    /// the group for a commit from outside any group (generation -1), as Kafka does.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, and
    /// from v9 GROUP_ID_NOT_FOUND for a generation of a group that does not exist.
    pub fn check_commit(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        version: i16,
    ) -> Result<&mut Group, ResponseError> {
        if !self.groups.contains_key(group_id) {
            // A group Kafka does not know: a commit from outside group management (generation
            // -1) creates it; any other is from a generation that no longer exists.
            if generation_id >= 0 {
                return Err(if version >= 9 {
                    ResponseError::GroupIdNotFound
                } else {
                    ResponseError::IllegalGeneration
                });
            }
            return Ok(self
                .groups
                .entry(group_id.to_owned())
                .or_insert_with(Group::new));
        }
        let group = self.groups.get_mut(group_id).expect("checked above");
        // An Empty group takes commits from outside group management (Kafka 4's
        // `ClassicGroup.validateOffsetCommit`), whatever member id they carry.
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(group);
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            group.check_member(member_id, instance_id)?;
            if generation_id != group.generation_id {
                return Err(ResponseError::IllegalGeneration);
            }
        } else {
            // When the group has members, only members may commit.
            return Err(ResponseError::UnknownMemberId);
        }
        if group.state == GroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(group)
    }

    /// Checks a TxnOffsetCommit against the group, as Kafka's `OffsetMetadataManager.
    /// validateTransactionalOffsetCommit` (`ClassicGroup.validateOffsetCommit` with
    /// `isTransactional`): like an OffsetCommit, except that a request without member and
    /// generation is taken whatever the group's state, and a rebalance does not refuse it.
    ///
    /// # Errors
    /// ILLEGAL_GENERATION (also for a generation of a group that does not exist),
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID.
    pub fn check_txn_commit(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ResponseError> {
        let Some(group) = self.groups.get(group_id) else {
            if generation_id >= 0 {
                return Err(ResponseError::IllegalGeneration);
            }
            self.groups.insert(group_id.to_owned(), Group::new());
            return Ok(());
        };
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            group.check_member(member_id, instance_id)?;
            if generation_id != group.generation_id {
                return Err(ResponseError::IllegalGeneration);
            }
        }
        Ok(())
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
            group.reload(now);
        }
    }

    /// Expires members whose session timed out, and completes rebalances whose timeout
    /// passed, in the groups `coordinated` selects (a group whose coordinator is offline has
    /// no timers running, as in Kafka). Called by the cluster every few milliseconds.
    pub fn tick(&mut self, now: Instant, coordinated: impl Fn(&str) -> bool) {
        for (_, group) in self.groups.iter_mut().filter(|(id, _)| coordinated(id)) {
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
