//! The scripted-member toolkit of the classic group-protocol tests (`group_*.rs`): a 3-broker
//! cluster, the coordinator's address, and one helper per group request that sends it at the
//! version Kafka's consumers use, within [`PATIENCE`], and gives back what the tests compare
//! (error codes as [`err`] names them). Checked against Apache Kafka's group coordinator
//! (`GroupCoordinator` in Kafka 3.x, `GroupMetadataManager` / `ClassicGroup` /
//! `OffsetMetadataManager` from Kafka 4.0).
//!
//! Every member has its own connection: a broker answers one connection's requests in order,
//! and a JoinGroup or a follower's SyncGroup holds its connection until the rebalance moves on.
//!
//! It re-exports what the tests use (the protocol's messages and error codes, anyhow, `Client`),
//! so each `group_*.rs` needs only `use common::classic_group::*;`: not every test file uses
//! every re-export.
#![allow(unused_imports)]

use std::future::Future;
use std::net::SocketAddr;
pub use std::time::Duration;

pub use anyhow::{anyhow, ensure, Context, Result};
pub use bytes::Bytes;
pub use kafka_protocol::messages::describe_groups_response::DescribedGroup;
pub use kafka_protocol::messages::leave_group_request::MemberIdentity;
pub use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
pub use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
pub use kafka_protocol::messages::*;
pub use kafka_protocol::ResponseError::{self, *};
pub use kmock::Cluster;
pub use kmock_client::Client;

use super::requests;
pub use super::requests::{CONSUMER, RANGE};
pub use super::{code_is, err, name, same, start, text};

/// The topic every cluster has, with [`PARTITIONS`] partitions.
pub const TOPIC: &str = "t";
pub const PARTITIONS: i32 = 2;
/// Session and rebalance timeouts of members: long enough that nobody expires during a test.
pub const SESSION_MS: i32 = 30_000;
pub const REBALANCE_MS: i32 = 30_000;
/// Kafka's `group.min.session.timeout.ms` default.
pub const MIN_SESSION_MS: i32 = 6_000;
/// How long a request that should be answered may take.
pub const PATIENCE: Duration = Duration::from_secs(10);
/// How long a request that should wait is watched before it is called waiting.
pub const HELD: Duration = Duration::from_millis(300);

pub const META_A: &[u8] = b"subscription of a";
pub const META_B: &[u8] = b"subscription of b";
pub const ASSIGN_A: &[u8] = b"assignment of a";
pub const ASSIGN_B: &[u8] = b"assignment of b";

/// A 3-broker cluster with topic [`TOPIC`].
pub async fn cluster() -> Result<Cluster> {
    Ok(start(3, &[TOPIC], PARTITIONS).await?.0)
}

/// The address of `group`'s coordinator, as FindCoordinator v4 (asked of the first broker)
/// names it.
pub async fn coordinator(cluster: &Cluster, group: &str) -> Result<SocketAddr> {
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    Ok(requests::find_coordinator(&client, group).await?.1)
}

/// A new connection to `addr` with `client_id` in every request header.
pub async fn connect(addr: SocketAddr, client_id: &str) -> Result<Client> {
    Ok(Client::connect_with_client_id(addr, client_id).await?)
}

/// Fails unless `answer` comes within [`PATIENCE`].
pub async fn within<T>(
    what: &str,
    answer: impl Future<Output = Result<T, kmock_client::Error>>,
) -> Result<T> {
    tokio::time::timeout(PATIENCE, answer)
        .await
        .map_err(|_| anyhow!("{what}: no answer within {PATIENCE:?}"))?
        .with_context(|| what.to_owned())
}

/// Fails if `pending` is answered within [`HELD`]: the broker must hold it back.
pub async fn still_waiting<F: Future + Unpin>(what: &str, pending: &mut F) -> Result<()> {
    let answered = tokio::time::timeout(HELD, pending).await.is_ok();
    ensure!(
        !answered,
        "{what}: answered within {HELD:?}, expected it to wait"
    );
    Ok(())
}

/// A JoinGroup of `member_id` (empty on a first join) offering [`RANGE`] with `metadata`.
pub fn join_request(group: &str, member_id: &str, metadata: &[u8]) -> JoinGroupRequest {
    requests::join_group(group, member_id, Bytes::copy_from_slice(metadata))
        .with_session_timeout_ms(SESSION_MS)
        .with_rebalance_timeout_ms(REBALANCE_MS)
}

/// JoinGroup at version `v`.
pub async fn join(client: &Client, request: JoinGroupRequest, v: i16) -> Result<JoinGroupResponse> {
    within(&format!("JoinGroup v{v}"), client.send(request, v)).await
}

/// Joins as a new member the KIP-394 way (v9): the first JoinGroup must get MEMBER_ID_REQUIRED
/// with the id to use; the answer to the second, made with it, is returned.
pub async fn join_new(client: &Client, group: &str, metadata: &[u8]) -> Result<JoinGroupResponse> {
    join_new_with_session(client, group, metadata, SESSION_MS).await
}

/// [`join_new`] with a session timeout of `session_ms`.
pub async fn join_new_with_session(
    client: &Client,
    group: &str,
    metadata: &[u8],
    session_ms: i32,
) -> Result<JoinGroupResponse> {
    let request = |id: &str| join_request(group, id, metadata).with_session_timeout_ms(session_ms);
    let first = join(client, request(""), 9).await?;
    code_is(
        "first JoinGroup v9 without member id",
        first.error_code,
        Some(MemberIdRequired),
    )?;
    join(client, request(&first.member_id), 9).await
}

/// `(member id, metadata)` of each member a JoinGroup answer lists (the leader's), sorted.
pub fn listed(answer: &JoinGroupResponse) -> Vec<(String, Bytes)> {
    let mut members: Vec<_> = answer
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.metadata.clone()))
        .collect();
    members.sort();
    members
}

/// SyncGroup v5 of `member_id` in `generation`; `assignments` are the leader's.
pub async fn sync(
    client: &Client,
    group: &str,
    generation: i32,
    member_id: &str,
    assignments: &[(&str, &[u8])],
) -> Result<SyncGroupResponse> {
    let assignments: Vec<(&str, Bytes)> = assignments
        .iter()
        .map(|&(id, a)| (id, Bytes::copy_from_slice(a)))
        .collect();
    let request = requests::with_protocol(requests::sync_group(
        group,
        generation,
        member_id,
        &assignments,
    ));
    within("SyncGroup v5", client.send(request, 5)).await
}

/// The error code of a Heartbeat v4.
pub async fn heartbeat(
    client: &Client,
    group: &str,
    generation: i32,
    member_id: &str,
    instance: Option<&str>,
) -> Result<i16> {
    let request = requests::heartbeat(group, generation, member_id)
        .with_group_instance_id(instance.map(text));
    Ok(within("Heartbeat v4", client.send(request, 4))
        .await?
        .error_code)
}

/// One offset to commit: `(topic, partition, offset, leader epoch, metadata)`.
pub type Offset<'a> = (&'a str, i32, i64, i32, &'a str);

/// OffsetCommit v8; `(topic, partition, error)` of each partition, as [`err`] names errors.
pub async fn commit(
    client: &Client,
    group: &str,
    generation: i32,
    member_id: &str,
    offsets: &[Offset<'_>],
) -> Result<Vec<(String, i32, String)>> {
    let topics = offsets
        .iter()
        .map(|&(topic, partition, offset, epoch, metadata)| {
            OffsetCommitRequestTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(epoch)
                    .with_committed_metadata(Some(text(metadata)))])
        })
        .collect();
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(text(member_id))
        .with_topics(topics);
    let answer = within("OffsetCommit v8", client.send(request, 8)).await?;
    Ok(answer
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index, err(p.error_code)))
        })
        .collect())
}

/// The error of a commit of offset `offset` of partition 0 of [`TOPIC`].
pub async fn commit_one(
    client: &Client,
    group: &str,
    generation: i32,
    member_id: &str,
    offset: i64,
) -> Result<String> {
    let answer = commit(
        client,
        group,
        generation,
        member_id,
        &[(TOPIC, 0, offset, -1, "")],
    )
    .await?;
    ensure!(
        answer.len() == 1,
        "OffsetCommit of one partition: got {answer:?}, expected one partition"
    );
    Ok(answer[0].2.clone())
}

/// `(topic, partition, error)` as [`commit`] returns it, for the expected side.
pub fn committed(answers: &[(&str, i32, Option<ResponseError>)]) -> Vec<(String, i32, String)> {
    answers
        .iter()
        .map(|&(t, p, e)| (t.to_owned(), p, err(e.map_or(0, |e| e.code()))))
        .collect()
}

/// `(partition, offset, leader epoch, metadata)` of the committed `partitions` of [`TOPIC`], by
/// OffsetFetch v8 (one group of the batch form).
pub async fn fetch_offsets(
    client: &Client,
    group: &str,
    partitions: &[i32],
) -> Result<Vec<(i32, i64, i32, String)>> {
    let request =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(name(TOPIC))
                .with_partition_indexes(partitions.to_vec())]))]);
    let answer = within("OffsetFetch v8", client.send(request, 8)).await?;
    ensure!(
        answer.groups.len() == 1,
        "OffsetFetch v8: got {} groups, expected 1",
        answer.groups.len()
    );
    let found = &answer.groups[0];
    code_is("OffsetFetch v8 group", found.error_code, None)?;
    let mut offsets = Vec::new();
    for t in &found.topics {
        for p in &t.partitions {
            code_is("OffsetFetch v8 partition", p.error_code, None)?;
            let metadata = p.metadata.as_ref().map_or("", |m| m.as_str()).to_owned();
            offsets.push((
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch,
                metadata,
            ));
        }
    }
    Ok(offsets)
}

/// The group as DescribeGroups v5 describes it.
pub async fn describe(client: &Client, group: &str) -> Result<DescribedGroup> {
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
    let mut answer = within("DescribeGroups v5", client.send(request, 5)).await?;
    ensure!(
        answer.groups.len() == 1,
        "DescribeGroups v5: got {} groups, expected 1",
        answer.groups.len()
    );
    Ok(answer.groups.remove(0))
}

/// `(member id, client id, client host, metadata, assignment)` of each described member, sorted.
pub fn described_members(group: &DescribedGroup) -> Vec<(String, String, String, Bytes, Bytes)> {
    let mut members: Vec<_> = group
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.client_id.to_string(),
                m.client_host.to_string(),
                m.member_metadata.clone(),
                m.member_assignment.clone(),
            )
        })
        .collect();
    members.sort();
    members
}

/// LeaveGroup v3 (batch) of `member_ids`: the top-level error and each member's.
pub async fn leave(
    client: &Client,
    group: &str,
    member_ids: &[&str],
) -> Result<(String, Vec<String>)> {
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_members(
            member_ids
                .iter()
                .map(|id| MemberIdentity::default().with_member_id(text(id)))
                .collect(),
        );
    let answer = within("LeaveGroup v3", client.send(request, 3)).await?;
    let each = answer.members.iter().map(|m| err(m.error_code)).collect();
    Ok((err(answer.error_code), each))
}

/// A member that joined `group` (KIP-394 way) and took [`ASSIGN_A`] in its own SyncGroup: the
/// one member and leader of a Stable group in generation 1. Returns its member id.
pub async fn stable_member(client: &Client, group: &str) -> Result<String> {
    stable_member_with_session(client, group, SESSION_MS).await
}

/// [`stable_member`] with a session timeout of `session_ms`.
pub async fn stable_member_with_session(
    client: &Client,
    group: &str,
    session_ms: i32,
) -> Result<String> {
    let joined = join_new_with_session(client, group, META_A, session_ms).await?;
    code_is("JoinGroup with the member id", joined.error_code, None)?;
    let id = joined.member_id.to_string();
    let synced = sync(client, group, joined.generation_id, &id, &[(&id, ASSIGN_A)]).await?;
    code_is("leader's SyncGroup", synced.error_code, None)?;
    same("generation of a first join", joined.generation_id, 1)?;
    Ok(id)
}

/// Makes `a` (leader) and `b` the two members of a Stable `group` in generation 2, holding
/// [`ASSIGN_A`] and [`ASSIGN_B`]; returns their member ids.
pub async fn two_members(a: &Client, b: &Client, group: &str) -> Result<(String, String)> {
    two_members_with_session(a, b, group, SESSION_MS).await
}

/// [`two_members`] with a session timeout of `session_ms` for both.
pub async fn two_members_with_session(
    a: &Client,
    b: &Client,
    group: &str,
    session_ms: i32,
) -> Result<(String, String)> {
    let request =
        |id: &str, metadata| join_request(group, id, metadata).with_session_timeout_ms(session_ms);
    let a_id = stable_member_with_session(a, group, session_ms).await?;
    let b_id = join(b, request("", META_B), 9).await?.member_id.to_string();
    let (joined_b, joined_a) = tokio::join!(
        join(b, request(&b_id, META_B), 9),
        join(a, request(&a_id, META_A), 9),
    );
    for joined in [joined_a?, joined_b?] {
        code_is("rejoin for generation 2", joined.error_code, None)?;
        same(
            "generation after the second member joined",
            joined.generation_id,
            2,
        )?;
    }
    let assignments = [(a_id.as_str(), ASSIGN_A), (b_id.as_str(), ASSIGN_B)];
    let (synced_a, synced_b) = tokio::join!(
        sync(a, group, 2, &a_id, &assignments),
        sync(b, group, 2, &b_id, &[]),
    );
    code_is("leader's SyncGroup", synced_a?.error_code, None)?;
    code_is("follower's SyncGroup", synced_b?.error_code, None)?;
    Ok((a_id, b_id))
}
