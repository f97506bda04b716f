//! CreateTopics (API key 19), versions 2–7.
//!
//! Validates as Kafka's controller does: legal unique name, at least one partition (-1 takes
//! the cluster default), replication factor -1 (the cluster default) or 1..=live brokers,
//! known configs; `validate_only`
//! checks without creating. v5+ answers carry the partition count, replication factor and
//! every config with its source; v7 the topic id.
//!
//! One request is one operation of Kafka's KRaft controller (`ReplicationControlManager
//! .createTopics`): past `QuorumController.MAX_RECORDS_PER_USER_OP` records (one per topic,
//! partition and config of the topics that pass the checks) the whole request is refused
//! with POLICY_VIOLATION, so no topic of more than 9,999 partitions can be created.
//!
//! A manual assignment is checked as Kafka's controller does (`ReplicationControlManager
//! .createTopic`): each partition once, indexes 0..n, every replica list non-empty, of known
//! brokers named once, all of the same length (INVALID_REPLICA_ASSIGNMENT). A name given twice
//! is answered once, INVALID_REQUEST (`ControllerApis.createTopics`). A request whose `timeout_ms` is 0 or less
//! is answered REQUEST_TIMED_OUT for every topic that reaches the controller, and changes
//! nothing: Kafka's controller refuses an operation whose deadline (its receipt plus the
//! timeout) has passed when it comes to run it (`QuorumController`), as Kafka 4.4.0 answers
//! (conformance case `create_topics_timeouts`).
//!
//! Deviations from Apache Kafka: a manual replica assignment sets the partition count
//! and the replication factor (that of its first partition), but replicas are placed
//! round-robin as for a count; the cluster's default replication factor is 3 or the broker count
//! if smaller (Kafka's `default.replication.factor` is 1), so that a broker going down fails over.
//! Every `create_topics_*` conformance case answers as Kafka 4.4.0 does.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::{named_twice, str_bytes, Ctx};
use crate::state::topics::TOPIC_CONFIG_DEFAULTS;
use crate::state::{
    check_manual_assignment, creation_records, too_many_records, ClusterState, CreateTopicError,
    MAX_RECORDS_PER_USER_OP,
};

/// Versions implemented.
pub const VERSIONS: VersionRange = CreateTopicsRequest::VERSIONS;

/// Config source DEFAULT_CONFIG in DescribeConfigs and CreateTopics answers.
pub const SOURCE_DEFAULT: i8 = 5;
/// Config source TOPIC_CONFIG (a per-topic override).
pub const SOURCE_TOPIC: i8 = 1;

/// Creates (or, with `validate_only`, checks) each topic, as one operation of Kafka's
/// controller: when the topics that pass the checks would write more than
/// [`MAX_RECORDS_PER_USER_OP`] records, none is created and every topic of the request is
/// answered POLICY_VIOLATION (`ReplicationControlManager.createTopics` fills a `BoundedList`,
/// whose overflow `EventHandlerExceptionInfo` turns into POLICY_VIOLATION, and
/// `CreateTopicsRequest.getErrorResponse` gives that error to every topic), `validate_only` or
/// not.
pub fn handle(
    ctx: &Ctx<'_>,
    mut request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let duplicates = named_twice(request.topics.iter().map(|t| t.name.0.as_str()));
    // A name given twice is answered once (Kafka's `ControllerApis.createTopics`).
    let mut seen = std::collections::HashSet::new();
    request.topics.retain(|t| seen.insert(t.name.0.clone()));
    let mut state = ctx.shared.state();
    let plans: Vec<Result<Plan, CreateTopicError>> = request
        .topics
        .iter()
        .map(|t| {
            if duplicates.contains(t.name.0.as_str()) {
                return Err(CreateTopicError {
                    error: ResponseError::InvalidRequest,
                    message: "Duplicate topic name.".into(),
                });
            }
            if request.timeout_ms <= 0 {
                return Err(CreateTopicError {
                    error: ResponseError::RequestTimedOut,
                    message: format!("the deadline of {} ms had passed", request.timeout_ms),
                });
            }
            plan(ctx, &state, t)
        })
        .collect();
    let records = plans
        .iter()
        .flatten()
        .map(|p| creation_records(p.partitions, p.configs.len()))
        .fold(0usize, usize::saturating_add);
    if records > MAX_RECORDS_PER_USER_OP {
        let e = too_many_records();
        let topics = request
            .topics
            .into_iter()
            .map(|t| failed(t.name, e.error, e.message.clone()))
            .collect();
        return CreateTopicsResponse::default().with_topics(topics);
    }
    let topics = request
        .topics
        .into_iter()
        .zip(plans)
        .map(|(t, plan)| {
            let name = t.name.clone();
            match plan.and_then(|p| create(&mut state, t, p, request.validate_only)) {
                // Partition count, replication factor and configs are answered from v5.
                Ok(result) if version < 5 => CreatableTopicResult::default()
                    .with_name(result.name)
                    .with_topic_id(result.topic_id),
                Ok(result) => result,
                Err(e) => failed(name, e.error, e.message),
            }
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

/// A topic that passed the checks: what creating it takes.
struct Plan {
    partitions: i32,
    replication_factor: Option<i32>,
    configs: BTreeMap<String, String>,
}

fn plan(ctx: &Ctx<'_>, state: &ClusterState, t: &CreatableTopic) -> Result<Plan, CreateTopicError> {
    let fail = |error, message: String| Err(CreateTopicError { error, message });
    let name = t.name.0.as_str();
    if let Some(c) = t.configs.iter().find(|c| c.value.is_none()) {
        return fail(
            ResponseError::InvalidConfig,
            format!(
                "null value not supported for topic config {:?}",
                c.name.as_str()
            ),
        );
    }
    let configs: BTreeMap<String, String> = t
        .configs
        .iter()
        .filter_map(|c| {
            Some((
                c.name.as_str().to_owned(),
                c.value.as_ref()?.as_str().to_owned(),
            ))
        })
        .collect();
    // Kafka's order: name, existence and configs before partitions and replicas.
    state.check_name_and_configs(name, &configs)?;
    if !t.assignments.is_empty() && (t.num_partitions != -1 || t.replication_factor != -1) {
        return fail(
            ResponseError::InvalidRequest,
            "both a replica assignment and a partition count or replication factor were given"
                .into(),
        );
    }
    // Kafka's `ReplicationControlManager.createTopic`: each partition once, each replica list
    // valid and as long as the first, the indexes 0..n.
    let mut indexes = std::collections::BTreeSet::new();
    let mut first_length = None;
    for a in &t.assignments {
        if !indexes.insert(a.partition_index) {
            return fail(
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "Found multiple manual partition assignments for partition {}",
                    a.partition_index
                ),
            );
        }
        let replicas: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
        check_manual_assignment(&state.nodes, &state.down, &replicas, first_length)?;
        first_length = Some(replicas.len());
    }
    if !indexes.iter().copied().eq(0..indexes.len() as i32) {
        return fail(
            ResponseError::InvalidReplicaAssignment,
            "partitions should be a consecutive 0-based integer sequence".into(),
        );
    }
    let partitions = match (t.assignments.len(), t.num_partitions) {
        (0, -1) => ctx.shared.config.default_partitions,
        (0, n) => n,
        (n, _) => i32::try_from(n).unwrap_or(i32::MAX),
    };
    let replication_factor = match (t.assignments.first(), t.replication_factor) {
        (Some(a), _) => Some(a.broker_ids.len() as i32),
        (None, -1) => None,
        (None, rf) => Some(i32::from(rf)),
    };
    state.check_new_topic(name, partitions, replication_factor, &configs)?;
    Ok(Plan {
        partitions,
        replication_factor,
        configs,
    })
}

fn create(
    state: &mut ClusterState,
    t: CreatableTopic,
    plan: Plan,
    validate_only: bool,
) -> Result<CreatableTopicResult, CreateTopicError> {
    let name = t.name.0.as_str();
    let Plan {
        partitions,
        replication_factor,
        configs,
    } = plan;
    let (id, replication_factor) = if validate_only {
        let rf = state.check_new_topic(name, partitions, replication_factor, &configs)?;
        (uuid::Uuid::nil(), rf)
    } else {
        let topic = state.create_topic(name, partitions, replication_factor, configs.clone())?;
        (topic.id, topic.replication_factor)
    };
    Ok(CreatableTopicResult::default()
        .with_name(t.name)
        .with_topic_id(id)
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor as i16)
        .with_configs(Some(describe(&configs))))
}

fn describe(overrides: &BTreeMap<String, String>) -> Vec<CreatableTopicConfigs> {
    TOPIC_CONFIG_DEFAULTS
        .iter()
        .map(|(name, default)| {
            let (value, source) = match overrides.get(*name) {
                Some(v) => (v.as_str(), SOURCE_TOPIC),
                None => (*default, SOURCE_DEFAULT),
            };
            CreatableTopicConfigs::default()
                .with_name(str_bytes(name))
                .with_value(Some(str_bytes(value)))
                .with_config_source(source)
        })
        .collect()
}

fn failed(
    name: kafka_protocol::messages::TopicName,
    error: ResponseError,
    message: String,
) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(name)
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}
