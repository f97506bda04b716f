//! One file per Kafka API, and the registry of what kmock implements.
//!
//! Every handler has the same shape: `VERSIONS` (the range it implements) and
//! `handle(ctx, request, version) -> response`. [`REGISTRY`] lists each handler's range;
//! ApiVersions answers from it and the codec checks versions against it, so what kmock
//! advertises and what it implements never drift apart. Handlers see no socket: they turn a
//! request into state changes and a response.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod api_versions;
mod broker_configs;
mod config_changes;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_topic_partitions;
pub mod describe_transactions;
mod digests;
pub mod elect_leaders;
pub mod end_txn;
pub(crate) mod fault_answers;
pub mod fetch;
pub mod find_coordinator;
pub(crate) mod group_load;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_config_resources;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
mod offset_answers;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod update_features;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::codec::{CodecError, Request};
use crate::shared::Shared;
use crate::state::ClusterState;

pub use digests::Digests;

/// What a handler may see: the cluster, and which broker the request came to.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// The cluster's shared state.
    pub shared: &'a Shared,
    /// Node id of the broker whose listener took the request.
    pub node_id: i32,
    /// The client's address.
    pub peer: std::net::SocketAddr,
    /// The client id of the request being handled.
    pub client_id: &'a str,
    /// Where the Produce handler leaves the record digests of the request it handled, for
    /// the connection to put in its journal entry.
    pub produced: &'a ProducedDigests,
    /// Where Produce and Fetch leave the throttle time a client quota gave the request just
    /// handled, for the connection to mute itself that long after answering.
    pub mute: &'a QuotaMute,
}

/// The throttle time, in ms, a client quota gave the last request handled on a connection
/// (Kafka's `ClientQuotaManager.throttle`), at most `i32::MAX` as the answer's INT32 is: the
/// connection answers at once, with the time as the answer's `throttle_time_ms`, then reads no
/// request from the client until it has passed,
/// as Kafka mutes a throttled channel (KIP-219). A connection handles one request at a time.
#[derive(Debug, Default)]
pub struct QuotaMute(std::sync::atomic::AtomicU32);

impl QuotaMute {
    fn set(&self, ms: u32) {
        self.0.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The throttle time left by the request just handled (0: none), leaving none behind.
    pub fn take(&self) -> u32 {
        self.0.swap(0, std::sync::atomic::Ordering::Relaxed)
    }
}

/// The record digests of each partition's batch of the last Produce request handled on a
/// connection, in request order ([`crate::state::batch::digest`]): the handler computes a
/// compressed batch's in its validation pass and hands over an uncompressed batch's records
/// for the journal to compute theirs when first read ([`crate::state::batch::DeferredDigests`]);
/// the connection moves them into the request's journal entry, whether or not the request is
/// answered. A connection handles one request at a time.
#[derive(Debug, Default)]
pub struct ProducedDigests(std::sync::Mutex<Digests>);

impl ProducedDigests {
    fn set(&self, digests: Digests) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = digests;
    }

    /// The digests left by the request just handled, leaving none behind.
    pub fn take(&self) -> Digests {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Ctx<'_> {
    /// Records `bytes` of the request being handled against the client's `kind` quota
    /// ([`crate::state::quotas::ClientQuotas::record`]; kmock's user is always `ANONYMOUS`)
    /// and gives the throttle time in ms (0 within the quota or without one), leaving it for
    /// the connection to mute itself ([`QuotaMute`]).
    pub fn quota_throttle(&self, kind: crate::state::quotas::Throttle, bytes: usize) -> i32 {
        if !self.client_quotas_set() {
            return 0;
        }
        let now_ms = self.shared.journal.now_us() / 1_000;
        let ms = self.shared.state().client_quotas.record(
            self.node_id,
            kind,
            crate::state::quotas::ANONYMOUS,
            self.client_id,
            bytes,
            now_ms,
        );
        // The answer's `throttle_time_ms` is an INT32: the connection mutes itself for the time
        // it answers, never longer (a raw u32 would mute it for up to 49.7 days).
        let ms = ms.min(i32::MAX as u32);
        if ms > 0 {
            self.mute.set(ms);
        }
        ms as i32
    }

    /// Whether any client quota was ever stored (`Shared::client_quotas_set`):
    /// until then no request needs its size measured or the state lock for quotas.
    pub fn client_quotas_set(&self) -> bool {
        self.shared
            .client_quotas_set
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether this broker coordinates `group_id` (leads its `__consumer_offsets` partition,
    /// as Kafka places it). Takes the locked state, so the answer holds while it is locked.
    pub fn coordinates_group(&self, state: &ClusterState, group_id: &str) -> bool {
        state.group_coordinator(group_id) == self.node_id
    }
}

/// Every API kmock implements, with the versions it implements.
pub const REGISTRY: &[(ApiKey, VersionRange)] = &[
    (ApiKey::Produce, produce::VERSIONS),
    (ApiKey::Fetch, fetch::VERSIONS),
    (ApiKey::ListOffsets, list_offsets::VERSIONS),
    (ApiKey::Metadata, metadata::VERSIONS),
    (ApiKey::OffsetCommit, offset_commit::VERSIONS),
    (ApiKey::OffsetFetch, offset_fetch::VERSIONS),
    (ApiKey::FindCoordinator, find_coordinator::VERSIONS),
    (ApiKey::JoinGroup, join_group::VERSIONS),
    (ApiKey::Heartbeat, heartbeat::VERSIONS),
    (ApiKey::LeaveGroup, leave_group::VERSIONS),
    (ApiKey::SyncGroup, sync_group::VERSIONS),
    (ApiKey::DescribeGroups, describe_groups::VERSIONS),
    (ApiKey::ListGroups, list_groups::VERSIONS),
    (ApiKey::DeleteGroups, delete_groups::VERSIONS),
    (ApiKey::OffsetDelete, offset_delete::VERSIONS),
    (ApiKey::ApiVersions, api_versions::VERSIONS),
    (ApiKey::CreateTopics, create_topics::VERSIONS),
    (ApiKey::DeleteTopics, delete_topics::VERSIONS),
    (ApiKey::InitProducerId, init_producer_id::VERSIONS),
    (
        ApiKey::OffsetForLeaderEpoch,
        offset_for_leader_epoch::VERSIONS,
    ),
    (ApiKey::DescribeConfigs, describe_configs::VERSIONS),
    (ApiKey::CreatePartitions, create_partitions::VERSIONS),
    (ApiKey::DescribeCluster, describe_cluster::VERSIONS),
    (ApiKey::AddPartitionsToTxn, add_partitions_to_txn::VERSIONS),
    (ApiKey::AddOffsetsToTxn, add_offsets_to_txn::VERSIONS),
    (ApiKey::EndTxn, end_txn::VERSIONS),
    (ApiKey::TxnOffsetCommit, txn_offset_commit::VERSIONS),
    (ApiKey::DescribeProducers, describe_producers::VERSIONS),
    (
        ApiKey::DescribeTransactions,
        describe_transactions::VERSIONS,
    ),
    (ApiKey::ListTransactions, list_transactions::VERSIONS),
    (
        ApiKey::ConsumerGroupHeartbeat,
        consumer_group_heartbeat::VERSIONS,
    ),
    (
        ApiKey::ConsumerGroupDescribe,
        consumer_group_describe::VERSIONS,
    ),
    (ApiKey::DeleteRecords, delete_records::VERSIONS),
    (ApiKey::AlterConfigs, alter_configs::VERSIONS),
    (
        ApiKey::IncrementalAlterConfigs,
        incremental_alter_configs::VERSIONS,
    ),
    (
        ApiKey::DescribeTopicPartitions,
        describe_topic_partitions::VERSIONS,
    ),
    (ApiKey::ElectLeaders, elect_leaders::VERSIONS),
    (ApiKey::DescribeLogDirs, describe_log_dirs::VERSIONS),
    (
        ApiKey::AlterPartitionReassignments,
        alter_partition_reassignments::VERSIONS,
    ),
    (
        ApiKey::ListPartitionReassignments,
        list_partition_reassignments::VERSIONS,
    ),
    (
        ApiKey::DescribeClientQuotas,
        describe_client_quotas::VERSIONS,
    ),
    (ApiKey::AlterClientQuotas, alter_client_quotas::VERSIONS),
    (ApiKey::ListConfigResources, list_config_resources::VERSIONS),
    (
        ApiKey::AlterReplicaLogDirs,
        alter_replica_log_dirs::VERSIONS,
    ),
    (ApiKey::UpdateFeatures, update_features::VERSIONS),
];

/// What kmock implements, for the fault rules to refuse a rule that could never fire
/// ([`crate::faults::Rules::new`], [`crate::faults::Rule::check_possible`]): the versions of
/// each API ([`supported_versions`]) and the APIs an `error(code)` action can answer
/// ([`fault_answers::supports_error`]).
pub(crate) const IMPLEMENTED: crate::faults::Implemented = crate::faults::Implemented {
    versions: supported_versions,
    errors: fault_answers::supports_error,
};

/// The versions kmock implements for `api`, `None` if it does not implement it.
pub fn supported_versions(api: ApiKey) -> Option<VersionRange> {
    REGISTRY
        .iter()
        .find(|(key, _)| *key == api)
        .map(|(_, range)| *range)
}

/// The versions of `api` a cluster emulating Kafka `kafka_version` advertises and serves: what
/// kmock implements ([`supported_versions`]) within what that release's broker advertised
/// ([`crate::versions`]); `None` if either lacks the API or the two do not meet. A request
/// outside it closes its connection, as that broker's `SocketServer` does (ApiVersions aside:
/// [`api_versions::unsupported_version_answer`]).
pub fn advertised_versions(
    kafka_version: crate::KafkaVersion,
    api: ApiKey,
) -> Option<VersionRange> {
    let implemented = supported_versions(api)?;
    let release = kafka_version.release()?.advertised(api as i16)?;
    let range = VersionRange {
        min: implemented.min.max(release.min),
        max: implemented.max.min(release.max),
    };
    (range.min <= range.max).then_some(range)
}

/// What the connection does after a request was handled.
#[derive(Debug)]
pub enum Answer {
    /// Send this response.
    Respond(Box<ResponseKind>),
    /// Send nothing: a Produce with acks = 0 that succeeded.
    Nothing,
    /// Close the connection without answering: a Produce with acks = 0 that failed, which is
    /// how Kafka tells such a producer to refresh its metadata. The string says why.
    Close(String),
}

/// Handles one request.
///
/// # Errors
/// [`CodecError::NotImplemented`] if the request is of an API missing here (the codec lets
/// through only registered APIs, so this is a registry that lost its handler).
pub async fn handle(ctx: &Ctx<'_>, request: Request) -> Result<Answer, CodecError> {
    let v = request.version;
    let client_id = request.header.client_id.as_ref().map_or("", |c| c.as_str());
    let ctx = &Ctx { client_id, ..*ctx };
    Ok(Answer::Respond(Box::new(match request.body {
        RequestKind::Produce(r) => return Ok(produce::handle(ctx, r, v).await),
        RequestKind::Fetch(r) => ResponseKind::Fetch(fetch::handle(ctx, r, v).await),
        RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(list_offsets::handle(ctx, r, v)),
        RequestKind::Metadata(r) => ResponseKind::Metadata(metadata::handle(ctx, r, v)),
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(offset_commit::handle(ctx, r, v))
        }
        RequestKind::OffsetFetch(r) => ResponseKind::OffsetFetch(offset_fetch::handle(ctx, r, v)),
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(find_coordinator::handle(ctx, r, v))
        }
        RequestKind::JoinGroup(r) => return Ok(join_group::answer(ctx, r, v).await),
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(heartbeat::handle(ctx, r, v)),
        RequestKind::LeaveGroup(r) => ResponseKind::LeaveGroup(leave_group::handle(ctx, r, v)),
        RequestKind::SyncGroup(r) => ResponseKind::SyncGroup(sync_group::handle(ctx, r, v).await),
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(describe_groups::handle(ctx, r, v))
        }
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(list_groups::handle(ctx, r, v)),
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(offset_delete::handle(ctx, r, v))
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(delete_groups::handle(ctx, r, v))
        }
        RequestKind::ApiVersions(r) => ResponseKind::ApiVersions(api_versions::handle(ctx, r, v)),
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(create_topics::handle(ctx, r, v))
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(delete_topics::handle(ctx, r, v))
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id::handle(ctx, r, v))
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(ctx, r, v))
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(ctx, r, v))
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(create_partitions::handle(ctx, r, v))
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(ctx, r, v))
        }
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(add_partitions_to_txn::handle(ctx, r, v))
        }
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(add_offsets_to_txn::handle(ctx, r, v))
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(end_txn::handle(ctx, r, v)),
        RequestKind::TxnOffsetCommit(r) => {
            ResponseKind::TxnOffsetCommit(txn_offset_commit::handle(ctx, r, v))
        }
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(describe_producers::handle(ctx, r, v))
        }
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(describe_transactions::handle(ctx, r, v))
        }
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(list_transactions::handle(ctx, r, v))
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            ResponseKind::ConsumerGroupHeartbeat(consumer_group_heartbeat::handle(ctx, r, v))
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            ResponseKind::ConsumerGroupDescribe(consumer_group_describe::handle(ctx, r, v))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(ctx, r, v))
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(alter_configs::handle(ctx, r, v))
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(incremental_alter_configs::handle(ctx, r, v))
        }
        RequestKind::DescribeTopicPartitions(r) => {
            ResponseKind::DescribeTopicPartitions(describe_topic_partitions::handle(ctx, r, v))
        }
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(elect_leaders::handle(ctx, r, v))
        }
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(describe_log_dirs::handle(ctx, r, v))
        }
        RequestKind::AlterPartitionReassignments(r) => ResponseKind::AlterPartitionReassignments(
            alter_partition_reassignments::handle(ctx, r, v),
        ),
        RequestKind::ListPartitionReassignments(r) => ResponseKind::ListPartitionReassignments(
            list_partition_reassignments::handle(ctx, r, v),
        ),
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(describe_client_quotas::handle(ctx, r, v))
        }
        RequestKind::AlterClientQuotas(r) => {
            ResponseKind::AlterClientQuotas(alter_client_quotas::handle(ctx, r, v).await)
        }
        RequestKind::ListConfigResources(r) => {
            ResponseKind::ListConfigResources(list_config_resources::handle(ctx, r, v))
        }
        RequestKind::AlterReplicaLogDirs(r) => {
            ResponseKind::AlterReplicaLogDirs(alter_replica_log_dirs::handle(ctx, r, v))
        }
        RequestKind::UpdateFeatures(r) => {
            ResponseKind::UpdateFeatures(update_features::handle(ctx, r, v))
        }
        _ => return Err(CodecError::NotImplemented(request.api_key)),
    })))
}

/// The size of a request as Kafka counts it for quotas (`RequestChannel.Request.sizeInBytes`):
/// its body at `version` and a request header with this client id.
pub fn request_size<M: kafka_protocol::protocol::Encodable>(
    ctx: &Ctx<'_>,
    body: &M,
    version: i16,
) -> usize {
    // api key, version, correlation id, client id (length and bytes), tagged fields.
    let header = 2 + 2 + 4 + 2 + ctx.client_id.len() + 1;
    header + body.compute_size(version).unwrap_or(0)
}

/// Names given more than once (Kafka answers each of them INVALID_REQUEST).
pub fn named_twice<'a>(names: impl Iterator<Item = &'a str>) -> std::collections::HashSet<String> {
    let mut seen = std::collections::HashSet::new();
    names
        .filter(|n| !seen.insert(*n))
        .map(str::to_owned)
        .collect()
}

/// The host and port a broker advertises, as the wire carries them.
pub fn advertised(broker: &crate::shared::BrokerInfo) -> (StrBytes, i32) {
    (
        str_bytes(&broker.addr.ip().to_string()),
        i32::from(broker.addr.port()),
    )
}

/// A `StrBytes` from a `&str`.
pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A `TopicName` from a `&str`.
pub fn topic_name(s: &str) -> TopicName {
    TopicName(str_bytes(s))
}
