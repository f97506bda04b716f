//! Membership of classic groups: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, as Kafka's
//! `GroupCoordinator` handles them.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::group::Member;
use super::*;

impl Groups {
    /// JoinGroup, as Kafka's `GroupCoordinator.handleJoinGroup` (classic protocol), with no
    /// topic known (see [`Self::join_with`]).
    pub fn join(&mut self, req: JoinRequest, now: Instant) -> Pending<JoinResult> {
        self.join_with(req, &BTreeMap::<String, (uuid::Uuid, i32)>::new(), now)
    }

    /// JoinGroup, as Kafka's `GroupCoordinator.handleJoinGroup` (classic protocol); to a
    /// KIP-848 consumer group with members, as a classic member of it
    /// ([`consumer::classic`]), `topics` giving each topic name's id.
    pub fn join_with(
        &mut self,
        req: JoinRequest,
        topics: &impl consumer::TopicIndex,
        now: Instant,
    ) -> Pending<JoinResult> {
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
        // A KIP-848 consumer group: an empty one becomes classic again (Kafka deletes it);
        // a classic member joins a live one as a classic member of it.
        if let Some(cg) = &group.consumer {
            if !cg.members.is_empty() {
                return Pending::Now(self.classic_join(&req, topics, now));
            }
            group.consumer = None;
        }
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
                if group.state == GroupState::Stable {
                    if let Some(joined) = replace_in_stable(group, &old, &fresh_id, &req, now) {
                        return Pending::Now(joined);
                    }
                }
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
                    skip_assignment: false,
                    closed: None,
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
        if group.consumer.is_some() {
            return Pending::Now(self.classic_sync(
                group_id,
                generation_id,
                member_id,
                instance_id,
                protocol_type,
                protocol_name,
                now,
            ));
        }
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
        if group.consumer.is_some() {
            return self.classic_heartbeat(group_id, generation_id, member_id, instance_id, now);
        }
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
        if group.consumer.is_some() {
            return self.classic_leave(group_id, members, now);
        }
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
}

/// A static member's new instance (an empty member id with a known `group.instance.id`)
/// replacing `old` in a Stable group whose protocol stays the one chosen: the member keeps its
/// assignment under `new_id` with no rebalance, and is answered at once with the current
/// generation (from v9 a leader with every member's metadata and `skip_assignment`; before
/// v9 nobody's metadata and the leader id from before the replacement), as Kafka's
/// `GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin`; the old id is fenced.
/// `None`, with the group untouched, when the protocol would change (a rebalance follows).
fn replace_in_stable(
    group: &mut Group,
    old: &str,
    new_id: &str,
    req: &JoinRequest,
    now: Instant,
) -> Option<JoinResult> {
    let mut member = group.members.remove(old)?;
    let previous = std::mem::replace(&mut member.protocols, req.protocols.clone());
    group.members.insert(new_id.to_owned(), member);
    if group.select_protocol() != group.protocol_name {
        let mut member = group.members.remove(new_id).expect("inserted above");
        member.protocols = previous;
        group.members.insert(old.to_owned(), member);
        return None;
    }
    let old_leader = group.leader.clone().unwrap_or_default();
    let member = group.members.get_mut(new_id).expect("inserted above");
    if let Some(w) = member.awaiting_sync.take() {
        let _ = w.send(Err(ResponseError::FencedInstanceId));
    }
    member.session_timeout = Duration::from_millis(req.session_timeout_ms as u64);
    member.rebalance_timeout = Duration::from_millis(req.rebalance_timeout_ms.max(0) as u64);
    member.client_id = req.client_id.clone();
    member.client_host = req.client_host.clone();
    member.last_heartbeat = now;
    let is_leader = group.leader.as_deref() == Some(old);
    if is_leader {
        group.leader = Some(new_id.to_owned());
    }
    group.store();
    // Before v9 no member list and the leader as it was before the replacement: the new
    // instance follows; from v9 a replaced leader gets its members and skips the assignment.
    let (members, leader) = if !req.supports_skip_assignment {
        (Vec::new(), old_leader)
    } else if is_leader {
        let all = group
            .members()
            .into_iter()
            .map(|(id, instance, _, _, metadata, _)| (id, instance, metadata))
            .collect();
        (all, new_id.to_owned())
    } else {
        (Vec::new(), group.leader.clone().unwrap_or_default())
    };
    Some(JoinResult {
        error: None,
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader,
        member_id: new_id.to_owned(),
        members,
        skip_assignment: req.supports_skip_assignment && is_leader,
        closed: None,
    })
}

#[cfg(test)]
#[path = "membership_tests.rs"]
mod tests;
