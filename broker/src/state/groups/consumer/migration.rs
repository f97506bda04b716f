//! KIP-848's online migration between a classic group and a consumer group, as Kafka 4.4's
//! `GroupMetadataManager` runs it under `group.consumer.migration.policy` ([`MigrationPolicy`]):
//! the upgrade of a live classic group by a joining ConsumerGroupHeartbeat ([`upgraded`], then
//! [`install`] once the heartbeat is accepted), the
//! downgrade when the last consumer-protocol member leaves ([`fence_or_downgrade`]), and the
//! consumer protocol's embedded subscription and assignment bytes both read and write. What the
//! classic members do in between is in [`super::classic`].

use std::collections::{BTreeMap, HashSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use super::classic::ClassicMember;
use super::heartbeat::{refuse, Refusal};
use super::{ConsumerGroup, ConsumerMember, Partitions, TopicIndex};
use crate::state::groups::group::Member;
use crate::state::groups::{Group, GroupState, JoinResult};

/// Kafka's `group.consumer.migration.policy` (`ConsumerGroupMigrationPolicy`): which online
/// conversions between a classic group and a KIP-848 consumer group the coordinator makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MigrationPolicy {
    /// Both ways (Kafka 4's default).
    #[default]
    Bidirectional,
    /// Classic to consumer only: a ConsumerGroupHeartbeat converts a live classic group.
    Upgrade,
    /// Consumer to classic only: the last consumer-protocol member leaving converts back.
    Downgrade,
    /// Neither; classic members may not join a consumer group either.
    Disabled,
}

impl MigrationPolicy {
    /// Kafka's name of the policy.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bidirectional => "bidirectional",
            Self::Upgrade => "upgrade",
            Self::Downgrade => "downgrade",
            Self::Disabled => "disabled",
        }
    }

    /// The policy named `name` (case-insensitive, as Kafka parses it).
    ///
    /// # Errors
    /// Another name.
    pub fn parse(name: &str) -> Result<Self, String> {
        [
            Self::Bidirectional,
            Self::Upgrade,
            Self::Downgrade,
            Self::Disabled,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            format!(
                "group.consumer.migration.policy {name:?}: one of bidirectional, upgrade, downgrade, disabled"
            )
        })
    }

    /// Whether a live classic group may be upgraded (`bidirectional`, `upgrade`).
    pub fn upgrade_enabled(self) -> bool {
        matches!(self, Self::Bidirectional | Self::Upgrade)
    }

    /// Whether a consumer group may be downgraded (`bidirectional`, `downgrade`).
    pub fn downgrade_enabled(self) -> bool {
        matches!(self, Self::Bidirectional | Self::Downgrade)
    }
}

impl std::str::FromStr for MigrationPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
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
pub(super) fn decode_subscription(metadata: &Bytes) -> Option<ConsumerProtocolSubscription> {
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
pub(super) fn by_id<'a>(
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
pub(super) fn encode_assignment(
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

/// The consumer group the live classic `group` converts to (see the module header), or the
/// refusal of Kafka's `validateOnlineUpgrade` and `convertToConsumerGroup`; `group` is left as
/// it is until [`install`] (a heartbeat refused later leaves the classic group).
///
/// # Errors
/// GROUP_ID_NOT_FOUND with Kafka's message.
pub(crate) fn upgraded(
    group: &Group,
    group_id: &str,
    policy: MigrationPolicy,
    max_size: usize,
    topics: &impl TopicIndex,
    now: Instant,
) -> Result<ConsumerGroup, Refusal> {
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
    Ok(cg)
}

/// Replaces the classic `group` by `cg` (from [`upgraded`]), keeping its offsets.
pub(crate) fn install(group: &mut Group, cg: Box<ConsumerGroup>, group_id: &str) {
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
    group.consumer = Some(cg);
    tracing::info!(
        group = group_id,
        "classic group upgraded to a consumer group"
    );
}

/// Fences the `leaving` members (Kafka's `consumerGroupFenceMembers`: the group epoch moves
/// once), or, when every other member speaks the classic protocol and `policy` allows, converts the group back to a classic group without
/// them and starts a rebalance (`convertToClassicGroup`). Returns whether the group was
/// downgraded.
pub(crate) fn fence_or_downgrade(
    group: &mut Group,
    leaving: &[&str],
    policy: MigrationPolicy,
    now: Instant,
) -> bool {
    let Some(cg) = group.consumer.as_deref_mut() else {
        return false;
    };
    let leaving_set: HashSet<&str> = leaving.iter().copied().collect();
    let gone = |id: &str| leaving_set.contains(id);
    // Kafka's `validateOnlineDowngradeWithFencedMembers`: every member left after the leavers
    // uses the classic protocol (`allMembersUseClassicProtocolExcept`).
    let downgrade = policy.downgrade_enabled()
        && cg.members.keys().any(|id| !gone(id))
        && cg
            .members
            .iter()
            .all(|(id, m)| gone(id) || m.classic.is_some());
    if !downgrade {
        // The callers name members of the group: the epoch moves once for them all.
        let epoch = cg.group_epoch;
        for id in leaving {
            cg.fence(id);
        }
        if !leaving.is_empty() {
            cg.group_epoch = super::next_epoch(epoch);
        }
        return false;
    }
    let cg = group.consumer.take().expect("checked above");
    let mut classic = Group::new();
    classic.offsets = std::mem::take(&mut group.offsets);
    classic.generation_id = cg.group_epoch;
    classic.protocol_type = Some("consumer".to_owned());
    for (id, m) in cg.members.iter().filter(|(id, _)| !gone(id)) {
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
        members = ?leaving,
        "consumer group downgraded to a classic group"
    );
    true
}
