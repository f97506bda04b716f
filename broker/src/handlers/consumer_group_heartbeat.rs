//! ConsumerGroupHeartbeat (API key 68), versions 0–1: the KIP-848 consumer group protocol.
//!
//! As Kafka 4.4's `GroupCoordinatorService.consumerGroupHeartbeat` and
//! `GroupMetadataManager.consumerGroupHeartbeat` ([`crate::state::groups::consumer`]): the
//! request is validated first (INVALID_REQUEST with Kafka's message: member id required from
//! v1 and for epochs above 0 or -1 — v0 joins with an empty id and gets one —, non-empty group,
//! instance and rack ids, a first heartbeat with a rebalance timeout, an empty owned list and
//! a subscription, epoch -2 only with an instance id, no epoch below -2; UNSUPPORTED_ASSIGNOR
//! for an assignor other than `uniform` and `range`); NOT_COORDINATOR on any broker but the
//! group's coordinator. Then: epoch 0 joins (creating the group, replacing an empty classic
//! one, or upgrading a live classic group of protocol type `consumer` when
//! `group.consumer.migration.policy` allows: KIP-848's online migration,
//! [`crate::state::groups::consumer::classic`], journaled as a `GroupConverted` entry), -1 leaves
//! (downgrading the group when the leaving member was its last consumer-protocol member among
//! classic ones), -2 leaves for now (static members); GROUP_ID_NOT_FOUND for a group that does
//! not exist, a classic group at an epoch above 0, or one that is not upgraded (with Kafka's
//! message naming why), GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID,
//! FENCED_MEMBER_EPOCH (an epoch above the member's, or below it unless it is the previous
//! one with owned partitions within the assignment), UNRELEASED_INSTANCE_ID (a static member
//! joining while its instance id is still held), FENCED_INSTANCE_ID. The answer carries the
//! assignment when it changed or the request was a full one. Errors carry Kafka's message.
//! A new group starts at group epoch 1 (its first member joins at 2) and a new target is
//! computed at most once per `group.consumer.assignment.interval.ms` (1 s), as in Kafka 4.4;
//! a coordinator move or a broker down keeps the group whole (Kafka stores every change),
//! each member's session starting again. The conformance cases `consumer_group_*` hold these
//! answers against Kafka 4.4.0.
//!
//! Emulating a Kafka before 4.0 ([`crate::KafkaVersion`]): UNSUPPORTED_VERSION with nothing
//! else, as Kafka 3.7-3.9's `KafkaApis` answers while the consumer protocol is off (their
//! default); 3.6 and older do not list the API, so its requests close the connection.
//!
//! A subscription by regular expression (`subscribed_topic_regex`, KIP-848's server-side regex;
//! an empty one, which librdkafka sends beside its topic names, means none) is resolved against
//! the cluster's topics as Kafka 4.4 resolves it ([`crate::state::groups::consumer::regex`]): a
//! regex no member had yet that does not compile is INVALID_REGULAR_EXPRESSION, and topics
//! created later join within Kafka's 10 s batch interval.
//!
//! Deviations from Apache Kafka: a regex resolution computed on a heartbeat is applied on the
//! group's next heartbeat (Kafka applies it when its background resolution completes, usually
//! before that heartbeat, though a heartbeat may come first); regexes are read with the `regex`
//! crate, not RE2/J (differences in [`crate::state::groups::consumer::regex`]), and kmock refuses a
//! pattern over 32 KiB or compiling past 256 KiB (the crate's `size_limit`) with
//! INVALID_REGULAR_EXPRESSION, saying which limit (stricter than Kafka, which has no such limit:
//! the regex is compiled before the cluster's state lock is taken, and the limits bound that work
//! and what each group keeps); regexes are resolved without
//! `group.consumer.regex.refresh.interval.ms` (resolved again every 10 s while some heartbeat
//! comes, not only after new topics or 10 minutes: the result is the same) and without ACLs (Kafka
//! drops the topics a member may not describe); the upgrade's refusal of a custom classic assignor (Kafka 4.4's
//! "unsupported custom assignor" message) is not made; a classic group still in its first
//! rebalance (no protocol chosen yet) is refused as malformed ("… because the embedded consumer
//! protocol is malformed."), where Kafka fails otherwise (unverified); the
//! rack id does not change the assignment (Kafka's assignors prefer same-rack partitions only when
//! partitions have racks, which kmock's replicas do not); the `uniform` and `range` assignors reach
//! Kafka's balance and stickiness, not always its exact partition choices
//! ([`crate::state::groups::consumer::assignors`]).

use std::collections::BTreeMap;

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::{str_bytes, Ctx};
use crate::state::groups::consumer::{HeartbeatRequest, Partitions, TopicIndex};
use crate::state::topics::Topic;

/// Versions implemented.
pub const VERSIONS: VersionRange = ConsumerGroupHeartbeatRequest::VERSIONS;

/// Joins, heartbeats or leaves.
pub fn handle(
    ctx: &Ctx<'_>,
    request: ConsumerGroupHeartbeatRequest,
    version: i16,
) -> ConsumerGroupHeartbeatResponse {
    if ctx.shared.config.kafka_version < crate::KafkaVersion::V4_0 {
        // Kafka 3.7-3.9's KRaft brokers list the API, and answer it so while
        // `group.coordinator.rebalance.protocols` is its default, `classic`.
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let text = |s: &Option<StrBytes>| s.as_ref().map(|s| s.as_str().to_owned());
    let mut req = HeartbeatRequest {
        group_id: request.group_id.0.as_str().to_owned(),
        member_id: request.member_id.as_str().to_owned(),
        member_epoch: request.member_epoch,
        instance_id: text(&request.instance_id),
        rack_id: text(&request.rack_id),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.0.as_str().to_owned()).collect()),
        subscribed_topic_regex: text(&request.subscribed_topic_regex),
        server_assignor: text(&request.server_assignor),
        owned: request.topic_partitions.as_ref().map(|ts| {
            let mut owned = Partitions::new();
            for t in ts {
                owned
                    .entry(t.topic_id)
                    .or_default()
                    .extend(t.partitions.iter().copied());
            }
            owned
        }),
        client_id: ctx.client_id.to_owned(),
        client_host: format!("/{}", ctx.peer.ip()),
        compiled_regex: None,
    };
    // Compiled before the lock: a pattern near the size limits costs milliseconds.
    req.compile_regex();
    let refused = |(e, m): (ResponseError, String)| {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(&m)))
            .with_member_epoch(0)
    };
    let mut state = ctx.shared.state();
    if let Err(r) = req.validate(version, state.groups.consumer_config.assignors) {
        return refused(r);
    }
    if !ctx.coordinates_group(&state, &req.group_id) {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::NotCoordinator.code());
    }
    let result = {
        let state = &mut *state;
        state.groups.consumer_heartbeat(
            req,
            &ClusterTopics(&state.topics),
            tokio::time::Instant::now(),
        )
    };
    let conversions = state.groups.take_conversions();
    drop(state);
    journal_conversions(ctx.shared, ctx.node_id, conversions);
    match result {
        Err(r) => refused(r),
        Ok(answer) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(&answer.member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(answer.heartbeat_interval_ms)
            .with_assignment(answer.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(topic_id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(topic_id)
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
    }
}

/// Journals each group conversion (KIP-848's online migration) as an entry of its own, taken
/// from the state after the lock is released.
pub(crate) fn journal_conversions(
    shared: &crate::shared::Shared,
    coordinator: i32,
    conversions: Vec<crate::state::groups::Conversion>,
) {
    for c in conversions {
        shared.journal.record_operation(
            coordinator,
            crate::journal::ClusterOperation::GroupConverted {
                group_id: c.group_id,
                to: c.to.to_owned(),
                member_id: c.member_id,
            },
        );
    }
}

/// The cluster's topics as the consumer group coordinator looks them up: only the names a
/// heartbeat needs, not a copy of every topic per heartbeat.
pub(crate) struct ClusterTopics<'a>(pub(crate) &'a BTreeMap<String, Topic>);

impl TopicIndex for ClusterTopics<'_> {
    fn topic_count(&self) -> usize {
        self.0.len()
    }
    fn topic(&self, name: &str) -> Option<(uuid::Uuid, i32)> {
        self.0.get(name).map(|t| (t.id, t.partitions.len() as i32))
    }
    fn each_topic(&self, f: &mut dyn FnMut(&str, (uuid::Uuid, i32))) {
        for (name, t) in self.0 {
            f(name, (t.id, t.partitions.len() as i32));
        }
    }
}
