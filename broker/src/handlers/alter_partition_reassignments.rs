//! AlterPartitionReassignments (API key 45), versions 0–1.
//!
//! Moves partitions to new replica lists, as Kafka's controller
//! (`ReplicationControlManager.alterPartitionReassignments`) but completed at once: kmock's
//! followers are never behind, so a reassignment is over as soon as it starts. Per partition:
//! an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; a replica list that is empty,
//! names a broker twice or one that does not exist, or only brokers that are down,
//! INVALID_REPLICA_ASSIGNMENT (Kafka's `validateManualPartitionAssignment`); from v1, a list of
//! another length with `allow_replication_factor_change` false INVALID_REPLICATION_FACTOR; a
//! null list (cancel) NO_REASSIGNMENT_IN_PROGRESS, none ever being in progress. A move sets the
//! replicas and the ISR (the new replicas on live brokers); the leader stays when it is among
//! them, else the first live new replica leads, with the leader epoch bumped.
//!
//! Deviations from Apache Kafka: reassignments complete at once (ListPartitionReassignments
//! never lists one), where Kafka copies the log to the added replicas first.

use std::collections::BTreeSet;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::{check_manual_assignment, ClusterState};

/// Versions implemented.
pub const VERSIONS: VersionRange = AlterPartitionReassignmentsRequest::VERSIONS;

/// Moves each partition to its new replicas.
pub fn handle(
    ctx: &Ctx<'_>,
    request: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    let allow_change = version < 1 || request.allow_replication_factor_change;
    // The replica lists, before the lock; one longer than the brokers repeats a broker or names
    // an unknown one, refused here with Kafka's answer (its sort is the request's size).
    let nodes = ctx.shared.state().nodes.clone();
    let asked: Vec<Vec<Asked>> = request
        .topics
        .iter()
        .map(|t| {
            t.partitions
                .iter()
                .map(|p| {
                    let replicas: Vec<i32> = p.replicas.as_ref()?.iter().map(|b| b.0).collect();
                    if replicas.len() > nodes.len() {
                        if let Err(e) =
                            check_manual_assignment(&nodes, &BTreeSet::new(), &replicas, None)
                        {
                            return Some(Err((e.error, e.message)));
                        }
                    }
                    Some(Ok(replicas))
                })
                .collect()
        })
        .collect();
    let mut state = ctx.shared.state();
    let down = state.down.clone();
    let responses = request
        .topics
        .iter()
        .zip(asked)
        .map(|(t, asked)| {
            let partitions = t
                .partitions
                .iter()
                .zip(asked)
                .map(|(p, replicas)| {
                    let moved = reassign(
                        &mut state,
                        (&nodes, &down),
                        &t.name.0,
                        p.partition_index,
                        replicas,
                        allow_change,
                    );
                    let response = ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    match moved {
                        Ok(()) => response,
                        Err((error, message)) => response
                            .with_error_code(error.code())
                            .with_error_message(Some(StrBytes::from_string(message))),
                    }
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    drop(state);
    ctx.shared.data_arrived.notify_waiters();
    AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(request.allow_replication_factor_change)
        .with_responses(responses)
}

/// A partition's new replica list: none (cancel), or the list or its refusal.
type Asked = Option<Result<Vec<i32>, Refusal>>;

type Refusal = (ResponseError, String);

/// Moves `topic`-`index` to `replicas`; the brokers and those down.
fn reassign(
    state: &mut ClusterState,
    (nodes, down): (&[i32], &BTreeSet<i32>),
    topic: &str,
    index: i32,
    replicas: Asked,
    allow_change: bool,
) -> Result<(), Refusal> {
    let unknown = || {
        (
            ResponseError::UnknownTopicOrPartition,
            format!("Unable to find partition {topic}:{index}."),
        )
    };
    let partition = state
        .topics
        .get_mut(topic)
        .ok_or_else(unknown)?
        .partition_mut(index)
        .ok_or_else(unknown)?;
    let Some(replicas) = replicas else {
        return Err((
            ResponseError::NoReassignmentInProgress,
            format!("No ongoing reassignment for {topic}:{index}."),
        ));
    };
    let replicas = replicas?;
    check_manual_assignment(nodes, down, &replicas, None).map_err(|e| (e.error, e.message))?;
    if !allow_change && replicas.len() != partition.replicas.len() {
        return Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "The replication factor is changed from {} to {} but \
                 allowReplicationFactorChange is false",
                partition.replicas.len(),
                replicas.len()
            ),
        ));
    }
    let live: Vec<i32> = replicas
        .iter()
        .copied()
        .filter(|r| !down.contains(r))
        .collect();
    partition.replicas = replicas;
    partition.isr = live.clone();
    if !live.contains(&partition.leader) {
        partition.set_leader(live[0]);
    }
    tracing::debug!(topic, partition = index, replicas = ?partition.replicas, "reassigned");
    Ok(())
}
