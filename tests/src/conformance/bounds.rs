//! Version boundaries: each API kmock implements, one version below Kafka 4.4's lowest (where
//! it is above 0) and one above its highest. Kafka's `SocketServer` closes the connection of a
//! request at a version it does not enable; the next connection works. (ApiVersions answers
//! every version, see `versions::api_versions_unsupported_version`; Produce below v3 and
//! ListOffsets v0 have cases of their own.)

use anyhow::Result;
use kafka_protocol::messages::ApiKey;

use super::versions::unsupported;
use super::{case, Case, Ctx, Lines};

/// A body of zeros: the broker refuses the version from the header, before reading it.
const BODY: &[u8] = &[0; 16];

/// Sends `key` at `lowest - 1` (when `lowest` is above 0) and `highest + 1`.
pub(super) async fn bounds(cx: &Ctx, key: ApiKey, lowest: i16, highest: i16) -> Result<Lines> {
    let mut lines = Vec::new();
    for version in [lowest - 1, highest + 1] {
        if version < 0 {
            continue;
        }
        let header = key.request_header_version(version);
        lines.extend(unsupported(cx, key as i16, version, header, BODY).await?);
    }
    Ok(lines)
}

macro_rules! bounds_cases {
    ($($name:ident: $key:ident $lowest:literal..=$highest:literal),* $(,)?) => {
        bounds_cases! { pub CASES; $($name: $key $lowest..=$highest),* }
    };
    ($vis:vis $list:ident; $($name:ident: $key:ident $lowest:literal..=$highest:literal),* $(,)?) => {
        $(
            async fn $name(cx: Ctx) -> Result<Lines> {
                bounds(&cx, ApiKey::$key, $lowest, $highest).await
            }
        )*
        $vis const $list: &[Case] = &[$(case!($name)),*];
    };
}

// Kafka 4.4.0's ranges (broker/src/versions/tables.rs, KAFKA_4_4); Produce and ListOffsets from
// 0 here, their lower ends having cases of their own.
bounds_cases! {
    produce_one_version_past_its_highest: Produce 0..=13,
    fetch_one_version_past_each_end: Fetch 4..=18,
    list_offsets_one_version_past_its_highest: ListOffsets 0..=11,
    metadata_one_version_past_its_highest: Metadata 0..=13,
    offset_commit_one_version_past_each_end: OffsetCommit 2..=10,
    offset_fetch_one_version_past_each_end: OffsetFetch 1..=10,
    find_coordinator_one_version_past_its_highest: FindCoordinator 0..=6,
    join_group_one_version_past_its_highest: JoinGroup 0..=9,
    heartbeat_one_version_past_its_highest: Heartbeat 0..=4,
    leave_group_one_version_past_its_highest: LeaveGroup 0..=5,
    sync_group_one_version_past_its_highest: SyncGroup 0..=5,
    describe_groups_one_version_past_its_highest: DescribeGroups 0..=6,
    list_groups_one_version_past_its_highest: ListGroups 0..=5,
    create_topics_one_version_past_each_end: CreateTopics 2..=7,
    delete_topics_one_version_past_each_end: DeleteTopics 1..=6,
    init_producer_id_one_version_past_its_highest: InitProducerId 0..=5,
    offset_for_leader_epoch_one_version_past_each_end: OffsetForLeaderEpoch 2..=4,
    add_partitions_to_txn_one_version_past_its_highest: AddPartitionsToTxn 0..=5,
    add_offsets_to_txn_one_version_past_its_highest: AddOffsetsToTxn 0..=4,
    end_txn_one_version_past_its_highest: EndTxn 0..=5,
    txn_offset_commit_one_version_past_its_highest: TxnOffsetCommit 0..=6,
    describe_configs_one_version_past_each_end: DescribeConfigs 1..=4,
    create_partitions_one_version_past_its_highest: CreatePartitions 0..=3,
    delete_groups_one_version_past_its_highest: DeleteGroups 0..=3,
    offset_delete_one_version_past_its_highest: OffsetDelete 0..=0,
    describe_cluster_one_version_past_its_highest: DescribeCluster 0..=2,
    describe_producers_one_version_past_its_highest: DescribeProducers 0..=0,
    describe_transactions_one_version_past_its_highest: DescribeTransactions 0..=0,
    list_transactions_one_version_past_its_highest: ListTransactions 0..=2,
    consumer_group_heartbeat_one_version_past_its_highest: ConsumerGroupHeartbeat 0..=1,
    consumer_group_describe_one_version_past_its_highest: ConsumerGroupDescribe 0..=1,
}
pub(super) use bounds_cases;
