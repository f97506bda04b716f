//! DeleteTopics (API key 20), versions 1–6.
//!
//! Deletes topics by name (v1–5 `topic_names`, v6 `topics` by name or id) with their logs.
//! Committed offsets of a deleted topic are forgotten, as Kafka's group coordinator does. A
//! deleted name can be created again and gets a new topic id. A name given twice gets
//! INVALID_REQUEST and is not deleted (Kafka's `ControllerApis.deleteTopics`).
//!
//! One request is one operation of Kafka's KRaft controller (`ReplicationControlManager
//! .deleteTopics`), bounded by `QuorumController.MAX_RECORDS_PER_USER_OP`: one record per
//! topic deleted, so past 10,000 existing topics each further one is answered
//! UNKNOWN_SERVER_ERROR with no message and kept.
//!
//! Deviations from Apache Kafka: deletion is immediate, where Kafka deletes asynchronously;
//! past the bound kmock keeps the topics that come last in the request, where Kafka's
//! `ControllerApis` hands the controller the topic ids in hash order.
//!
//! Differences the conformance cases show against Kafka 4.4.0 (`kmock_tests::conformance`,
//! recordings in `fixtures/conformance/`): an entry naming both a name and an id deletes the topic,
//! where Kafka answers INVALID_REQUEST; an entry with neither is UNKNOWN_TOPIC_ID, where Kafka
//! answers INVALID_REQUEST (`delete_topics_*` cases).

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::{named_twice, topic_name, Ctx};
use crate::state::MAX_RECORDS_PER_USER_OP;

/// Versions implemented.
pub const VERSIONS: VersionRange = DeleteTopicsRequest::VERSIONS;

/// Deletes each named topic.
pub fn handle(ctx: &Ctx<'_>, request: DeleteTopicsRequest, version: i16) -> DeleteTopicsResponse {
    let targets: Vec<(Option<TopicName>, Uuid)> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| (Some(n), Uuid::nil()))
            .collect()
    };
    let twice = named_twice(
        targets
            .iter()
            .filter_map(|(n, _)| n.as_ref())
            .map(|n| n.0.as_str()),
    );
    let mut state = ctx.shared.state();
    let mut records = 0usize;
    let responses = targets
        .into_iter()
        .map(|(name, id)| {
            if name.as_ref().is_some_and(|n| twice.contains(n.0.as_str())) {
                return DeletableTopicResult::default()
                    .with_name(name)
                    .with_topic_id(id)
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_static_str("Duplicate topic name.")));
            }
            let found = match &name {
                Some(n) => state
                    .topics
                    .get(n.0.as_str())
                    .map(|t| (t.name.clone(), t.id)),
                None => state.topic_by_id(id).map(|t| (t.name.clone(), t.id)),
            };
            match found {
                Some((found_name, found_id)) if records == MAX_RECORDS_PER_USER_OP => {
                    DeletableTopicResult::default()
                        .with_name(Some(topic_name(&found_name)))
                        .with_topic_id(found_id)
                        .with_error_code(ResponseError::UnknownServerError.code())
                }
                Some((found_name, found_id)) => {
                    records += 1;
                    state.remove_topic(&found_name);
                    state.groups.forget_topic(&found_name);
                    tracing::debug!(topic = found_name, "topic deleted");
                    DeletableTopicResult::default()
                        .with_name(Some(topic_name(&found_name)))
                        .with_topic_id(found_id)
                }
                None => {
                    let error = if name.is_some() {
                        ResponseError::UnknownTopicOrPartition
                    } else {
                        ResponseError::UnknownTopicId
                    };
                    DeletableTopicResult::default()
                        .with_name(name)
                        .with_topic_id(id)
                        .with_error_code(error.code())
                        .with_error_message(Some(StrBytes::from_string(error.to_string())))
                }
            }
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}
