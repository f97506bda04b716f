//! ElectLeaders (API key 43), versions 0–2.
//!
//! Preferred (0) and unclean (1, from v1) leader elections, as Kafka's controller
//! (`ReplicationControlManager.electLeaders`): per partition, an unknown topic or partition is
//! UNKNOWN_TOPIC_OR_PARTITION; a preferred election where the first replica already leads, or
//! an unclean one where the partition has a leader, ELECTION_NOT_NEEDED; a preferred leader that
//! is down or out of the ISR PREFERRED_LEADER_NOT_AVAILABLE; otherwise the preferred replica
//! leads, with the leader epoch bumped. Null `topic_partitions` elects every partition and
//! answers every topic, leaving out the partitions where no election was needed. The top-level
//! error is NONE. An `election_type` other than 0 and 1 (v1+) elects nothing: INVALID_REQUEST
//! at the top and for every partition named (none answered for a null list), as Kafka 4.4.0
//! answers (`ElectionType.valueOf` refuses it; conformance case
//! `elect_leaders_election_types_no_version_defines`).
//!
//! Deviations from Apache Kafka: an unclean election of an offline partition answers
//! ELIGIBLE_LEADERS_NOT_AVAILABLE, where Kafka would elect a live replica out of the ISR
//! (kmock's ISR of an offline partition keeps its last replica, whose return it waits for);
//! the leader change is not journaled as a cluster operation's is.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::{topic_name, Ctx};
use crate::state::ClusterState;

/// Versions implemented.
pub const VERSIONS: VersionRange = ElectLeadersRequest::VERSIONS;

const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

/// Elects the leaders asked for.
pub fn handle(ctx: &Ctx<'_>, request: ElectLeadersRequest, version: i16) -> ElectLeadersResponse {
    if version >= 1 && ![PREFERRED, UNCLEAN].contains(&request.election_type) {
        return refused(&request);
    }
    let unclean = version >= 1 && request.election_type == UNCLEAN;
    let mut state = ctx.shared.state();
    let now = Instant::now();
    let results = match &request.topic_partitions {
        None => {
            let every: Vec<(String, usize)> = state
                .topics
                .values()
                .map(|t| (t.name.clone(), t.partitions.len()))
                .collect();
            every
                .into_iter()
                .map(|(name, count)| {
                    let partitions = (0..count as i32)
                        .map(|p| (p, elect(&mut state, &name, p, unclean, now)))
                        .filter(|(_, r)| *r != Err(ResponseError::ElectionNotNeeded))
                        .map(|(p, r)| result(p, r))
                        .collect();
                    ReplicaElectionResult::default()
                        .with_topic(topic_name(&name))
                        .with_partition_result(partitions)
                })
                .collect()
        }
        Some(topics) => topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|&p| result(p, elect(&mut state, &t.topic.0, p, unclean, now)))
                    .collect();
                ReplicaElectionResult::default()
                    .with_topic(t.topic.clone())
                    .with_partition_result(partitions)
            })
            .collect(),
    };
    drop(state);
    ctx.shared.data_arrived.notify_waiters();
    ElectLeadersResponse::default().with_replica_election_results(results)
}

/// The answer to an election of a type no version defines: INVALID_REQUEST at the top and for
/// every partition named.
fn refused(request: &ElectLeadersRequest) -> ElectLeadersResponse {
    let invalid = || Err(ResponseError::InvalidRequest);
    let results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            ReplicaElectionResult::default()
                .with_topic(t.topic.clone())
                .with_partition_result(t.partitions.iter().map(|&p| result(p, invalid())).collect())
        })
        .collect();
    ElectLeadersResponse::default()
        .with_error_code(ResponseError::InvalidRequest.code())
        .with_replica_election_results(results)
}

fn result(partition: i32, elected: Result<(), ResponseError>) -> PartitionResult {
    let result = PartitionResult::default().with_partition_id(partition);
    match elected {
        Ok(()) => result,
        Err(error) => result
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(error.to_string()))),
    }
}

fn elect(
    state: &mut ClusterState,
    topic: &str,
    partition: i32,
    unclean: bool,
    now: Instant,
) -> Result<(), ResponseError> {
    let p = state
        .topics
        .get(topic)
        .and_then(|t| t.partition(partition))
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    let preferred = p.replicas.first().copied().unwrap_or(-1);
    if unclean {
        if p.leader != -1 {
            return Err(ResponseError::ElectionNotNeeded);
        }
        let live = p.replicas.iter().copied().find(|r| !state.down.contains(r));
        let elected = live.and_then(|to| state.move_leader(topic, partition, to, now).ok());
        return elected
            .map(drop)
            .ok_or(ResponseError::EligibleLeadersNotAvailable);
    }
    if p.leader == preferred {
        return Err(ResponseError::ElectionNotNeeded);
    }
    state
        .move_leader(topic, partition, preferred, now)
        .map(drop)
        .map_err(|_| ResponseError::PreferredLeaderNotAvailable)
}
