//! The classic consumer-group protocol over real sockets, on a 3-broker kmock cluster, checked
//! against what Apache Kafka's group coordinator answers (`GroupCoordinator` in Kafka 3.x,
//! `GroupMetadataManager` / `ClassicGroup` / `OffsetMetadataManager` from Kafka 4.0): coordinator
//! placement, JoinGroup / SyncGroup / Heartbeat / LeaveGroup, offset commits and fetches, and
//! the admin view (DescribeGroups, ListGroups, DeleteGroups).
//!
//! Every member has its own connection: a broker answers one connection's requests in order,
//! and a JoinGroup or a follower's SyncGroup holds its connection until the rebalance moves on.

mod common;

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use bytes::Bytes;
use common::{code_is, err, name, same, start, text};
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError::{self, *};
use kmock::Cluster;
use kmock_client::Client;

/// The topic every cluster has, with [`PARTITIONS`] partitions.
const TOPIC: &str = "t";
const PARTITIONS: i32 = 2;
/// Session and rebalance timeouts of members: long enough that nobody expires during a test.
const SESSION_MS: i32 = 30_000;
const REBALANCE_MS: i32 = 30_000;
/// Kafka's `group.min.session.timeout.ms` default.
const MIN_SESSION_MS: i32 = 6_000;
/// The protocol type and the one assignor every member here offers.
const CONSUMER: &str = "consumer";
const RANGE: &str = "range";
/// How long a request that should be answered may take.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long a request that should wait is watched before it is called waiting.
const HELD: Duration = Duration::from_millis(300);

const META_A: &[u8] = b"subscription of a";
const META_B: &[u8] = b"subscription of b";
const ASSIGN_A: &[u8] = b"assignment of a";
const ASSIGN_B: &[u8] = b"assignment of b";

// ---------------------------------------------------------------------------------------------
// Shared helpers: cluster and coordinator, then one helper per group request.
// ---------------------------------------------------------------------------------------------

/// A 3-broker cluster with topic [`TOPIC`].
async fn cluster() -> Result<Cluster> {
    Ok(start(3, &[TOPIC], PARTITIONS).await?.0)
}

/// The address of `group`'s coordinator, as FindCoordinator v4 (asked of the first broker)
/// names it.
async fn coordinator(cluster: &Cluster, group: &str) -> Result<SocketAddr> {
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let request = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![text(group)]);
    let answer = client.send(request, 4).await?;
    ensure!(
        answer.coordinators.len() == 1,
        "FindCoordinator v4 [{group}]: got {} coordinators, expected 1",
        answer.coordinators.len()
    );
    let found = &answer.coordinators[0];
    code_is("FindCoordinator v4", found.error_code, None)?;
    format!("{}:{}", found.host.as_str(), found.port)
        .parse()
        .context("coordinator address")
}

/// A new connection to `addr` with `client_id` in every request header.
async fn connect(addr: SocketAddr, client_id: &str) -> Result<Client> {
    Ok(Client::connect_with_client_id(addr, client_id).await?)
}

/// Fails unless `answer` comes within [`PATIENCE`].
async fn within<T>(
    what: &str,
    answer: impl Future<Output = Result<T, kmock_client::Error>>,
) -> Result<T> {
    tokio::time::timeout(PATIENCE, answer)
        .await
        .map_err(|_| anyhow!("{what}: no answer within {PATIENCE:?}"))?
        .with_context(|| what.to_owned())
}

/// Fails if `pending` is answered within [`HELD`]: the broker must hold it back.
async fn still_waiting<F: Future + Unpin>(what: &str, pending: &mut F) -> Result<()> {
    let answered = tokio::time::timeout(HELD, pending).await.is_ok();
    ensure!(
        !answered,
        "{what}: answered within {HELD:?}, expected it to wait"
    );
    Ok(())
}

/// A JoinGroup of `member_id` (empty on a first join) offering [`RANGE`] with `metadata`.
fn join_request(group: &str, member_id: &str, metadata: &[u8]) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_session_timeout_ms(SESSION_MS)
        .with_rebalance_timeout_ms(REBALANCE_MS)
        .with_member_id(text(member_id))
        .with_protocol_type(text(CONSUMER))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text(RANGE))
            .with_metadata(Bytes::copy_from_slice(metadata))])
}

/// JoinGroup at version `v`.
async fn join(client: &Client, request: JoinGroupRequest, v: i16) -> Result<JoinGroupResponse> {
    within(&format!("JoinGroup v{v}"), client.send(request, v)).await
}

/// Joins as a new member the KIP-394 way (v9): the first JoinGroup must get MEMBER_ID_REQUIRED
/// with the id to use; the answer to the second, made with it, is returned.
async fn join_new(client: &Client, group: &str, metadata: &[u8]) -> Result<JoinGroupResponse> {
    join_new_with_session(client, group, metadata, SESSION_MS).await
}

/// [`join_new`] with a session timeout of `session_ms`.
async fn join_new_with_session(
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
fn listed(answer: &JoinGroupResponse) -> Vec<(String, Bytes)> {
    let mut members: Vec<_> = answer
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.metadata.clone()))
        .collect();
    members.sort();
    members
}

/// SyncGroup v5 of `member_id` in `generation`; `assignments` are the leader's.
async fn sync(
    client: &Client,
    group: &str,
    generation: i32,
    member_id: &str,
    assignments: &[(&str, &[u8])],
) -> Result<SyncGroupResponse> {
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member_id))
        .with_protocol_type(Some(text(CONSUMER)))
        .with_protocol_name(Some(text(RANGE)))
        .with_assignments(
            assignments
                .iter()
                .map(|(id, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(text(id))
                        .with_assignment(Bytes::copy_from_slice(a))
                })
                .collect(),
        );
    within("SyncGroup v5", client.send(request, 5)).await
}

/// The error code of a Heartbeat v4.
async fn heartbeat(
    client: &Client,
    group: &str,
    generation: i32,
    member_id: &str,
    instance: Option<&str>,
) -> Result<i16> {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member_id))
        .with_group_instance_id(instance.map(text));
    Ok(within("Heartbeat v4", client.send(request, 4))
        .await?
        .error_code)
}

/// One offset to commit: `(topic, partition, offset, leader epoch, metadata)`.
type Offset<'a> = (&'a str, i32, i64, i32, &'a str);

/// OffsetCommit v8; `(topic, partition, error)` of each partition, as [`err`] names errors.
async fn commit(
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
async fn commit_one(
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
fn committed(answers: &[(&str, i32, Option<ResponseError>)]) -> Vec<(String, i32, String)> {
    answers
        .iter()
        .map(|&(t, p, e)| (t.to_owned(), p, err(e.map_or(0, |e| e.code()))))
        .collect()
}

/// `(partition, offset, leader epoch, metadata)` of the committed `partitions` of [`TOPIC`], by
/// OffsetFetch v8 (one group of the batch form).
async fn fetch_offsets(
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
async fn describe(client: &Client, group: &str) -> Result<DescribedGroup> {
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
fn described_members(group: &DescribedGroup) -> Vec<(String, String, String, Bytes, Bytes)> {
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
async fn leave(client: &Client, group: &str, member_ids: &[&str]) -> Result<(String, Vec<String>)> {
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
async fn stable_member(client: &Client, group: &str) -> Result<String> {
    stable_member_with_session(client, group, SESSION_MS).await
}

/// [`stable_member`] with a session timeout of `session_ms`.
async fn stable_member_with_session(
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
async fn two_members(a: &Client, b: &Client, group: &str) -> Result<(String, String)> {
    two_members_with_session(a, b, group, SESSION_MS).await
}

/// [`two_members`] with a session timeout of `session_ms` for both.
async fn two_members_with_session(
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

// ---------------------------------------------------------------------------------------------
// Coordinator placement.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn find_coordinator_v3_and_v4_name_the_same_coordinator_on_every_broker() -> Result<()> {
    let cluster = cluster().await?;
    let groups = ["alpha", "beta", "gamma", "delta", "orders", "payments"];
    let mut named: Vec<(String, i32, String)> = Vec::new();
    for broker in cluster.brokers() {
        let client = Client::connect(broker.addr).await?;
        let batch = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(groups.iter().map(|g| text(g)).collect());
        let v4 = client.send(batch, 4).await?;
        let keys: Vec<&str> = v4.coordinators.iter().map(|c| c.key.as_str()).collect();
        same("keys answered by FindCoordinator v4", keys, groups.to_vec())?;
        for (group, c4) in groups.iter().zip(&v4.coordinators) {
            let single = FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_key(text(group));
            let v3 = client.send(single, 3).await?;
            let what = format!("FindCoordinator [{group}] asked of node {}", broker.node_id);
            code_is(&format!("{what} v3"), v3.error_code, None)?;
            code_is(&format!("{what} v4"), c4.error_code, None)?;
            let at = |host: &str, port: i32| format!("{host}:{port}");
            same(
                &format!("{what}: v3 (node, address) vs v4"),
                (v3.node_id.0, at(&v3.host, v3.port)),
                (c4.node_id.0, at(&c4.host, c4.port)),
            )?;
            let node = cluster
                .brokers()
                .iter()
                .find(|b| b.node_id == c4.node_id.0)
                .with_context(|| format!("{what}: node {} is not in the cluster", c4.node_id.0))?;
            same(
                &format!("{what}: address of node {}", node.node_id),
                at(&c4.host, c4.port),
                node.addr.to_string(),
            )?;
            named.push((group.to_string(), broker.node_id, at(&c4.host, c4.port)));
        }
    }
    for group in groups {
        let mut answers = named
            .iter()
            .filter(|(g, _, _)| g == group)
            .map(|(_, _, a)| a);
        let first = answers.next().context("no answer")?;
        for other in answers {
            same(
                &format!("coordinator of {group} named by two brokers"),
                other,
                first,
            )?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn every_group_request_sent_to_another_broker_than_the_coordinator_gets_not_coordinator(
) -> Result<()> {
    const G: &str = "placed";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    let member = connect(at, "consumer-a").await?;
    let id = stable_member(&member, G).await?;
    let others: Vec<_> = cluster.brokers().iter().filter(|b| b.addr != at).collect();
    same("brokers other than the coordinator", others.len(), 2)?;
    for broker in others {
        let client = connect(broker.addr, "consumer-a").await?;
        let on = |api: &str| format!("{api} to node {} (not the coordinator)", broker.node_id);
        let joined = join(&client, join_request(G, "", META_A), 9).await?;
        code_is(&on("JoinGroup v9"), joined.error_code, Some(NotCoordinator))?;
        let joined = join(&client, join_request(G, &id, META_A), 9).await?;
        code_is(
            &on("JoinGroup v9 of a member"),
            joined.error_code,
            Some(NotCoordinator),
        )?;
        let synced = sync(&client, G, 1, &id, &[(&id, ASSIGN_A)]).await?;
        code_is(&on("SyncGroup v5"), synced.error_code, Some(NotCoordinator))?;
        let beat = heartbeat(&client, G, 1, &id, None).await?;
        code_is(&on("Heartbeat v4"), beat, Some(NotCoordinator))?;
        let (left, _) = leave(&client, G, &[&id]).await?;
        same(&on("LeaveGroup v3"), left, err(NotCoordinator.code()))?;
        same(
            &on("OffsetCommit v8"),
            commit(&client, G, 1, &id, &[(TOPIC, 0, 5, -1, "")]).await?,
            committed(&[(TOPIC, 0, Some(NotCoordinator))]),
        )?;
        let v7 = OffsetFetchRequest::default()
            .with_group_id(GroupId(text(G)))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(name(TOPIC))
                .with_partition_indexes(vec![0])]));
        let fetched = within("OffsetFetch v7", client.send(v7, 7)).await?;
        code_is(
            &on("OffsetFetch v7"),
            fetched.error_code,
            Some(NotCoordinator),
        )?;
        let v8 =
            OffsetFetchRequest::default().with_groups(vec![
                OffsetFetchRequestGroup::default().with_group_id(GroupId(text(G)))
            ]);
        let fetched = within("OffsetFetch v8", client.send(v8, 8)).await?;
        let codes: Vec<String> = fetched.groups.iter().map(|g| err(g.error_code)).collect();
        same(
            &on("OffsetFetch v8"),
            codes,
            vec![err(NotCoordinator.code())],
        )?;
        let described = describe(&client, G).await?;
        code_is(
            &on("DescribeGroups v5"),
            described.error_code,
            Some(NotCoordinator),
        )?;
        let delete = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(G))]);
        let deleted = within("DeleteGroups v2", client.send(delete, 2)).await?;
        let codes: Vec<String> = deleted.results.iter().map(|r| err(r.error_code)).collect();
        same(
            &on("DeleteGroups v2"),
            codes,
            vec![err(NotCoordinator.code())],
        )?;
        let listed = within(
            "ListGroups v4",
            client.send(ListGroupsRequest::default(), 4),
        )
        .await?;
        let ids: Vec<String> = listed
            .groups
            .iter()
            .map(|g| g.group_id.to_string())
            .collect();
        ensure!(
            !ids.iter().any(|g| g == G),
            "{}: got {ids:?}, expected no {G:?} (only the coordinator lists a group)",
            on("ListGroups v4")
        );
    }
    let beat = heartbeat(&member, G, 1, &id, None).await?;
    code_is("Heartbeat to the coordinator after all that", beat, None)
}

// ---------------------------------------------------------------------------------------------
// Joining and rebalancing.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn join_group_v4_and_later_without_member_id_gets_member_id_required_then_joins_as_leader_of_generation_1(
) -> Result<()> {
    let cluster = cluster().await?;
    for v in 4..=9 {
        let group = format!("kip-394-v{v}");
        let client = connect(coordinator(&cluster, &group).await?, "consumer-a").await?;
        let first = join(&client, join_request(&group, "", META_A), v).await?;
        let what = format!("JoinGroup v{v} without member id");
        code_is(&what, first.error_code, Some(MemberIdRequired))?;
        same(&format!("{what}: generation"), first.generation_id, -1)?;
        let id = first.member_id.to_string();
        ensure!(
            !id.is_empty(),
            "{what}: got an empty member id, expected the id to use"
        );

        let joined = join(&client, join_request(&group, &id, META_A), v).await?;
        let what = format!("JoinGroup v{v} with the member id {id:?}");
        code_is(&what, joined.error_code, None)?;
        same(&format!("{what}: generation"), joined.generation_id, 1)?;
        same(
            &format!("{what}: member id"),
            joined.member_id.as_str(),
            &id,
        )?;
        same(&format!("{what}: leader"), joined.leader.as_str(), &id)?;
        same(
            &format!("{what}: protocol"),
            joined.protocol_name.as_ref().map(|p| p.as_str()),
            Some(RANGE),
        )?;
        same(
            &format!("{what}: members given to the leader"),
            listed(&joined),
            vec![(id.clone(), Bytes::from_static(META_A))],
        )?;
    }
    Ok(())
}

#[tokio::test]
async fn join_group_v3_without_member_id_joins_at_once() -> Result<()> {
    const G: &str = "before-kip-394";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let joined = join(&client, join_request(G, "", META_A), 3).await?;
    code_is("JoinGroup v3 without member id", joined.error_code, None)?;
    let id = joined.member_id.to_string();
    ensure!(
        !id.is_empty(),
        "JoinGroup v3: got an empty member id, expected a new one"
    );
    same("JoinGroup v3: generation", joined.generation_id, 1)?;
    same("JoinGroup v3: leader", joined.leader.as_str(), &id)?;
    same(
        "JoinGroup v3: members given to the leader",
        listed(&joined),
        vec![(id.clone(), Bytes::from_static(META_A))],
    )
}

#[tokio::test]
async fn a_second_member_makes_the_group_rebalance_and_each_member_gets_its_own_assignment(
) -> Result<()> {
    const G: &str = "rebalancing";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    let a = connect(at, "consumer-a").await?;
    let b = connect(at, "consumer-b").await?;

    // The first member leads generation 1 and its SyncGroup returns its own assignment.
    let joined = join_new(&a, G, META_A).await?;
    let a_id = joined.member_id.to_string();
    let synced = sync(&a, G, 1, &a_id, &[(&a_id, ASSIGN_A)]).await?;
    code_is(
        "leader's SyncGroup in generation 1",
        synced.error_code,
        None,
    )?;
    same(
        "leader's assignment",
        synced.assignment,
        Bytes::from_static(ASSIGN_A),
    )?;

    // A member id handed out with MEMBER_ID_REQUIRED does not start a rebalance by itself.
    let first = join(&b, join_request(G, "", META_B), 9).await?;
    code_is(
        "second member's first JoinGroup",
        first.error_code,
        Some(MemberIdRequired),
    )?;
    let b_id = first.member_id.to_string();
    let beat = heartbeat(&a, G, 1, &a_id, None).await?;
    code_is("Heartbeat of a after b got its member id", beat, None)?;

    // b joins with its id: the group rebalances and b's JoinGroup waits for a to rejoin.
    let b_join = join(&b, join_request(G, &b_id, META_B), 9);
    tokio::pin!(b_join);
    still_waiting("b's JoinGroup before a rejoined", &mut b_join).await?;
    let beat = heartbeat(&a, G, 1, &a_id, None).await?;
    code_is(
        "Heartbeat of a while b joins",
        beat,
        Some(RebalanceInProgress),
    )?;
    let (joined_b, joined_a) = tokio::join!(b_join, join(&a, join_request(G, &a_id, META_A), 9));
    let (joined_a, joined_b) = (joined_a?, joined_b?);
    for (who, joined) in [("a", &joined_a), ("b", &joined_b)] {
        code_is(
            &format!("{who}'s JoinGroup in the rebalance"),
            joined.error_code,
            None,
        )?;
        same(&format!("{who}'s generation"), joined.generation_id, 2)?;
        same(&format!("{who}'s leader"), joined.leader.as_str(), &a_id)?;
    }
    same("members given to the leader a", listed(&joined_a), {
        let mut both = vec![
            (a_id.clone(), Bytes::from_static(META_A)),
            (b_id.clone(), Bytes::from_static(META_B)),
        ];
        both.sort();
        both
    })?;
    same("members given to the follower b", listed(&joined_b), vec![])?;

    // The follower's SyncGroup waits for the leader's, then each gets its own assignment.
    let b_sync = sync(&b, G, 2, &b_id, &[]);
    tokio::pin!(b_sync);
    still_waiting("b's SyncGroup before the leader's", &mut b_sync).await?;
    let assignments = [(a_id.as_str(), ASSIGN_A), (b_id.as_str(), ASSIGN_B)];
    let (synced_a, synced_b) = tokio::join!(sync(&a, G, 2, &a_id, &assignments), b_sync);
    let (synced_a, synced_b) = (synced_a?, synced_b?);
    code_is(
        "leader's SyncGroup in generation 2",
        synced_a.error_code,
        None,
    )?;
    code_is(
        "follower's SyncGroup in generation 2",
        synced_b.error_code,
        None,
    )?;
    same(
        "a's assignment",
        synced_a.assignment,
        Bytes::from_static(ASSIGN_A),
    )?;
    same(
        "b's assignment",
        synced_b.assignment,
        Bytes::from_static(ASSIGN_B),
    )?;
    for (who, client, id) in [("a", &a, &a_id), ("b", &b, &b_id)] {
        let beat = heartbeat(client, G, 2, id, None).await?;
        code_is(&format!("{who}'s Heartbeat in generation 2"), beat, None)?;
    }
    Ok(())
}

#[tokio::test]
async fn join_group_with_a_session_timeout_of_1000_ms_gets_invalid_session_timeout() -> Result<()> {
    const G: &str = "impatient";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    for v in [3, 9] {
        let request = join_request(G, "", META_A).with_session_timeout_ms(1_000);
        let joined = join(&client, request, v).await?;
        code_is(
            &format!("JoinGroup v{v} with session_timeout_ms 1000"),
            joined.error_code,
            Some(InvalidSessionTimeout),
        )?;
    }
    Ok(())
}

#[tokio::test]
async fn join_group_with_another_protocol_type_than_the_group_gets_inconsistent_group_protocol(
) -> Result<()> {
    const G: &str = "typed";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    let a = connect(at, "consumer-a").await?;
    let b = connect(at, "connector-b").await?;
    stable_member(&a, G).await?;
    for v in [3, 9] {
        let request = join_request(G, "", META_B).with_protocol_type(text("connect"));
        let joined = join(&b, request, v).await?;
        code_is(
            &format!("JoinGroup v{v} with protocol type \"connect\" to a \"consumer\" group"),
            joined.error_code,
            Some(InconsistentGroupProtocol),
        )?;
    }
    Ok(())
}

#[tokio::test]
async fn a_static_member_rejoining_under_a_new_member_id_fences_the_old_one() -> Result<()> {
    const G: &str = "static";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    let before = connect(at, "consumer-a").await?;
    let after_restart = connect(at, "consumer-a").await?;
    let static_join = || join_request(G, "", META_A).with_group_instance_id(Some(text("i1")));

    // A static member needs no MEMBER_ID_REQUIRED round trip (KIP-345).
    let joined = join(&before, static_join(), 9).await?;
    code_is("JoinGroup v9 of static member i1", joined.error_code, None)?;
    let old_id = joined.member_id.to_string();
    let synced = sync(
        &before,
        G,
        joined.generation_id,
        &old_id,
        &[(&old_id, ASSIGN_A)],
    )
    .await?;
    code_is("SyncGroup of static member i1", synced.error_code, None)?;

    let rejoined = join(&after_restart, static_join(), 9).await?;
    code_is(
        "JoinGroup v9 of i1 again, without member id",
        rejoined.error_code,
        None,
    )?;
    let new_id = rejoined.member_id.to_string();
    ensure!(
        !new_id.is_empty() && new_id != old_id,
        "i1 rejoining without member id: got member id {new_id:?}, expected a new one (not {old_id:?})"
    );

    let beat = heartbeat(&before, G, 1, &old_id, Some("i1")).await?;
    code_is(
        "Heartbeat of i1's old member id",
        beat,
        Some(FencedInstanceId),
    )?;
    let described = describe(&before, G).await?;
    let members: Vec<_> = described
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.group_instance_id.as_ref().map(|i| i.to_string()),
            )
        })
        .collect();
    same(
        "members after i1 rejoined",
        members,
        vec![(new_id, Some("i1".to_owned()))],
    )
}

// ---------------------------------------------------------------------------------------------
// Offset commits.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn offset_commit_from_the_current_member_is_stored_and_offset_fetch_v7_and_v8_return_it(
) -> Result<()> {
    const G: &str = "committing";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let id = stable_member(&client, G).await?;
    let answer = commit(
        &client,
        G,
        1,
        &id,
        &[(TOPIC, 0, 42, 5, "meta-0"), (TOPIC, 1, 7, -1, "")],
    )
    .await?;
    same(
        "OffsetCommit v8 by the member in generation 1",
        answer,
        committed(&[(TOPIC, 0, None), (TOPIC, 1, None)]),
    )?;
    let expected = vec![(0, 42, 5, "meta-0".to_owned()), (1, 7, -1, String::new())];
    same(
        "OffsetFetch v8",
        fetch_offsets(&client, G, &[0, 1]).await?,
        expected.clone(),
    )?;

    let v7 = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(G)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(TOPIC))
            .with_partition_indexes(vec![0, 1])]));
    let fetched = within("OffsetFetch v7", client.send(v7, 7)).await?;
    code_is("OffsetFetch v7", fetched.error_code, None)?;
    let mut found = Vec::new();
    for t in &fetched.topics {
        same("OffsetFetch v7 topic", t.name.as_str(), TOPIC)?;
        for p in &t.partitions {
            code_is("OffsetFetch v7 partition", p.error_code, None)?;
            let metadata = p.metadata.as_ref().map_or("", |m| m.as_str()).to_owned();
            found.push((
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch,
                metadata,
            ));
        }
    }
    same("OffsetFetch v7", found, expected)
}

#[tokio::test]
async fn a_member_of_an_older_generation_gets_illegal_generation_from_heartbeat_and_offset_commit(
) -> Result<()> {
    const G: &str = "stale";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let id = stable_member(&client, G).await?;
    // The leader rejoining a Stable group starts generation 2 (it is the only member).
    let rejoined = join(&client, join_request(G, &id, META_A), 9).await?;
    code_is("leader's rejoin", rejoined.error_code, None)?;
    same(
        "generation after the leader rejoined",
        rejoined.generation_id,
        2,
    )?;
    let synced = sync(&client, G, 2, &id, &[(&id, ASSIGN_A)]).await?;
    code_is("SyncGroup in generation 2", synced.error_code, None)?;

    let beat = heartbeat(&client, G, 1, &id, None).await?;
    code_is(
        "Heartbeat with generation 1 in generation 2",
        beat,
        Some(IllegalGeneration),
    )?;
    same(
        "OffsetCommit with generation 1 in generation 2",
        commit_one(&client, G, 1, &id, 10).await?,
        err(IllegalGeneration.code()),
    )?;
    same(
        "nothing committed",
        fetch_offsets(&client, G, &[0]).await?,
        vec![(0, -1, -1, String::new())],
    )
}

#[tokio::test]
async fn an_unknown_member_gets_unknown_member_id_from_heartbeat_and_offset_commit() -> Result<()> {
    const G: &str = "strangers";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    stable_member(&client, G).await?;
    let beat = heartbeat(&client, G, 1, "nobody", None).await?;
    code_is(
        "Heartbeat of member \"nobody\"",
        beat,
        Some(UnknownMemberId),
    )?;
    same(
        "OffsetCommit of member \"nobody\" in generation 1",
        commit_one(&client, G, 1, "nobody", 10).await?,
        err(UnknownMemberId.code()),
    )?;
    same(
        "nothing committed",
        fetch_offsets(&client, G, &[0]).await?,
        vec![(0, -1, -1, String::new())],
    )
}

#[tokio::test]
async fn offset_commit_without_generation_or_member_to_a_group_with_members_gets_unknown_member_id(
) -> Result<()> {
    const G: &str = "members-only";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "admin").await?;
    let member = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    stable_member(&member, G).await?;
    same(
        "OffsetCommit with generation -1 and no member id to a Stable group",
        commit_one(&client, G, -1, "", 10).await?,
        err(UnknownMemberId.code()),
    )
}

#[tokio::test]
async fn offset_commit_without_generation_to_a_new_group_id_is_stored() -> Result<()> {
    const G: &str = "manual-assignment";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "admin").await?;
    same(
        "OffsetCommit with generation -1 and no member id to a new group id",
        commit_one(&client, G, -1, "", 17).await?,
        err(0),
    )?;
    same(
        "OffsetFetch v8",
        fetch_offsets(&client, G, &[0]).await?,
        vec![(0, 17, -1, String::new())],
    )?;
    let described = describe(&client, G).await?;
    same(
        "state of a group made by a commit",
        described.group_state.as_str(),
        "Empty",
    )
}

#[tokio::test]
async fn offset_commit_with_metadata_over_4096_bytes_gets_offset_metadata_too_large() -> Result<()>
{
    const G: &str = "chatty";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let id = stable_member(&client, G).await?;
    let (fits, too_long) = ("m".repeat(4_096), "m".repeat(4_097));
    same(
        "OffsetCommit with 4096 bytes of metadata on p0 and 4097 on p1",
        commit(
            &client,
            G,
            1,
            &id,
            &[(TOPIC, 0, 3, -1, &fits), (TOPIC, 1, 3, -1, &too_long)],
        )
        .await?,
        committed(&[(TOPIC, 0, None), (TOPIC, 1, Some(OffsetMetadataTooLarge))]),
    )?;
    same(
        "OffsetFetch v8 after it",
        fetch_offsets(&client, G, &[0, 1]).await?,
        vec![(0, 3, -1, fits), (1, -1, -1, String::new())],
    )
}

#[tokio::test]
async fn offset_commit_to_an_unknown_topic_or_partition_fails_for_that_partition_only() -> Result<()>
{
    const G: &str = "lost";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let id = stable_member(&client, G).await?;
    let offsets = [
        (TOPIC, 0, 5, -1, ""),
        ("nope", 0, 5, -1, ""),
        (TOPIC, 9, 5, -1, ""),
    ];
    same(
        "OffsetCommit of t-0, nope-0 and t-9",
        commit(&client, G, 1, &id, &offsets).await?,
        committed(&[
            (TOPIC, 0, None),
            ("nope", 0, Some(UnknownTopicOrPartition)),
            (TOPIC, 9, Some(UnknownTopicOrPartition)),
        ]),
    )?;
    same(
        "OffsetFetch v8 of t-0",
        fetch_offsets(&client, G, &[0]).await?,
        vec![(0, 5, -1, String::new())],
    )
}

#[tokio::test]
async fn offset_commit_between_join_group_and_sync_group_gets_rebalance_in_progress() -> Result<()>
{
    const G: &str = "too-early";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let joined = join_new(&client, G, META_A).await?;
    code_is("JoinGroup", joined.error_code, None)?;
    let id = joined.member_id.to_string();
    same(
        "OffsetCommit of the member in its generation, before SyncGroup (CompletingRebalance)",
        commit_one(&client, G, 1, &id, 10).await?,
        err(RebalanceInProgress.code()),
    )?;
    let synced = sync(&client, G, 1, &id, &[(&id, ASSIGN_A)]).await?;
    code_is("SyncGroup", synced.error_code, None)?;
    same(
        "the same OffsetCommit after SyncGroup",
        commit_one(&client, G, 1, &id, 10).await?,
        err(0),
    )
}

#[tokio::test]
async fn offset_commit_of_a_lower_offset_than_the_last_is_accepted() -> Result<()> {
    const G: &str = "rewinding";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let id = stable_member(&client, G).await?;
    same(
        "OffsetCommit of 100",
        commit_one(&client, G, 1, &id, 100).await?,
        err(0),
    )?;
    same(
        "then OffsetCommit of 40",
        commit_one(&client, G, 1, &id, 40).await?,
        err(0),
    )?;
    same(
        "OffsetFetch v8 after committing 100 then 40",
        fetch_offsets(&client, G, &[0]).await?,
        vec![(0, 40, -1, String::new())],
    )
}

// ---------------------------------------------------------------------------------------------
// Leaving, describing, listing, deleting, expiring.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn leave_group_v3_removes_each_member_and_the_group_is_empty_when_the_last_leaves(
) -> Result<()> {
    const G: &str = "leaving";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    let a = connect(at, "consumer-a").await?;
    let b = connect(at, "consumer-b").await?;
    let (a_id, b_id) = two_members(&a, &b, G).await?;

    same(
        "LeaveGroup v3 of b",
        leave(&a, G, &[&b_id]).await?,
        (err(0), vec![err(0)]),
    )?;
    let ids: Vec<String> = describe(&a, G)
        .await?
        .members
        .iter()
        .map(|m| m.member_id.to_string())
        .collect();
    same("members after b left", ids, vec![a_id.clone()])?;
    let beat = heartbeat(&b, G, 2, &b_id, None).await?;
    code_is("Heartbeat of b after it left", beat, Some(UnknownMemberId))?;

    same(
        "LeaveGroup v3 of a",
        leave(&a, G, &[&a_id]).await?,
        (err(0), vec![err(0)]),
    )?;
    let described = describe(&a, G).await?;
    code_is(
        "DescribeGroups after the last member left",
        described.error_code,
        None,
    )?;
    same(
        "state after the last member left",
        described.group_state.as_str(),
        "Empty",
    )?;
    same(
        "members after the last member left",
        described.members.len(),
        0,
    )
}

#[tokio::test]
async fn leave_group_of_an_unknown_member_gets_unknown_member_id_for_that_member_only() -> Result<()>
{
    const G: &str = "leaving-strangers";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let id = stable_member(&client, G).await?;
    same(
        "LeaveGroup v3 of [\"nobody\", the member]",
        leave(&client, G, &["nobody", &id]).await?,
        (err(0), vec![err(UnknownMemberId.code()), err(0)]),
    )?;
    let described = describe(&client, G).await?;
    same(
        "state after the member left",
        described.group_state.as_str(),
        "Empty",
    )
}

#[tokio::test]
async fn describe_groups_shows_a_stable_group_and_list_groups_v4_filters_it_by_state() -> Result<()>
{
    const G: &str = "described";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    let a = connect(at, "consumer-a").await?;
    let b = connect(at, "consumer-b").await?;
    let (a_id, b_id) = two_members(&a, &b, G).await?;

    let described = describe(&a, G).await?;
    code_is("DescribeGroups v5", described.error_code, None)?;
    same("state", described.group_state.as_str(), "Stable")?;
    same("protocol type", described.protocol_type.as_str(), CONSUMER)?;
    same("protocol", described.protocol_data.as_str(), RANGE)?;
    let host = "/127.0.0.1".to_owned();
    let mut expected = vec![
        (
            a_id,
            "consumer-a".to_owned(),
            host.clone(),
            Bytes::from_static(META_A),
            Bytes::from_static(ASSIGN_A),
        ),
        (
            b_id,
            "consumer-b".to_owned(),
            host,
            Bytes::from_static(META_B),
            Bytes::from_static(ASSIGN_B),
        ),
    ];
    expected.sort();
    same(
        "members (id, client id, host, metadata, assignment)",
        described_members(&described),
        expected,
    )?;

    let list = |states: &[&str]| {
        ListGroupsRequest::default().with_states_filter(states.iter().map(|s| text(s)).collect())
    };
    let stable = within("ListGroups v4", a.send(list(&["Stable"]), 4)).await?;
    code_is("ListGroups v4 [Stable]", stable.error_code, None)?;
    let found: Vec<_> = stable
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.to_string(),
                g.protocol_type.to_string(),
                g.group_state.to_string(),
            )
        })
        .collect();
    same(
        "ListGroups v4 with states filter [Stable]",
        found,
        vec![(G.to_owned(), CONSUMER.to_owned(), "Stable".to_owned())],
    )?;
    let empty = within("ListGroups v4", a.send(list(&["Empty"]), 4)).await?;
    let ids: Vec<String> = empty
        .groups
        .iter()
        .map(|g| g.group_id.to_string())
        .collect();
    same("ListGroups v4 with states filter [Empty]", ids, vec![])
}

#[tokio::test]
async fn delete_groups_refuses_a_group_with_members_or_an_unknown_group_and_deletes_an_empty_one(
) -> Result<()> {
    const G: &str = "deleted";
    const UNKNOWN: &str = "never-was";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let delete =
        |group: &str| DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(group))]);
    let deleted = |answer: DeleteGroupsResponse| -> Vec<(String, String)> {
        answer
            .results
            .iter()
            .map(|r| (r.group_id.to_string(), err(r.error_code)))
            .collect()
    };

    let id = stable_member(&client, G).await?;
    same(
        "OffsetCommit",
        commit_one(&client, G, 1, &id, 33).await?,
        err(0),
    )?;
    let answer = within("DeleteGroups v2", client.send(delete(G), 2)).await?;
    same(
        "DeleteGroups v2 of a Stable group",
        deleted(answer),
        vec![(G.to_owned(), err(NonEmptyGroup.code()))],
    )?;

    same(
        "LeaveGroup v3 of its member",
        leave(&client, G, &[&id]).await?,
        (err(0), vec![err(0)]),
    )?;
    let answer = within("DeleteGroups v2", client.send(delete(G), 2)).await?;
    same(
        "DeleteGroups v2 of the Empty group",
        deleted(answer),
        vec![(G.to_owned(), err(0))],
    )?;
    same(
        "OffsetFetch v8 of the deleted group",
        fetch_offsets(&client, G, &[0, 1]).await?,
        vec![(0, -1, -1, String::new()), (1, -1, -1, String::new())],
    )?;

    let elsewhere = connect(coordinator(&cluster, UNKNOWN).await?, "admin").await?;
    let answer = within("DeleteGroups v2", elsewhere.send(delete(UNKNOWN), 2)).await?;
    same(
        "DeleteGroups v2 of a group that never existed",
        deleted(answer),
        vec![(UNKNOWN.to_owned(), err(GroupIdNotFound.code()))],
    )
}

#[tokio::test]
async fn a_member_that_stops_heartbeating_is_removed_after_its_session_timeout() -> Result<()> {
    const G: &str = "silent";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    let a = connect(at, "consumer-a").await?;
    let b = connect(at, "consumer-b").await?;
    // Both members have the minimum session timeout; a keeps heartbeating, b goes silent once
    // it has its assignment (its session started no sooner than `silent_since`).
    let silent_since = Instant::now();
    let (a_id, b_id) = two_members_with_session(&a, &b, G, MIN_SESSION_MS).await?;

    // a heartbeats every 250 ms until the group rebalances because b expired.
    let removed_after = loop {
        let beat = heartbeat(&a, G, 2, &a_id, None).await?;
        let elapsed = silent_since.elapsed();
        if beat == RebalanceInProgress.code() {
            break elapsed;
        }
        code_is("a's Heartbeat while b may still be alive", beat, None)?;
        ensure!(
            elapsed < Duration::from_secs(12),
            "b was still a member {elapsed:?} after it went silent, with a session timeout of {MIN_SESSION_MS} ms"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    ensure!(
        removed_after >= Duration::from_millis(MIN_SESSION_MS as u64),
        "b was removed {removed_after:?} after it went silent, expected no sooner than its session timeout of {MIN_SESSION_MS} ms"
    );
    let ids: Vec<String> = describe(&a, G)
        .await?
        .members
        .iter()
        .map(|m| m.member_id.to_string())
        .collect();
    same("members after b's session expired", ids, vec![a_id.clone()])?;
    let beat = heartbeat(&b, G, 2, &b_id, None).await?;
    code_is(
        "b's Heartbeat after its session expired",
        beat,
        Some(UnknownMemberId),
    )?;
    let rejoined = join(
        &a,
        join_request(G, &a_id, META_A).with_session_timeout_ms(MIN_SESSION_MS),
        9,
    )
    .await?;
    code_is("a's rejoin after b expired", rejoined.error_code, None)?;
    same("generation after b expired", rejoined.generation_id, 3)?;
    same(
        "members given to a",
        listed(&rejoined),
        vec![(a_id, Bytes::from_static(META_A))],
    )
}

// ---------------------------------------------------------------------------------------------
// Further places where Kafka's coordinator is checked to the letter.
// ---------------------------------------------------------------------------------------------

/// Kafka: `GroupCoordinator.doCurrentMemberJoinGroup` (3.x) and
/// `GroupMetadataManager.classicGroupJoinExistingMember` (4.x), state CompletingRebalance, same
/// metadata: the current generation, with `currentMemberMetadata` for the leader (a leader whose
/// JoinGroup answer was lost must get the members again to compute the assignment).
#[tokio::test]
async fn a_leader_rejoining_with_the_same_metadata_before_sync_group_gets_the_members_again(
) -> Result<()> {
    const G: &str = "lost-answer";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let joined = join_new(&client, G, META_A).await?;
    code_is("JoinGroup", joined.error_code, None)?;
    let id = joined.member_id.to_string();
    let again = join(&client, join_request(G, &id, META_A), 9).await?;
    code_is(
        "leader's JoinGroup again before SyncGroup",
        again.error_code,
        None,
    )?;
    same("its generation", again.generation_id, 1)?;
    same("its leader", again.leader.as_str(), &id)?;
    same(
        "members given to the leader on its repeated JoinGroup",
        listed(&again),
        vec![(id.clone(), Bytes::from_static(META_A))],
    )
}

/// Kafka: `GroupCoordinator.handleLeaveGroup` (3.x) and
/// `GroupMetadataManager.classicGroupLeave` (4.x): a pending member (one that got
/// MEMBER_ID_REQUIRED) leaves with NONE and stops holding up the rebalance.
#[tokio::test]
async fn a_member_id_handed_out_with_member_id_required_can_leave_before_joining() -> Result<()> {
    const G: &str = "changed-its-mind";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    let a = connect(at, "consumer-a").await?;
    let b = connect(at, "consumer-b").await?;
    let a_id = stable_member(&a, G).await?;
    let first = join(&b, join_request(G, "", META_B), 9).await?;
    code_is(
        "b's first JoinGroup",
        first.error_code,
        Some(MemberIdRequired),
    )?;
    let b_id = first.member_id.to_string();
    same(
        "LeaveGroup v3 of b's pending member id",
        leave(&b, G, &[&b_id]).await?,
        (err(0), vec![err(0)]),
    )?;
    // With b gone, the leader's rejoin completes the rebalance at once.
    let rejoined = tokio::time::timeout(
        Duration::from_secs(2),
        join(&a, join_request(G, &a_id, META_A), 9),
    )
    .await
    .map_err(|_| anyhow!("a's rejoin after b left: no answer in 2 s, expected one at once"))??;
    code_is("a's rejoin after b left", rejoined.error_code, None)?;
    same(
        "members given to a",
        listed(&rejoined),
        vec![(a_id, Bytes::from_static(META_A))],
    )
}

/// Kafka: `OffsetMetadataManager.isMetadataInvalid` (4.x) and
/// `GroupMetadataManager.validateOffsetMetadataLength` (3.x) compare Java's `String.length()`
/// (UTF-16 code units) with `offset.metadata.max.bytes`.
#[tokio::test]
async fn offset_metadata_is_measured_as_java_measures_a_string() -> Result<()> {
    const G: &str = "accented";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let id = stable_member(&client, G).await?;
    // 3000 UTF-16 code units, 6000 UTF-8 bytes.
    let metadata = "é".repeat(3_000);
    same(
        "OffsetCommit with metadata of 3000 'é' (3000 UTF-16 units, 6000 UTF-8 bytes)",
        commit(&client, G, 1, &id, &[(TOPIC, 0, 8, -1, &metadata)]).await?,
        committed(&[(TOPIC, 0, None)]),
    )
}

/// Kafka 4.x: `OffsetMetadataManager.validateOffsetCommit` throws GROUP_ID_NOT_FOUND for a
/// group that does not exist when the generation is not -1 and the request is v9+
/// (ILLEGAL_GENERATION before v9).
#[tokio::test]
async fn offset_commit_v9_with_a_generation_to_an_unknown_group_gets_group_id_not_found(
) -> Result<()> {
    const G: &str = "no-such-group";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let partition = OffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(1);
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(G)))
        .with_generation_id_or_member_epoch(1)
        .with_member_id(text("m"))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![partition])]);
    for (v, expected) in [(8, IllegalGeneration), (9, GroupIdNotFound)] {
        let what = format!("OffsetCommit v{v}");
        let answer = within(&what, client.send(request.clone(), v)).await?;
        let codes: Vec<String> = answer
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| err(p.error_code)))
            .collect();
        same(
            &format!("OffsetCommit v{v} with generation 1 to a group that does not exist"),
            codes,
            vec![err(expected.code())],
        )?;
    }
    Ok(())
}

/// Kafka: `GroupMetadata.summary` (3.x) and `GroupMetadataManager.describeGroups` (4.x) give the
/// protocol and the members' metadata and assignments only while Stable; otherwise protocol ""
/// and members without metadata (`describeNoMetadata`).
#[tokio::test]
async fn describe_groups_of_a_group_that_is_not_stable_shows_no_protocol_and_no_member_metadata(
) -> Result<()> {
    const G: &str = "half-way";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let joined = join_new(&client, G, META_A).await?;
    code_is("JoinGroup", joined.error_code, None)?;
    let described = describe(&client, G).await?;
    same(
        "state after JoinGroup",
        described.group_state.as_str(),
        "CompletingRebalance",
    )?;
    same(
        "protocol while CompletingRebalance",
        described.protocol_data.as_str(),
        "",
    )?;
    let members: Vec<_> = described_members(&described)
        .into_iter()
        .map(|(id, _, _, metadata, assignment)| (id, metadata, assignment))
        .collect();
    same(
        "members (id, metadata, assignment) while CompletingRebalance",
        members,
        vec![(joined.member_id.to_string(), Bytes::new(), Bytes::new())],
    )
}

/// Kafka: `GroupCoordinator.validateCurrentMember` (3.x) and `ClassicGroup.validateMember`
/// (4.x): a group instance id that no member has is UNKNOWN_MEMBER_ID, even from a member.
#[tokio::test]
async fn a_group_instance_id_that_no_member_has_gets_unknown_member_id() -> Result<()> {
    const G: &str = "impostor";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "consumer-a").await?;
    let id = stable_member(&client, G).await?;
    let beat = heartbeat(&client, G, 1, &id, Some("nobody")).await?;
    code_is(
        "Heartbeat of a dynamic member with group instance id \"nobody\"",
        beat,
        Some(UnknownMemberId),
    )
}

/// Kafka: `KafkaApis.handleOffsetCommitRequest` answers a commit whose partitions are all of
/// unknown topics without asking the coordinator, so no group comes into being.
#[tokio::test]
async fn offset_commit_naming_only_unknown_topics_creates_no_group() -> Result<()> {
    const G: &str = "ghost";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "admin").await?;
    same(
        "OffsetCommit with generation -1 of nope-0 only",
        commit(&client, G, -1, "", &[("nope", 0, 1, -1, "")]).await?,
        committed(&[("nope", 0, Some(UnknownTopicOrPartition))]),
    )?;
    let described = describe(&client, G).await?;
    same(
        "state of the group id afterwards",
        described.group_state.as_str(),
        "Dead",
    )?;
    let listed = within(
        "ListGroups v4",
        client.send(ListGroupsRequest::default(), 4),
    )
    .await?;
    let ids: Vec<String> = listed
        .groups
        .iter()
        .map(|g| g.group_id.to_string())
        .collect();
    same("groups listed afterwards", ids, vec![])
}
