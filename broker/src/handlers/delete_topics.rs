//! DeleteTopics (API key 20), versions 1–6.
//!
//! Deletes topics by name (v1–5 `topic_names`, v6 `topics` by name or id) with their logs.
//! Committed offsets of a deleted topic are forgotten, as Kafka's group coordinator does. A
//! deleted name can be created again and gets a new topic id. As Kafka's
//! `ControllerApis.deleteTopics`: a name (or an id) given twice gets one INVALID_REQUEST answer
//! and is not deleted; an entry naming both a name and an id, or neither, gets INVALID_REQUEST. A request whose `timeout_ms` is 0 or less
//! is answered REQUEST_TIMED_OUT for every entry that reaches the controller, and changes
//! nothing: Kafka's controller refuses an operation whose deadline (its receipt plus the
//! timeout) has passed when it comes to run it (`QuorumController`), as Kafka 4.4.0 answers
//! (conformance case `create_partitions_and_delete_topics_timeouts`).
//!
//! One request is one operation of Kafka's KRaft controller (`ReplicationControlManager
//! .deleteTopics`), bounded by `QuorumController.MAX_RECORDS_PER_USER_OP`: one record per
//! topic deleted, so past 10,000 existing topics each further one is answered
//! UNKNOWN_SERVER_ERROR with no message and kept.
//!
//! Deviations from Apache Kafka: deletion is immediate, where Kafka deletes asynchronously;
//! past the bound kmock keeps the topics that come last in the request, where Kafka's
//! `ControllerApis` hands the controller the topic ids in hash order.

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
    let timeout_ms = request.timeout_ms;
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
    // Kafka's `ControllerApis.deleteTopics`: an entry with neither a name nor an id, or with
    // both, is refused on its own; a name (or an id) given twice is refused once and not
    // deleted.
    let twice_named = named_twice(
        targets
            .iter()
            .filter(|(n, id)| n.is_some() && id.is_nil())
            .filter_map(|(n, _)| n.as_ref())
            .map(|n| n.0.as_str()),
    );
    let mut id_counts = std::collections::HashMap::<Uuid, usize>::new();
    for (_, id) in targets.iter().filter(|(n, id)| n.is_none() && !id.is_nil()) {
        *id_counts.entry(*id).or_default() += 1;
    }
    let mut answered_twice = std::collections::HashSet::new();
    let mut state = ctx.shared.state();
    let mut records = 0usize;
    let responses = targets
        .into_iter()
        .filter_map(|(name, id)| {
            let refused = |name, id, message: &'static str| {
                Some(
                    DeletableTopicResult::default()
                        .with_name(name)
                        .with_topic_id(id)
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(StrBytes::from_static_str(message))),
                )
            };
            match &name {
                None if id.is_nil() => {
                    return refused(None, id, "Neither topic name nor id were specified.")
                }
                Some(_) if !id.is_nil() => {
                    return refused(
                        name,
                        id,
                        "You may not specify both topic name and topic id.",
                    )
                }
                Some(n) if twice_named.contains(n.0.as_str()) => {
                    // Answered once, at the name's first entry.
                    return if answered_twice.insert(n.0.to_string()) {
                        refused(name, id, "Duplicate topic name.")
                    } else {
                        None
                    };
                }
                None if id_counts.get(&id).is_some_and(|c| *c > 1) => {
                    return if answered_twice.insert(id.to_string()) {
                        refused(None, id, "Duplicate topic id.")
                    } else {
                        None
                    };
                }
                _ => {}
            }
            if timeout_ms <= 0 {
                return Some(
                    DeletableTopicResult::default()
                        .with_name(name)
                        .with_topic_id(id)
                        .with_error_code(ResponseError::RequestTimedOut.code())
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "the deadline of {timeout_ms} ms had passed"
                        )))),
                );
            }
            let found = match &name {
                Some(n) => state
                    .topics
                    .get(n.0.as_str())
                    .map(|t| (t.name.clone(), t.id)),
                None => state.topic_by_id(id).map(|t| (t.name.clone(), t.id)),
            };
            Some(match found {
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
            })
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}
