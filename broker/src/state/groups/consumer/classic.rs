//! Classic-protocol members inside a KIP-848 consumer group, and the online migration between
//! the two group types (KIP-848's upgrade and downgrade), as Kafka 4.4's `GroupMetadataManager`
//! runs them under `group.consumer.migration.policy` ([`MigrationPolicy`]).
//!
//! - **Upgrade** ([`upgrade`]): a joining ConsumerGroupHeartbeat (epoch 0) for a live classic
//!   group whose protocol type is `consumer` converts it (`convertToConsumerGroup`), when the
//!   policy allows (`bidirectional`, `upgrade`) and its size is within
//!   `group.consumer.max.size`: the group epoch and the assignment epoch become the classic
//!   generation; each member keeps its id, subscription (decoded from its metadata of the chosen
//!   protocol) and assignment (decoded from its SyncGroup assignment), at the generation as its
//!   member epoch, its assignment also its target (`ConsumerGroup.fromClassicGroup`). A JoinGroup
//!   or SyncGroup still waiting is answered REBALANCE_IN_PROGRESS. Refusals are
//!   GROUP_ID_NOT_FOUND with Kafka's message (`validateOnlineUpgrade`).
//! - **Classic members** then keep speaking JoinGroup, SyncGroup, Heartbeat and LeaveGroup
//!   ([`Groups::classic_join`] and the others): a JoinGroup updates the member from its
//!   subscription (owned partitions included) and reconciles it as a heartbeat would, answered
//!   at once with its member epoch as the generation; SyncGroup serves its current assignment;
//!   Heartbeat answers REBALANCE_IN_PROGRESS while the group epoch is past the member's, while it
//!   has partitions to revoke, or when partitions it waits for were released. A member told to
//!   rejoin must join within its rebalance timeout, and sync within it after joining, or it is
//!   fenced (Kafka's join and sync timeouts); its session timeout is its JoinGroup's.
//! - **Downgrade** ([`fence_or_downgrade`]): when the last consumer-protocol member leaves
//!   (epoch -1) or is fenced, and the others all speak the classic protocol, the group becomes a
//!   classic group again (`convertToClassicGroup`) at the group epoch as its generation, each
//!   member with its target assignment, and a rebalance starts; policy `bidirectional` or
//!   `downgrade`.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use super::heartbeat::{advance, refuse, Refusal};
use super::{ConsumerGroup, ConsumerMember, MemberState, MigrationPolicy, Partitions, TopicIndex};
use crate::state::groups::group::Member;
use crate::state::groups::{
    Group, GroupState, Groups, JoinRequest, JoinResult, SyncAnswer, SyncResult,
};

/// What a consumer group keeps of a member speaking the classic protocol (Kafka's
/// `ClassicMemberMetadata`), with its join and sync timers.
#[derive(Debug, Clone)]
pub struct ClassicMember {
    /// Session timeout of its last JoinGroup.
    pub session_timeout: Duration,
    /// `(name, metadata)` of each protocol it supports, in its order.
    pub protocols: Vec<(String, Bytes)>,
    /// Fenced unless it rejoins by then (set when told REBALANCE_IN_PROGRESS).
    pub(crate) join_deadline: Option<Instant>,
    /// Fenced unless it syncs by then (set when it joined).
    pub(crate) sync_deadline: Option<Instant>,
}

impl ClassicMember {
    /// The protocol the member is answered with: its first (Kafka's
    /// `supportedClassicProtocols().iterator().next()`).
    pub fn protocol_name(&self) -> &str {
        self.protocols.first().map_or("", |(n, _)| n.as_str())
    }
}

/// The consumer protocol version of a metadata or assignment (its first two bytes), decoded at
/// the highest version kafka-protocol knows when newer, as Kafka reads a newer one.
fn versioned(bytes: &Bytes) -> Option<(i16, Bytes)> {
    if bytes.len() < 2 {
        return None;
    }
    let mut buf = bytes.clone();
    let version = buf.get_i16();
    (version >= 0).then_some((version.min(3), buf))
}

/// A member's subscription from its consumer protocol metadata; `None` when malformed.
pub fn decode_subscription(metadata: &Bytes) -> Option<ConsumerProtocolSubscription> {
    let (version, mut buf) = versioned(metadata)?;
    ConsumerProtocolSubscription::decode(&mut buf, version).ok()
}

/// A member's assignment bytes as partitions by topic id (topics the cluster does not know are
/// left out, as Kafka's `toTopicPartitionMap`); none for a member that has not synced yet
/// (Kafka 4.4 upgrades such a group: conformance case
/// `consumer_group_heartbeat_to_classic_groups_it_does_not_upgrade`); `None` when malformed.
fn decode_assignment(bytes: &Bytes, topics: &impl TopicIndex) -> Option<Partitions> {
    if bytes.is_empty() {
        return Some(Partitions::new());
    }
    let (version, mut buf) = versioned(bytes)?;
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version).ok()?;
    let mut out = Partitions::new();
    for tp in assignment.assigned_partitions {
        if let Some((id, _)) = topics.topic(tp.topic.0.as_str()) {
            out.entry(id).or_default().extend(tp.partitions);
        }
    }
    Some(out)
}

/// Partitions named by topic, as ids (unknown topics left out).
fn by_id<'a>(
    named: impl Iterator<Item = (&'a str, &'a [i32])>,
    topics: &impl TopicIndex,
) -> Partitions {
    let mut out = Partitions::new();
    for (topic, partitions) in named {
        if let Some((id, _)) = topics.topic(topic) {
            out.entry(id)
                .or_default()
                .extend(partitions.iter().copied());
        }
    }
    out
}

/// `partitions` as consumer protocol assignment bytes at the version of `metadata` (Kafka's
/// `prepareAssignment`), topic names from the group's subscription metadata.
pub(crate) fn encode_assignment(
    cg: &ConsumerGroup,
    partitions: &Partitions,
    metadata: &Bytes,
) -> Bytes {
    let version = versioned(metadata).map_or(0, |(v, _)| v);
    let names: BTreeMap<Uuid, &String> = cg
        .subscription_metadata
        .iter()
        .map(|(name, (id, _))| (*id, name))
        .collect();
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
        partitions
            .iter()
            .filter_map(|(id, ps)| {
                names.get(id).map(|name| {
                    TopicPartition::default()
                        .with_topic(TopicName(StrBytes::from_string((*name).clone())))
                        .with_partitions(ps.iter().copied().collect())
                })
            })
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    // A message kafka-protocol encodes at its own versions cannot fail here.
    let _ = assignment.encode(&mut buf, version);
    buf.freeze()
}

/// Converts the live classic `group` to a consumer group (see the module header), or refuses
/// as Kafka's `validateOnlineUpgrade` and `convertToConsumerGroup` do.
///
/// # Errors
/// GROUP_ID_NOT_FOUND with Kafka's message.
pub(crate) fn upgrade(
    group: &mut Group,
    group_id: &str,
    policy: MigrationPolicy,
    max_size: usize,
    topics: &impl TopicIndex,
    now: Instant,
) -> Result<(), Refusal> {
    let cannot = |why: &str| {
        refuse(
            ResponseError::GroupIdNotFound,
            format!("Cannot upgrade classic group {group_id} to consumer group {why}."),
        )
    };
    if !policy.upgrade_enabled() {
        return cannot("because online upgrade is disabled");
    }
    if group.protocol_type.as_deref() != Some("consumer") {
        return cannot("because the group does not use the consumer embedded protocol");
    }
    if group.members.len() > max_size {
        return cannot("because the group size exceeds the consumer group maximum size");
    }
    let generation = group.generation_id;
    let mut cg = ConsumerGroup {
        group_epoch: generation,
        assignment_epoch: generation,
        ..ConsumerGroup::default()
    };
    for (id, m) in &group.members {
        let metadata = group
            .protocol_name
            .as_ref()
            .and_then(|p| m.protocols.iter().find(|(n, _)| n == p))
            .map(|(_, md)| md.clone())
            .unwrap_or_default();
        let (Some(sub), Some(assigned)) = (
            decode_subscription(&metadata),
            decode_assignment(&m.assignment, topics),
        ) else {
            return cannot("because the embedded consumer protocol is malformed");
        };
        let mut names: Vec<String> = sub.topics.iter().map(|t| t.as_str().to_owned()).collect();
        names.sort();
        names.dedup();
        cg.subscribed.add_names(&names);
        let mut member = ConsumerMember::new(now, m.session_timeout);
        member.member_epoch = generation;
        member.previous_member_epoch = generation;
        member.instance_id = m.group_instance_id.clone();
        member.rack_id = sub.rack_id.as_ref().map(|r| r.as_str().to_owned());
        member.rebalance_timeout = m.rebalance_timeout;
        member.client_id = m.client_id.clone();
        member.client_host = m.client_host.clone();
        member.subscribed_topic_names = names;
        member.assigned = assigned
            .iter()
            .map(|(t, ps)| (*t, ps.iter().map(|p| (*p, generation)).collect()))
            .collect();
        member.classic = Some(ClassicMember {
            session_timeout: m.session_timeout,
            protocols: m.protocols.clone(),
            join_deadline: None,
            sync_deadline: None,
        });
        cg.target.insert(id.clone(), assigned);
        cg.members.insert(id.clone(), member);
    }
    cg.subscription_metadata = super::subscriptions::subscription_metadata(&cg, topics);
    // Requests waiting on the classic rebalance are told to rejoin (Kafka's
    // `completeAllJoinFutures` / `completeAllSyncFutures`).
    for (id, m) in &mut group.members {
        if let Some(tx) = m.awaiting_join.take() {
            let _ = tx.send(JoinResult::error(ResponseError::RebalanceInProgress, id));
        }
        if let Some(tx) = m.awaiting_sync.take() {
            let _ = tx.send(Err(ResponseError::RebalanceInProgress));
        }
    }
    let offsets = std::mem::take(&mut group.offsets);
    *group = Group::new();
    group.offsets = offsets;
    group.consumer = Some(Box::new(cg));
    tracing::info!(
        group = group_id,
        "classic group upgraded to a consumer group"
    );
    Ok(())
}

/// Fences `member_id` (Kafka's `consumerGroupFenceMember`), or, when it is the last member
/// speaking the consumer protocol among classic ones and `policy` allows, converts the group
/// back to a classic group without it and starts a rebalance (`convertToClassicGroup`).
/// Returns whether the group was downgraded.
pub(crate) fn fence_or_downgrade(
    group: &mut Group,
    member_id: &str,
    policy: MigrationPolicy,
    now: Instant,
) -> bool {
    let Some(cg) = group.consumer.as_deref_mut() else {
        return false;
    };
    let others_classic = cg
        .members
        .get(member_id)
        .is_some_and(|m| m.classic.is_none())
        && cg
            .members
            .iter()
            .all(|(id, m)| id == member_id || m.classic.is_some());
    if !(others_classic && cg.members.len() > 1 && policy.downgrade_enabled()) {
        cg.fence(member_id);
        return false;
    }
    let cg = group.consumer.take().expect("checked above");
    let mut classic = Group::new();
    classic.offsets = std::mem::take(&mut group.offsets);
    classic.generation_id = cg.group_epoch;
    classic.protocol_type = Some("consumer".to_owned());
    for (id, m) in cg.members.iter().filter(|(id, _)| *id != member_id) {
        let c = m.classic.as_ref().expect("checked above");
        classic.members.insert(
            id.clone(),
            Member {
                group_instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout: c.session_timeout,
                rebalance_timeout: m.rebalance_timeout,
                protocol_type: "consumer".to_owned(),
                protocols: c.protocols.clone(),
                assignment: Bytes::new(),
                last_heartbeat: now,
                awaiting_join: None,
                awaiting_sync: None,
            },
        );
        if classic.leader.is_none() {
            classic.leader = Some(id.clone());
        }
    }
    classic.protocol_name = classic.select_protocol();
    let chosen = classic.protocol_name.clone().unwrap_or_default();
    for (id, member) in &mut classic.members {
        let metadata = member
            .protocols
            .iter()
            .find(|(n, _)| *n == chosen)
            .map(|(_, md)| md.clone())
            .unwrap_or_default();
        let target = cg.target.get(id).cloned().unwrap_or_default();
        member.assignment = encode_assignment(&cg, &target, &metadata);
    }
    classic.state = GroupState::Stable;
    classic.store();
    classic.prepare_rebalance(now);
    *group = classic;
    tracing::info!(
        member = member_id,
        "consumer group downgraded to a classic group"
    );
    true
}

/// Kafka's `ConsumerGroup.supportsClassicProtocols`: the `consumer` protocol type, and a
/// protocol every classic member supports.
fn supports_classic(
    cg: &ConsumerGroup,
    protocol_type: &str,
    protocols: &[(String, Bytes)],
) -> bool {
    if protocol_type != "consumer" {
        return false;
    }
    if cg.members.is_empty() {
        return !protocols.is_empty();
    }
    protocols.iter().any(|(name, _)| {
        cg.members.values().all(|m| {
            m.classic
                .as_ref()
                .is_none_or(|c| c.protocols.iter().any(|(n, _)| n == name))
        })
    })
}

/// The classic member `member_id` (with `instance_id`) of `cg`, as Kafka's
/// `validateConsumerGroupMember` and `throwIfMemberDoesNotUseClassicProtocol`.
fn classic_member<'a>(
    cg: &'a mut ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<&'a mut ConsumerMember, ResponseError> {
    if let Some(instance) = instance_id {
        match cg.static_member(instance) {
            None => return Err(ResponseError::UnknownMemberId),
            Some(owner) if owner != member_id => return Err(ResponseError::FencedInstanceId),
            Some(_) => {}
        }
    }
    let member = cg
        .members
        .get_mut(member_id)
        .ok_or(ResponseError::UnknownMemberId)?;
    if member.classic.is_none() {
        return Err(ResponseError::UnknownMemberId);
    }
    Ok(member)
}

impl Groups {
    /// A JoinGroup to a consumer group with members (Kafka's `classicGroupJoinToConsumerGroup`),
    /// validated already as any JoinGroup; `topics` gives each topic name's id.
    pub(crate) fn classic_join(
        &mut self,
        req: &JoinRequest,
        topics: &impl TopicIndex,
        now: Instant,
    ) -> JoinResult {
        let config = self.consumer_config;
        let fail = |e| JoinResult::error(e, &req.member_id);
        if config.migration_policy == MigrationPolicy::Disabled {
            return fail(ResponseError::InconsistentGroupProtocol);
        }
        let member_id = if req.member_id.is_empty() {
            self.next_member += 1;
            Uuid::from_u64_pair(0x6b6d_6f63_6b00_0000, self.next_member).to_string()
        } else {
            req.member_id.clone()
        };
        let Some(cg) = self
            .groups
            .get_mut(&req.group_id)
            .and_then(|g| g.consumer.as_deref_mut())
        else {
            return fail(ResponseError::UnknownMemberId);
        };
        if !cg.members.contains_key(&member_id) && cg.members.len() >= config.max_size {
            return fail(ResponseError::GroupMaxSizeReached);
        }
        if !supports_classic(cg, &req.protocol_type, &req.protocols) {
            return fail(ResponseError::InconsistentGroupProtocol);
        }
        if req.require_known_member_id
            && req.member_id.is_empty()
            && req.group_instance_id.is_none()
        {
            return JoinResult::error(ResponseError::MemberIdRequired, &member_id);
        }
        let Some(sub) = req
            .protocols
            .first()
            .and_then(|(_, md)| decode_subscription(md))
        else {
            return fail(ResponseError::InconsistentGroupProtocol);
        };
        // A static member's new instance takes the old id's place.
        if let Some(instance) = &req.group_instance_id {
            if let Some(old) = cg.static_member(instance).cloned() {
                if old != member_id {
                    let mut m = cg.members.remove(&old).expect("found above");
                    m.member_epoch = 0;
                    m.previous_member_epoch = 0;
                    if let Some(t) = cg.target.remove(&old) {
                        cg.target.insert(member_id.clone(), t);
                    }
                    cg.members.insert(member_id.clone(), m);
                }
            }
        }
        let is_new = !cg.members.contains_key(&member_id);
        let member = cg
            .members
            .entry(member_id.clone())
            .or_insert_with(|| ConsumerMember::new(now, config.session_timeout));
        if member.classic.is_none() && !is_new {
            return fail(ResponseError::UnknownMemberId);
        }
        let session = Duration::from_millis(req.session_timeout_ms.max(0) as u64);
        if req.group_instance_id.is_some() {
            member.instance_id = req.group_instance_id.clone();
        }
        if let Some(rack) = &sub.rack_id {
            member.rack_id = Some(rack.as_str().to_owned());
        }
        if req.rebalance_timeout_ms != -1 {
            member.rebalance_timeout =
                Duration::from_millis(req.rebalance_timeout_ms.max(0) as u64);
        }
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        member.classic = Some(ClassicMember {
            session_timeout: session,
            protocols: req.protocols.clone(),
            join_deadline: None,
            sync_deadline: Some(now + member.rebalance_timeout),
        });
        let mut names: Vec<String> = sub.topics.iter().map(|t| t.as_str().to_owned()).collect();
        names.sort();
        names.dedup();
        let mut bump = is_new;
        if names != member.subscribed_topic_names {
            bump = true;
            let old = std::mem::replace(&mut member.subscribed_topic_names, names.clone());
            cg.subscribed.remove_names(&old);
            cg.subscribed.add_names(&names);
        }
        let owned = by_id(
            sub.owned_partitions
                .iter()
                .map(|tp| (tp.topic.0.as_str(), tp.partitions.as_slice())),
            topics,
        );
        advance(cg, &member_id, bump, Some(&owned), topics, now, &config);
        let member = &cg.members[&member_id];
        let classic = member.classic.as_ref().expect("set above");
        tracing::debug!(
            member = member_id,
            epoch = member.member_epoch,
            "classic member joined a consumer group"
        );
        JoinResult {
            error: None,
            generation_id: member.member_epoch,
            protocol_type: Some("consumer".to_owned()),
            protocol_name: Some(classic.protocol_name().to_owned()),
            leader: String::new(),
            member_id,
            members: Vec::new(),
            skip_assignment: false,
        }
    }

    /// A SyncGroup to a consumer group (Kafka's `classicGroupSyncToConsumerGroup`): the
    /// member's current assignment.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn classic_sync(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        now: Instant,
    ) -> SyncResult {
        let cg = self
            .groups
            .get_mut(group_id)
            .and_then(|g| g.consumer.as_deref_mut())
            .ok_or(ResponseError::UnknownMemberId)?;
        if cg.members.is_empty() {
            return Err(ResponseError::UnknownMemberId);
        }
        let group_epoch = cg.group_epoch;
        let member = classic_member(cg, member_id, instance_id)?;
        if generation_id != member.member_epoch {
            return Err(ResponseError::IllegalGeneration);
        }
        let classic = member.classic.as_ref().expect("checked");
        if protocol_type.is_some_and(|t| t != "consumer")
            || protocol_name.is_some_and(|n| n != classic.protocol_name())
        {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        if group_epoch > member.member_epoch && member.state != MemberState::UnrevokedPartitions {
            let deadline = now + member.rebalance_timeout;
            let c = member.classic.as_mut().expect("checked");
            c.join_deadline.get_or_insert(deadline);
            return Err(ResponseError::RebalanceInProgress);
        }
        let c = member.classic.as_mut().expect("checked");
        c.sync_deadline = None;
        member.session_deadline = now + c.session_timeout;
        let metadata = c
            .protocols
            .first()
            .map(|(_, md)| md.clone())
            .unwrap_or_default();
        let assigned = member.assigned_partitions();
        Ok(SyncAnswer {
            protocol_type: protocol_type.map(str::to_owned),
            protocol_name: protocol_name.map(str::to_owned),
            assignment: encode_assignment(cg, &assigned, &metadata),
        })
    }

    /// A Heartbeat to a consumer group (Kafka's `classicGroupHeartbeatToConsumerGroup`).
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS.
    pub(crate) fn classic_heartbeat(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: Instant,
    ) -> Result<(), ResponseError> {
        let cg = self
            .groups
            .get_mut(group_id)
            .and_then(|g| g.consumer.as_deref_mut())
            .ok_or(ResponseError::UnknownMemberId)?;
        let group_epoch = cg.group_epoch;
        let waiting = waiting_on_unreleased(cg, member_id);
        let member = classic_member(cg, member_id, instance_id)?;
        if generation_id != member.member_epoch {
            return Err(ResponseError::IllegalGeneration);
        }
        let c = member.classic.as_mut().expect("checked");
        member.session_deadline = now + c.session_timeout;
        let rejoin = member.member_epoch < group_epoch
            || member.state == MemberState::UnrevokedPartitions
            || (member.state == MemberState::UnreleasedPartitions && !waiting);
        if rejoin {
            c.join_deadline
                .get_or_insert(now + member.rebalance_timeout);
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// LeaveGroup of classic members of a consumer group (Kafka's
    /// `classicGroupLeaveToConsumerGroup`): the answer for each `(member id, instance id)`;
    /// the group epoch moves once if any left.
    pub(crate) fn classic_leave(
        &mut self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Vec<Result<(), ResponseError>> {
        let Some(cg) = self
            .groups
            .get_mut(group_id)
            .and_then(|g| g.consumer.as_deref_mut())
        else {
            return members
                .iter()
                .map(|_| Err(ResponseError::UnknownMemberId))
                .collect();
        };
        let mut left = false;
        let answers = members
            .iter()
            .map(|(member_id, instance)| {
                let id = match instance {
                    None => member_id.clone(),
                    Some(instance) => {
                        let owner = cg
                            .static_member(instance)
                            .cloned()
                            .ok_or(ResponseError::UnknownMemberId)?;
                        if !member_id.is_empty() && owner != *member_id {
                            return Err(ResponseError::FencedInstanceId);
                        }
                        owner
                    }
                };
                classic_member(cg, &id, None)?;
                let epoch = cg.group_epoch;
                cg.fence(&id);
                cg.group_epoch = epoch;
                left = true;
                Ok(())
            })
            .collect();
        if left {
            cg.group_epoch = super::next_epoch(cg.group_epoch);
        }
        answers
    }
}

/// Whether `member_id` waits for a partition of its target another member still owns (Kafka's
/// `ConsumerGroup.waitingOnUnreleasedPartition`).
fn waiting_on_unreleased(cg: &ConsumerGroup, member_id: &str) -> bool {
    let (Some(member), Some(target)) = (cg.members.get(member_id), cg.target.get(member_id)) else {
        return false;
    };
    target.iter().any(|(t, ps)| {
        ps.iter().any(|p| {
            !member.assigned.get(t).is_some_and(|a| a.contains_key(p))
                && cg.current_partition_epoch(*t, *p) != -1
        })
    })
}

impl ConsumerGroup {
    /// Members whose classic join or sync timer passed (Kafka's `consumerGroupJoinKey` and
    /// `consumerGroupSyncKey` timeouts).
    pub(crate) fn classic_timed_out(&self, now: Instant) -> Vec<String> {
        self.members
            .iter()
            .filter(|(_, m)| {
                m.classic.as_ref().is_some_and(|c| {
                    c.join_deadline.is_some_and(|d| d <= now)
                        || c.sync_deadline.is_some_and(|d| d <= now)
                })
            })
            .map(|(id, _)| id.clone())
            .collect()
    }
}
