//! CreatePartitions (API key 37), versions 0–3.
//!
//! Grows a topic to `count` partitions; new partitions' leaders continue the round-robin.
//! A count not above the current one gets INVALID_PARTITIONS, an unknown topic
//! UNKNOWN_TOPIC_OR_PARTITION, a topic named twice one INVALID_REQUEST answer; a manual
//! assignment of the wrong length, or whose replica list is empty, names an unknown broker or
//! one broker twice, or differs from the topic's replication factor, INVALID_REPLICA_ASSIGNMENT
//! (Kafka's `ReplicationControlManager.createPartitions`); `validate_only` checks only.
//!
//! One request is one operation of Kafka's KRaft controller
//! (`ReplicationControlManager.createPartitions`), bounded by `QuorumController
//! .MAX_RECORDS_PER_USER_OP` (10,000): each new partition is one record, added in request
//! order; the topic whose partition would be record 10,001 is answered UNKNOWN_SERVER_ERROR
//! with no message and keeps the partitions added before (the controller commits the records
//! already in its list), and so is every later topic that would add one. More than 10,000
//! topics (not counting those named twice) refuse the whole request with POLICY_VIOLATION,
//! nothing added. `validate_only` answers the same and adds nothing. A request whose
//! `timeout_ms` is 0 or less is answered REQUEST_TIMED_OUT for every topic that reaches the
//! controller, and changes nothing: Kafka's controller refuses an operation whose deadline (its receipt plus the
//! timeout) has passed when it comes to run it (`QuorumController`), as Kafka 4.4.0 answers
//! (conformance case `create_partitions_and_delete_topics_timeouts`).
//!
//! Deviations from Apache Kafka: a manual assignment is checked for its length and broker ids
//! but leaders stay round-robin.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::{named_twice, Ctx};
use crate::state::{check_manual_assignment, too_many_records, MAX_RECORDS_PER_USER_OP};

/// Versions implemented.
pub const VERSIONS: VersionRange = CreatePartitionsRequest::VERSIONS;

/// Grows each topic.
pub fn handle(
    ctx: &Ctx<'_>,
    mut request: CreatePartitionsRequest,
    _version: i16,
) -> CreatePartitionsResponse {
    let duplicates = named_twice(request.topics.iter().map(|t| t.name.0.as_str()));
    // A topic given twice is answered once (Kafka's `ControllerApis.createPartitions`).
    let mut seen = std::collections::HashSet::new();
    request.topics.retain(|t| seen.insert(t.name.0.clone()));
    let sent_to_controller = request
        .topics
        .iter()
        .filter(|t| !duplicates.contains(t.name.0.as_str()))
        .count();
    if sent_to_controller > MAX_RECORDS_PER_USER_OP {
        // The controller's list of results overflows outside its per-topic error handling.
        let e = too_many_records();
        let results = request
            .topics
            .into_iter()
            .map(|t| {
                CreatePartitionsTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(e.error.code())
                    .with_error_message(Some(StrBytes::from_string(e.message.clone())))
            })
            .collect();
        return CreatePartitionsResponse::default().with_results(results);
    }
    let mut records = 0usize;
    let mut state = ctx.shared.state();
    let live = state.live_nodes();
    // The assignment checks read the brokers while the topics are borrowed mutably.
    let (nodes, down) = (state.nodes.clone(), state.down.clone());
    let results = request
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let outcome = if duplicates.contains(name) {
                Err((ResponseError::InvalidRequest, "Duplicate topic name.".to_owned()))
            } else if request.timeout_ms <= 0 {
                Err((ResponseError::RequestTimedOut, format!("the deadline of {} ms had passed", request.timeout_ms)))
            } else {
                match state.topics.get_mut(name) {
                    None => Err((ResponseError::UnknownTopicOrPartition, format!("topic {name:?} does not exist"))),
                    Some(topic) => {
                        let current = topic.partitions.len() as i32;
                        let new = i64::from(t.count) - i64::from(current);
                        let rf = topic.replication_factor;
                        let bad_assignment = t.assignments.as_ref().and_then(|a| {
                            if a.len() as i64 != new {
                                return Some(format!("{} assignments given for {new} new partitions", a.len()));
                            }
                            a.iter().find_map(|x| {
                                let replicas: Vec<i32> = x.broker_ids.iter().map(|b| b.0).collect();
                                check_manual_assignment(&nodes, &down, &replicas, Some(rf)).err().map(|e| e.message)
                            })
                        });
                        if new <= 0 {
                            Err((
                                ResponseError::InvalidPartitions,
                                format!("topic has {current} partitions; the new count {} must be larger", t.count),
                            ))
                        } else if let Some(m) = bad_assignment {
                            Err((ResponseError::InvalidReplicaAssignment, m))
                        } else if topic.replication_factor > live.len() {
                            Err((
                                ResponseError::InvalidReplicationFactor,
                                format!("replication factor {} cannot be reached: {} brokers are up", topic.replication_factor, live.len()),
                            ))
                        } else {
                            let room = MAX_RECORDS_PER_USER_OP - records;
                            let fits = new.min(room as i64) as usize;
                            records += fits;
                            if !request.validate_only {
                                topic.add_partitions(current + fits as i32, &live);
                            }
                            if fits as i64 == new {
                                Ok(())
                            } else {
                                // No message: Kafka leaves UNKNOWN_SERVER_ERROR's out (`ApiError.fromThrowable`).
                                Err((ResponseError::UnknownServerError, String::new()))
                            }
                        }
                    }
                }
            };
            let result = CreatePartitionsTopicResult::default().with_name(t.name);
            match outcome {
                Ok(()) => result,
                Err((error, message)) => result
                    .with_error_code(error.code())
                    .with_error_message((!message.is_empty()).then(|| StrBytes::from_string(message))),
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}
