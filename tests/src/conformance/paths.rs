//! Error paths of the log's APIs: record batches whose header disagrees with their records
//! (last offset delta, record count, base offset), ListOffsets with leader epochs and at
//! READ_COMMITTED, Fetch at each version, OffsetForLeaderEpoch, DescribeCluster, and a group's
//! Heartbeat between JoinGroup and SyncGroup (LeaveGroup of several members at once is
//! `groups::classic_admin`'s `leave_group_batch_of_members`).

use anyhow::Result;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    DescribeClusterRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest,
};
use kmock_client::record;

use super::batches::{reseal, v2};
use super::fetch::fetch;
use super::offsets::three_records;
use super::produce::produce_labelled;
use super::{answered, case, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(produce_batch_last_offset_delta_wrong),
    case!(produce_batch_record_count_wrong),
    case!(produce_batch_base_offset_not_zero),
    case!(list_offsets_leader_epochs_and_read_committed),
    case!(fetch_at_each_version),
    case!(offset_for_leader_epoch_edges),
    case!(describe_cluster_versions),
    case!(heartbeat_between_join_and_sync),
];

/// Byte offset of a v2 batch's last offset delta (i32).
const LAST_OFFSET_DELTA: usize = 23;
/// Byte offset of a v2 batch's record count (i32).
const RECORD_COUNT: usize = 57;

/// A batch of three records with `at` overwritten by `value` (CRC recomputed when `reseal`).
fn three_with(at: usize, value: &[u8], sealed: bool) -> Result<Vec<u8>> {
    let mut batch = v2(&[record(b"a", b"1"), record(b"b", b"2"), record(b"c", b"3")])?;
    batch[at..at + value.len()].copy_from_slice(value);
    Ok(if sealed { reseal(batch) } else { batch })
}

async fn produce_batch_last_offset_delta_wrong(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for delta in [0i32, 5, -1] {
        let batch = three_with(LAST_OFFSET_DELTA, &delta.to_be_bytes(), true)?;
        let what = format!("last offset delta {delta} of 3 records");
        lines.extend(produce_labelled(&cx, &client, &what, &full, batch, -1).await?);
    }
    lines.extend(super::offsets::list(&cx, &full, 7, &[(0, -1)]).await?);
    Ok(lines)
}

async fn produce_batch_record_count_wrong(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for count in [2i32, 4, 0] {
        let batch = three_with(RECORD_COUNT, &count.to_be_bytes(), true)?;
        let what = format!("record count {count} of 3 records");
        lines.extend(produce_labelled(&cx, &client, &what, &full, batch, -1).await?);
    }
    lines.extend(super::offsets::list(&cx, &full, 7, &[(0, -1)]).await?);
    Ok(lines)
}

/// The base offset is outside the CRC: a producer's batch says 0, the broker assigns offsets.
async fn produce_batch_base_offset_not_zero(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for base in [100i64, -1] {
        let batch = three_with(0, &base.to_be_bytes(), false)?;
        let what = format!("base offset {base}");
        lines.extend(produce_labelled(&cx, &client, &what, &full, batch, -1).await?);
    }
    lines.extend(super::offsets::list(&cx, &full, 7, &[(0, -1)]).await?);
    Ok(lines)
}

async fn list_offsets_leader_epochs_and_read_committed(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for (epoch, isolation) in [(-1, 0), (0, 0), (5, 0), (-5, 0), (-1, 1), (0, 1)] {
        let request = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_isolation_level(isolation)
            .with_timeout_ms(30_000)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name(&full))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_current_leader_epoch(epoch)
                    .with_timestamp(-1)])]);
        let answer = client.send(request, 7).await?;
        let p = &answer.topics[0].partitions[0];
        lines.push(format!(
            "epoch {epoch} isolation {isolation}: {} offset {} leader epoch {}",
            err(p.error_code),
            p.offset,
            p.leader_epoch
        ));
    }
    Ok(lines)
}

async fn fetch_at_each_version(cx: Ctx) -> Result<Lines> {
    let (_, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for version in 4..=12 {
        let client = cx.connect().await?;
        lines.push(format!("v{version}:"));
        let asked = [(full.as_str(), 0, 1, -1, 1 << 20)];
        lines.extend(fetch(&cx, &client, version, 1 << 20, 0, &asked).await?);
    }
    Ok(lines)
}

async fn offset_for_leader_epoch_edges(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let nobody = cx.topic("nobody");
    let mut lines = Vec::new();
    for (topic, partition, current, epoch) in [
        (full.as_str(), 0, -1, 0),
        (full.as_str(), 0, 0, 0),
        (full.as_str(), 0, -1, 5),
        (full.as_str(), 0, 5, 0),
        (full.as_str(), 0, -1, -1),
        (full.as_str(), 3, -1, 0),
        (nobody.as_str(), 0, -1, 0),
    ] {
        let request = OffsetForLeaderEpochRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(current)
                    .with_leader_epoch(epoch)])]);
        let answer = client.send(request, 4).await?;
        for t in &answer.topics {
            for p in &t.partitions {
                lines.push(format!(
                    "{}/{partition} current {current} epoch {epoch}: {} leader epoch {} end offset {}",
                    cx.short(&t.topic.0),
                    err(p.error_code),
                    p.leader_epoch,
                    p.end_offset
                ));
            }
        }
    }
    Ok(lines)
}

async fn describe_cluster_versions(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for (version, endpoint_type) in [(0, 1), (1, 1), (1, 2), (1, 7)] {
        let client = cx.connect().await?;
        let request = DescribeClusterRequest::default()
            .with_endpoint_type(endpoint_type)
            .with_include_cluster_authorized_operations(false);
        let Some(answer) = answered(client.send(request, version).await)? else {
            lines.push(format!(
                "v{version} endpoint type {endpoint_type}: connection closed"
            ));
            continue;
        };
        lines.push(format!(
            "v{version} endpoint type {endpoint_type}: {} brokers {} controller {} cluster id {}",
            err(answer.error_code),
            answer.brokers.len(),
            answer.controller_id.0,
            if answer.cluster_id.is_empty() {
                "empty"
            } else {
                "given"
            }
        ));
    }
    Ok(lines)
}

/// A member that joined but has not synced: Heartbeat at its generation, at another, and
/// OffsetCommit, before the SyncGroup.
async fn heartbeat_between_join_and_sync(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    super::groups::coordinator(&client, &group).await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let (member, generation) = super::groups::joined_member(&client, &group).await?;
    let mut lines = Vec::new();
    for (what, g) in [("its generation", generation), ("another", generation + 1)] {
        let answer = super::groups::heartbeat(&client, &group, &member, g).await?;
        lines.push(format!("heartbeat at {what}: {answer}"));
    }
    let committed = super::groups::commit_as(&client, &group, generation, &member, &full).await?;
    lines.push(format!("commit: {committed}"));
    let synced = super::groups::sync(&client, &group, &member, generation, true).await?;
    lines.push(format!("sync: {synced}"));
    Ok(lines)
}
