//! ListPartitionReassignments (API key 46), version 0.
//!
//! Lists the reassignments in progress, as Kafka's controller
//! (`ReplicationControlManager.listPartitionReassignments`): none, as kmock completes every
//! reassignment at once ([`super::alter_partition_reassignments`]); unknown topics and
//! partitions are left out, as Kafka leaves them out. Top-level error NONE.
//!
//! Deviations from Apache Kafka: those of AlterPartitionReassignments.

use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::{Message, VersionRange};

use super::Ctx;

/// Versions implemented.
pub const VERSIONS: VersionRange = ListPartitionReassignmentsRequest::VERSIONS;

/// Lists no reassignment: none is ever in progress.
pub fn handle(
    _ctx: &Ctx<'_>,
    _request: ListPartitionReassignmentsRequest,
    _version: i16,
) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
}
