//! OffsetCommit (API key 8), versions 2–9.
//!
//! As Kafka's `KafkaApis.handleOffsetCommitRequest` and `GroupCoordinator.handleCommitOffsets`:
//! partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; the rest are checked against
//! the group ([`crate::state::groups::Groups::check_commit`]: UNKNOWN_MEMBER_ID,
//! FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, GROUP_ID_NOT_FOUND from v9;
//! a commit with generation -1 from outside any group is stored while the group is Empty) and
//! metadata over 4096 UTF-16 code units gets OFFSET_METADATA_TOO_LARGE. Offsets are stored as
//! sent: a lower offset than the last commit is accepted, as Kafka accepts it (the ordering
//! checks are where kmock says so). REBALANCE_IN_PROGRESS only while the group is
//! CompletingRebalance: while it is PreparingRebalance a member's commit at the current
//! generation is stored, also after that member's own JoinGroup, as Kafka's
//! `ClassicGroup.validateOffsetCommit` (4.x) and `GroupCoordinator.doCommitOffsets` (3.x) store
//! it (`commit-for-unassigned-partition` names it when the group rebalances eagerly).
//! NOT_COORDINATOR on any broker but the group's coordinator.
//!
//! A KIP-848 consumer group checks the member epoch as Kafka 4.4's
//! `ConsumerGroup.validateOffsetCommit`: epoch -1 from outside the group while it has no
//! members; else UNKNOWN_MEMBER_ID for a member id that is not a member, UNSUPPORTED_VERSION
//! below v9, STALE_MEMBER_EPOCH for an epoch above the member's; the member's own epoch is
//! accepted for any partition; an older epoch only for partitions the member owns (assigned or
//! pending revocation) since that epoch or before (KIP-1251's assignment epochs), and one
//! partition failing fails the whole request with STALE_MEMBER_EPOCH, as Kafka's exception does.
//!
//! A commit to a partition of `__consumer_offsets` is stored, as Kafka stores it (conformance
//! case `offset_commit_to_the_offsets_topic`).
//!
//! The answer is in Kafka's order ([`kafka_order`], `OffsetCommitResponse.Builder`): first
//! the partitions refused before the group is asked (unknown topics and partitions), one topic
//! entry per name, in request order; then the group's answers, one entry per request entry
//! when nothing was refused, else merged into the entry of their name (conformance case
//! `offset_commit_answer_order`). An unknown topic named with no partition keeps an empty
//! entry (Kafka 4.4.0 answers `[x [], a [0]]` with `x [] | a [0 NONE]`); a known one does not.
//!
//! Deviations from Apache Kafka: `retention_time_ms` (v2–4) is ignored; offsets never expire.

use std::collections::HashMap;

use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicName};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::offset_answers::{answer_commits, partition_exists};
use super::Ctx;
use crate::state::groups::consumer::ConsumerGroup;
use crate::state::ClusterState;

/// Versions implemented.
pub const VERSIONS: VersionRange = OffsetCommitRequest::VERSIONS;

/// Stores each partition's offset, or answers why not.
pub fn handle(ctx: &Ctx<'_>, request: OffsetCommitRequest, version: i16) -> OffsetCommitResponse {
    let group_id = request.group_id.0.as_str();
    let mut state = ctx.shared.state();
    // Partitions of unknown topics are answered before the group is consulted; with none
    // left, the coordinator is not asked at all (Kafka's KafkaApis.handleOffsetCommitRequest).
    let any_valid = request.topics.iter().any(|t| {
        t.partitions
            .iter()
            .any(|p| partition_exists(&state, t.name.0.as_str(), p.partition_index))
    });
    let group = if !any_valid {
        Err(ResponseError::UnknownTopicOrPartition)
    } else if !ctx.coordinates_group(&state, group_id) {
        Err(ResponseError::NotCoordinator)
    } else if let Some(cg) = state
        .groups
        .get(group_id)
        .and_then(|g| g.consumer.as_deref())
    {
        consumer_check(&state, cg, &request, version)
    } else {
        let ClusterState { groups, .. } = &mut *state;
        groups
            .check_commit(
                group_id,
                request.generation_id_or_member_epoch,
                request.member_id.as_str(),
                request.group_instance_id.as_ref().map(StrBytes::as_str),
                version,
            )
            .map(|_| ())
    };
    let (topics, accepted) = answer_commits(&state, &request.topics, group);
    let topics = kafka_order(&state, &request.topics, topics);
    if let Some(group) = state.groups.get_mut(group_id).filter(|_| group.is_ok()) {
        group.offsets.extend(accepted);
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// `answers` (one per request entry of `topics`, partitions in request order) in the order
/// Kafka's `KafkaApis.handleOffsetCommitRequest` builds them: the partitions that do not exist,
/// each under the first entry of its topic's name; then, if there were none, the group's
/// answers as they are, else each merged into the entry of its name (a new name appended).
fn kafka_order(
    state: &ClusterState,
    topics: &[OffsetCommitRequestTopic],
    answers: Vec<OffsetCommitResponseTopic>,
) -> Vec<OffsetCommitResponseTopic> {
    // The common case, every entry naming partitions that all exist: nothing is refused and
    // no entry is dropped, so the group's answers go as they are, not rebuilt.
    let all_exist = topics.iter().all(|t| {
        !t.partitions.is_empty()
            && t.partitions
                .iter()
                .all(|p| partition_exists(state, t.name.0.as_str(), p.partition_index))
    });
    if all_exist {
        return answers;
    }
    let mut refused = ByName::default();
    let mut asked: Vec<OffsetCommitResponseTopic> = Vec::new();
    for (t, answer) in topics.iter().zip(answers) {
        let (mut missing, mut known) = (Vec::new(), Vec::new());
        for (p, a) in t.partitions.iter().zip(answer.partitions) {
            if partition_exists(state, t.name.0.as_str(), p.partition_index) {
                known.push(a);
            } else {
                missing.push(a);
            }
        }
        // An unknown topic keeps its entry even with no partition (Kafka's `addPartitions`
        // creates it); a known one with none has no entry.
        if !missing.is_empty() || !state.topics.contains_key(t.name.0.as_str()) {
            refused.merge(&answer.name, missing);
        }
        if !known.is_empty() {
            asked.push(
                OffsetCommitResponseTopic::default()
                    .with_name(answer.name)
                    .with_partitions(known),
            );
        }
    }
    if refused.topics.is_empty() {
        return asked;
    }
    for t in asked {
        refused.merge(&t.name, t.partitions);
    }
    refused.topics
}

/// Topic entries, one per name (Kafka's `OffsetCommitResponse.Builder`), indexed by name so a
/// request of many topics is merged in linear time.
#[derive(Default)]
struct ByName {
    topics: Vec<OffsetCommitResponseTopic>,
    at: HashMap<TopicName, usize>,
}

impl ByName {
    /// Appends `partitions` to the entry of topic `name`, or to a new entry at the end.
    fn merge(&mut self, name: &TopicName, partitions: Vec<OffsetCommitResponsePartition>) {
        match self.at.get(name) {
            Some(&i) => self.topics[i].partitions.extend(partitions),
            None => {
                self.at.insert(name.clone(), self.topics.len());
                self.topics.push(
                    OffsetCommitResponseTopic::default()
                        .with_name(name.clone())
                        .with_partitions(partitions),
                );
            }
        }
    }
}

/// The consumer group's answer for every partition of the request (see the header).
fn consumer_check(
    state: &ClusterState,
    cg: &ConsumerGroup,
    request: &OffsetCommitRequest,
    version: i16,
) -> Result<(), ResponseError> {
    let epoch = request.generation_id_or_member_epoch;
    let member = cg.check_commit(
        request.member_id.as_str(),
        request.group_instance_id.as_ref().map(StrBytes::as_str),
        epoch,
        false,
        version,
    )?;
    let Some(member) = member else {
        return Ok(());
    };
    for t in &request.topics {
        let Some(topic) = state.topics.get(t.name.0.as_str()) else {
            continue;
        };
        // A partition the topic does not have is answered UNKNOWN_TOPIC_OR_PARTITION before
        // the coordinator sees the commit (Kafka's `KafkaApis`), so it cannot fail the rest.
        let known = |p: i32| usize::try_from(p).is_ok_and(|p| p < topic.partitions.len());
        for p in t.partitions.iter().filter(|p| known(p.partition_index)) {
            ConsumerGroup::check_commit_partition(member, epoch, topic.id, p.partition_index)?;
        }
    }
    Ok(())
}
