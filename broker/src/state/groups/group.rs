//! One classic group's state: its members, the rebalance's progress and what was last stored
//! for a new coordinator to load ([`Group`]).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::Decodable;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::*;

#[derive(Debug)]
pub(super) struct Member {
    pub(super) group_instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) session_timeout: Duration,
    pub(super) rebalance_timeout: Duration,
    pub(super) protocol_type: String,
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    pub(super) last_heartbeat: Instant,
    pub(super) awaiting_join: Option<oneshot::Sender<JoinResult>>,
    pub(super) awaiting_sync: Option<oneshot::Sender<SyncResult>>,
}

impl Member {
    /// The member as the group's stored record keeps it: no request waiting.
    pub(super) fn stored(&self) -> Member {
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
pub(super) struct StoredGroup {
    pub(super) state: GroupState,
    pub(super) generation_id: i32,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol_name: Option<String>,
    pub(super) leader: Option<String>,
    pub(super) members: BTreeMap<String, Member>,
}

/// One group.
#[derive(Debug)]
pub struct Group {
    pub(super) state: GroupState,
    pub(super) generation_id: i32,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol_name: Option<String>,
    pub(super) leader: Option<String>,
    pub(super) members: BTreeMap<String, Member>,
    /// Member ids given out with MEMBER_ID_REQUIRED, and when they expire.
    pub(super) pending: HashMap<String, Instant>,
    pub(super) rebalance_deadline: Option<Instant>,
    /// The group as last stored, which a new coordinator loads.
    pub(super) stored: Option<StoredGroup>,
    /// Committed offsets by (topic, partition).
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// The KIP-848 state when this is a consumer group (`group.protocol=consumer`), `None`
    /// for a classic group.
    pub consumer: Option<Box<consumer::ConsumerGroup>>,
}

impl Group {
    pub(super) fn new() -> Self {
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
            consumer: None,
        }
    }

    /// The group's state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// Protocol type (`consumer`), if any member ever joined; `consumer` for a consumer
    /// group.
    pub fn protocol_type(&self) -> Option<&str> {
        if self.consumer.is_some() {
            return Some("consumer");
        }
        self.protocol_type.as_deref()
    }

    /// The group type as ListGroups names it: `consumer` (KIP-848) or `classic`.
    pub fn group_type(&self) -> &'static str {
        if self.consumer.is_some() {
            "consumer"
        } else {
            "classic"
        }
    }

    /// The state's name as ListGroups gives it, for either group type.
    pub fn state_name(&self) -> &'static str {
        match &self.consumer {
            Some(cg) => cg.state().name(),
            None => self.state.name(),
        }
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
    pub(super) fn check_member(
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
    pub(super) fn store(&mut self) {
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
    pub(super) fn reload(&mut self, now: Instant) {
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
    pub(super) fn prepare_rebalance(&mut self, now: Instant) {
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
    pub(super) fn try_complete_join(&mut self, now: Instant, force: bool) {
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
        // Members with no candidate protocol to vote for: Kafka's vote throws, the rebalance
        // never completes and no join is answered; kmock closes their joins' connections and
        // removes them (each removal may leave another member without a candidate).
        let protocol = loop {
            match self.vote() {
                Ok(protocol) => break Some(protocol),
                Err(ids) if ids.is_empty() => break None,
                Err(ids) => {
                    for id in ids {
                        let Some(mut member) = self.members.remove(&id) else {
                            continue;
                        };
                        if let Some(waiter) = member.awaiting_join.take() {
                            let _ = waiter.send(JoinResult {
                                closed: Some(NO_CANDIDATE.to_owned()),
                                generation_id: -1,
                                member_id: id,
                                ..JoinResult::default()
                            });
                        }
                    }
                    if self.members.is_empty() {
                        break None;
                    }
                }
            }
        };
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol_name = None;
            self.leader = None;
            self.store();
            return;
        }
        self.protocol_name = protocol;
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
                    skip_assignment: false,
                    closed: None,
                });
            }
        }
    }

    /// How many times the members name each protocol, a protocol named twice by one member
    /// counted twice (Kafka's `ClassicGroup.supportedProtocols`, kept by
    /// `incrementSupportedProtocols`).
    fn protocol_counts(&self) -> HashMap<&str, usize> {
        let mut counts = HashMap::new();
        for m in self.members.values() {
            for (name, _) in &m.protocols {
                *counts.entry(name.as_str()).or_default() += 1;
            }
        }
        counts
    }

    /// The protocol most members vote for, each for its first candidate, a candidate being a
    /// protocol whose count ([`Self::protocol_counts`]) equals the number of members (Kafka's
    /// `ClassicGroup.selectProtocol` and `candidateProtocols`); or the ids of the members with
    /// no candidate to vote for, where Kafka's `ClassicGroupMember.vote` throws. A lone member
    /// naming `[p, p, q]` gets `q`; one naming `[p, p]` has no candidate.
    pub(super) fn vote(&self) -> Result<String, Vec<String>> {
        let counts = self.protocol_counts();
        let size = self.members.len();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        let mut no_candidate = Vec::new();
        for (id, m) in &self.members {
            match m.protocols.iter().find(|(n, _)| counts[n.as_str()] == size) {
                Some((name, _)) => *votes.entry(name).or_default() += 1,
                None => no_candidate.push(id.clone()),
            }
        }
        if !no_candidate.is_empty() {
            return Err(no_candidate);
        }
        votes
            .into_iter()
            .max_by_key(|(_, v)| *v)
            .map(|(n, _)| n.to_owned())
            .ok_or_else(Vec::new)
    }

    /// [`Self::vote`]'s protocol, `None` when some member has no candidate.
    pub(super) fn select_protocol(&self) -> Option<String> {
        self.vote().ok()
    }

    /// Whether a member with these protocols could join (Kafka's `supportsProtocols`): one of
    /// them counted ([`Self::protocol_counts`]) as many times as there are members.
    pub(super) fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        let counts = self.protocol_counts();
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(n, _)| counts.get(n.as_str()) == Some(&self.members.len()))
    }

    pub(super) fn remove_member(&mut self, member_id: &str, now: Instant) {
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
