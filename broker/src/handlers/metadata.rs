//! Metadata (API key 3), versions 0–13.
//!
//! The live brokers, the controller (the first live broker) and, per topic, partitions with
//! leader, leader epoch, replicas, ISR and offline replicas (those on brokers down); an
//! offline partition answers LEADER_NOT_AVAILABLE with leader -1, as Kafka's `MetadataCache`
//! does ([`crate::state::failover`]). Unknown topics are created when the cluster allows it (Kafka's
//! `auto.create.topics.enable`) and the request does (`allow_auto_topic_creation`, always true
//! before v4), with the cluster's default partition count and replication factor. As Kafka's
//! `AutoTopicCreationManager` (KRaft) asks the controller to create all of a request's unknown
//! topics in one CreateTopics, which `ReplicationControlManager` refuses as a whole when it
//! would write more than `QuorumController.MAX_RECORDS_PER_USER_OP` (10,000) records (one per
//! topic and one per partition): then none is created and each stays UNKNOWN_TOPIC_OR_PARTITION
//! (INVALID_TOPIC_EXCEPTION for an illegal name, checked before the controller is asked).
//! A request naming any topic id (v12+) is answered by ids alone, names ignored; at v10–11 a
//! topic id or a null name is INVALID_REQUEST for every requested topic, as Kafka answers.
//!
//! Deviations from Apache Kafka: an auto-created topic is returned ready in the same answer,
//! where Kafka first answers LEADER_NOT_AVAILABLE until the new topic has a leader; kmock's own
//! `__consumer_offsets` (its group coordinators) is not listed, where Kafka lists the topic once
//! its first FindCoordinator has created it. A `__consumer_offsets` (or other internal topic)
//! created by CreateTopics is listed as internal, as Kafka does.

use std::collections::{BTreeSet, HashSet};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::{advertised, str_bytes, topic_name, Ctx};
use crate::state::topics::{is_internal, validate_name, Topic};
use crate::state::{creation_records, ClusterState, MAX_RECORDS_PER_USER_OP};

/// Versions implemented.
pub const VERSIONS: VersionRange = MetadataRequest::VERSIONS;

const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Answers with the brokers and the requested topics (all of them when `topics` is null, or
/// empty in v0), creating unknown ones if allowed.
pub fn handle(ctx: &Ctx<'_>, request: MetadataRequest, version: i16) -> MetadataResponse {
    if let Some(refused) = ids_before_v12(&request, version) {
        return refused;
    }
    let shared = ctx.shared;
    let allow_create =
        shared.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    let mut state = shared.state();
    let down = state.down.clone();
    let topic_metadata = |topic: &Topic| topic_metadata(topic, &down);
    let topics = match request.topics {
        None => state.topics.values().map(topic_metadata).collect(),
        Some(ref t) if t.is_empty() && version == 0 => {
            state.topics.values().map(topic_metadata).collect()
        }
        // Any topic id (v12+, not the zero id) makes the request one by ids, as Kafka's
        // `KafkaApis.handleTopicMetadataRequest`: names are ignored, zero ids and duplicates
        // dropped, and an unknown id answered UNKNOWN_TOPIC_ID without a name.
        Some(ref requested) if requested.iter().any(|t| !t.topic_id.is_nil()) => {
            let ids: BTreeSet<_> = requested
                .iter()
                .map(|t| t.topic_id)
                .filter(|id| !id.is_nil())
                .collect();
            ids.into_iter()
                .map(|id| match state.topic_by_id(id) {
                    Some(topic) => topic_metadata(topic),
                    None => topic_error(None, ResponseError::UnknownTopicId).with_topic_id(id),
                })
                .collect()
        }
        Some(requested) => {
            let partitions = shared.config.default_partitions;
            let create = allow_create && creation_fits(&state, &requested, partitions);
            requested
                .into_iter()
                .map(|t| match t.name {
                    Some(name) => {
                        let name = name.as_str();
                        if let Some(topic) = state.topics.get(name) {
                            return topic_metadata(topic);
                        }
                        if !allow_create {
                            // Kafka's `KafkaApis.getTopicMetadata`: the name checked first.
                            let error = match validate_name(name) {
                                Ok(()) => ResponseError::UnknownTopicOrPartition,
                                Err(_) => ResponseError::InvalidTopicException,
                            };
                            return topic_error(Some(name), error);
                        }
                        if !create {
                            // Kafka's controller refused the whole batch (POLICY_VIOLATION behind
                            // the answer), so the topic is still unknown, valid name or not
                            // checked first as `AutoTopicCreationManager` does.
                            let error = match validate_name(name) {
                                Ok(()) => ResponseError::UnknownTopicOrPartition,
                                Err(_) => ResponseError::InvalidTopicException,
                            };
                            return topic_error(Some(name), error);
                        }
                        match state.create_topic(name, partitions, None, Default::default()) {
                            Ok(topic) => topic_metadata(topic),
                            // Kafka's controller refuses the creation behind the answer; the
                            // client sees the topic still unknown (AutoTopicCreationManager, KRaft).
                            Err(e) if e.error == ResponseError::InvalidReplicationFactor => {
                                topic_error(Some(name), ResponseError::UnknownTopicOrPartition)
                            }
                            Err(e) => topic_error(Some(name), e.error),
                        }
                    }
                    None => match state.topic_by_id(t.topic_id) {
                        Some(topic) => topic_metadata(topic),
                        None => topic_error(None, ResponseError::UnknownTopicId)
                            .with_topic_id(t.topic_id),
                    },
                })
                .collect()
        }
    };
    drop(state);
    cluster_metadata(ctx, &down).with_topics(topics)
}

/// Whether creating every unknown topic `requested` names that Kafka's controller would create
/// (each name once) stays within one user operation's [`MAX_RECORDS_PER_USER_OP`]:
/// `AutoTopicCreationManager` sends them all in one CreateTopics, which the controller refuses
/// as a whole past the bound.
fn creation_fits(
    state: &ClusterState,
    requested: &[MetadataRequestTopic],
    partitions: i32,
) -> bool {
    let mut seen = HashSet::new();
    let mut records = 0;
    for name in requested.iter().filter_map(|t| t.name.as_ref()) {
        let name = name.as_str();
        if state.topics.contains_key(name) || !seen.insert(name) {
            continue;
        }
        if state
            .check_new_topic(name, partitions, None, &Default::default())
            .is_ok()
        {
            records += creation_records(partitions, 0);
            if records > MAX_RECORDS_PER_USER_OP {
                return false;
            }
        }
    }
    true
}

/// A Metadata answer with the cluster's part only: the live brokers (all but `down`), the
/// cluster id and the controller (the first live broker); no topics.
pub fn cluster_metadata(ctx: &Ctx<'_>, down: &BTreeSet<i32>) -> MetadataResponse {
    let shared = ctx.shared;
    let live = shared.brokers.iter().filter(|b| !down.contains(&b.node_id));
    let controller = live.clone().next().map_or(-1, |b| b.node_id);
    let brokers = live
        .map(|b| {
            let (host, port) = advertised(b);
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(host)
                .with_port(port)
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(str_bytes(&shared.config.cluster_id)))
        .with_controller_id(BrokerId(controller))
        .with_cluster_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

fn topic_metadata(topic: &Topic, down: &BTreeSet<i32>) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(index, p)| {
            let offline = p
                .replicas
                .iter()
                .filter(|r| down.contains(r))
                .map(|&r| BrokerId(r))
                .collect();
            let isr = p.isr.iter().map(|&r| BrokerId(r)).collect();
            let error = if p.leader == -1 {
                ResponseError::LeaderNotAvailable.code()
            } else {
                0
            };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(index as i32)
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(p.replicas.iter().map(|&r| BrokerId(r)).collect())
                .with_isr_nodes(isr)
                .with_offline_replicas(offline)
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(topic.id)
        .with_is_internal(is_internal(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

/// Versions 10 and 11 carry a topic id and a nullable name, but Kafka answers only names
/// there: a topic id or a null name is an `InvalidRequestException` in
/// `KafkaApis.handleTopicMetadataRequest`, answered by `MetadataRequest.getErrorResponse`
/// (every requested topic INVALID_REQUEST with its name, `""` for null, and its id; no
/// brokers).
fn ids_before_v12(request: &MetadataRequest, version: i16) -> Option<MetadataResponse> {
    let topics = request.topics.as_ref()?;
    let by_id = topics
        .iter()
        .any(|t| t.name.is_none() || !t.topic_id.is_nil());
    (version < 12 && by_id).then(|| {
        MetadataResponse::default().with_topics(
            topics
                .iter()
                .map(|t| {
                    topic_error(
                        Some(t.name.as_ref().map_or("", |n| n.as_str())),
                        ResponseError::InvalidRequest,
                    )
                    .with_topic_id(t.topic_id)
                })
                .collect(),
        )
    })
}

fn topic_error(name: Option<&str>, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(name.map(topic_name))
        .with_error_code(error.code())
        .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}
