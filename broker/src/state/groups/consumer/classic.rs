//! Classic-protocol members inside a KIP-848 consumer group, as Kafka 4.4's
//! `GroupMetadataManager` serves them after an upgrade ([`super::migration`]): they keep
//! speaking JoinGroup, SyncGroup, Heartbeat and LeaveGroup ([`Groups::classic_join`] and the
//! others). A JoinGroup updates the member from its subscription (owned partitions included)
//! and reconciles it as a heartbeat would, answered at once with its member epoch as the
//! generation; SyncGroup serves its current assignment; Heartbeat answers
//! REBALANCE_IN_PROGRESS while the group epoch is past the member's, while it has partitions to
//! revoke, or when partitions it waits for were released. A member told to rejoin must join
//! within its rebalance timeout, and sync within it after joining, or it is fenced (Kafka's
//! join and sync timeouts); its session timeout is its JoinGroup's.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use super::advance::advance;
use super::migration::{by_id, decode_subscription, encode_assignment};
use super::{ConsumerGroup, ConsumerMember, MemberState, MigrationPolicy, TopicIndex};
use crate::state::groups::{Groups, JoinRequest, JoinResult, SyncAnswer, SyncResult};

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

/// Kafka's `ConsumerGroup.supportsClassicProtocols`: the `consumer` protocol type, and a
/// protocol named as many times by the classic members as there are classic members (Kafka's
/// `classicProtocolMembersSupportedProtocols` counts a protocol each time a member names it,
/// a name given twice counting twice). Kafka keeps the counts as members come and go; kmock
/// counts per join, in one pass over the classic members' protocols (linear in the group, not
/// members × protocols × the request's protocols).
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
    let mut classic_members = 0;
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for classic in cg.members.values().filter_map(|m| m.classic.as_ref()) {
        classic_members += 1;
        for (name, _) in &classic.protocols {
            *counts.entry(name.as_str()).or_default() += 1;
        }
    }
    protocols
        .iter()
        .any(|(name, _)| counts.get(name.as_str()).copied().unwrap_or(0) == classic_members)
}

/// The JoinGroup answer of the classic member `member_id` of `cg`: its member epoch as the
/// generation, no leader (Kafka's `classicGroupJoinToConsumerGroup`).
fn answer(cg: &ConsumerGroup, member_id: String) -> JoinResult {
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
        closed: None,
    }
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
        // A static member's new instance (an empty member id) takes the old id's place; a
        // known member id must own the instance (Kafka's `throwIfStaticMemberIsUnknown`,
        // `throwIfInstanceIdIsFenced`).
        let mut replaced_consumer_member = false;
        if let Some(instance) = &req.group_instance_id {
            let owner = cg.static_member(instance).cloned();
            if req.member_id.is_empty() {
                if let Some(old) = owner {
                    let mut m = cg.members.remove(&old).expect("found above");
                    replaced_consumer_member = m.classic.is_none();
                    m.member_epoch = 0;
                    m.previous_member_epoch = 0;
                    if let Some(t) = cg.target.remove(&old) {
                        cg.target.insert(member_id.clone(), t);
                    }
                    cg.members.insert(member_id.clone(), m);
                }
            } else {
                match owner {
                    None => return fail(ResponseError::UnknownMemberId),
                    Some(owner) if owner != member_id => {
                        return fail(ResponseError::FencedInstanceId)
                    }
                    Some(_) => {}
                }
            }
        }
        let is_new = !cg.members.contains_key(&member_id);
        let member = cg
            .members
            .entry(member_id.clone())
            .or_insert_with(|| ConsumerMember::new(now, config.session_timeout));
        if member.classic.is_none() && !is_new && !replaced_consumer_member {
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
        if replaced_consumer_member {
            // Kafka's `validateOnlineDowngradeWithReplacedMember`: the replaced member was the
            // last consumer-protocol one, so the group goes back to classic and rebalances;
            // the new instance is told to rejoin it.
            let group = self.groups.get_mut(&req.group_id).expect("found above");
            if super::migration::fence_or_downgrade(group, &[], config.migration_policy, now) {
                self.conversions.push(crate::state::groups::Conversion {
                    group_id: req.group_id.clone(),
                    to: "classic",
                    member_id: member_id.clone(),
                });
                return JoinResult::error(ResponseError::RebalanceInProgress, &member_id);
            }
            let cg = self
                .groups
                .get_mut(&req.group_id)
                .and_then(|g| g.consumer.as_deref_mut())
                .expect("not downgraded");
            return answer(cg, member_id);
        }
        answer(cg, member_id)
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
        let member = classic_member(cg, member_id, instance_id)?;
        if generation_id != member.member_epoch {
            return Err(ResponseError::IllegalGeneration);
        }
        let (epoch, state) = (member.member_epoch, member.state);
        // Only a member waiting for partitions others still hold needs the walk of its target.
        let rejoin = epoch < group_epoch
            || state == MemberState::UnrevokedPartitions
            || (state == MemberState::UnreleasedPartitions
                && !waiting_on_unreleased(cg, member_id));
        let member = cg.members.get_mut(member_id).expect("found above");
        let c = member.classic.as_mut().expect("checked");
        member.session_deadline = now + c.session_timeout;
        if rejoin {
            c.join_deadline
                .get_or_insert(now + member.rebalance_timeout);
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// LeaveGroup of members of a consumer group, of either protocol (Kafka 4.4's
    /// `classicGroupLeaveToConsumerGroup`, conformance case
    /// `classic_requests_to_a_consumer_group`): the answer for each `(member id, instance
    /// id)`; those found leave together ([`super::migration::fence_or_downgrade`]: the group
    /// epoch moves once, or the group is downgraded).
    pub(crate) fn classic_leave(
        &mut self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now: Instant,
    ) -> Vec<Result<(), ResponseError>> {
        let policy = self.consumer_config.migration_policy;
        let Some(group) = self.groups.get_mut(group_id) else {
            return members
                .iter()
                .map(|_| Err(ResponseError::UnknownMemberId))
                .collect();
        };
        let Some(cg) = group.consumer.as_deref() else {
            return members
                .iter()
                .map(|_| Err(ResponseError::UnknownMemberId))
                .collect();
        };
        let mut leaving: Vec<String> = Vec::new();
        // Deduplicated through a set: a LeaveGroup of many members stays linear.
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
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
                if !cg.members.contains_key(&id) {
                    return Err(ResponseError::UnknownMemberId);
                }
                if seen.insert(id.clone()) {
                    leaving.push(id);
                }
                Ok(())
            })
            .collect();
        let ids: Vec<&str> = leaving.iter().map(String::as_str).collect();
        if !ids.is_empty() && super::migration::fence_or_downgrade(group, &ids, policy, now) {
            self.conversions.push(crate::state::groups::Conversion {
                group_id: group_id.to_owned(),
                to: "classic",
                member_id: leaving.join(","),
            });
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
