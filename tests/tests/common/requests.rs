//! Group request builders for scripted members (kmock-client), in Kafka's terms: JoinGroup,
//! SyncGroup, Heartbeat and OffsetCommit as a consumer sends them, the consumer protocol's
//! subscription and assignment bytes, and the coordinator lookup.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use anyhow::{ensure, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use kmock_client::Client;

use super::{err, name, text};

/// The protocol type of consumer groups.
pub const CONSUMER: &str = "consumer";
/// The one assignor scripted members offer.
pub const RANGE: &str = "range";
/// Session and rebalance timeout of [`join_group`]: long enough that nobody expires in a test.
pub const LONG_MS: i32 = 30_000;

/// A JoinGroup of `member_id` (empty on a first join) to `group`, protocol type
/// [`CONSUMER`] offering [`RANGE`] with `metadata`, session and rebalance timeouts [`LONG_MS`]
/// (change them with `with_session_timeout_ms` / `with_rebalance_timeout_ms`). Valid from v1.
pub fn join_group(group: &str, member_id: &str, metadata: Bytes) -> JoinGroupRequest {
    join_group_offering(group, member_id, &[RANGE], metadata)
}

/// [`join_group`] offering `protocols` (assignor names, in preference order), each with
/// `metadata`.
pub fn join_group_offering(
    group: &str,
    member_id: &str,
    protocols: &[&str],
    metadata: Bytes,
) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_session_timeout_ms(LONG_MS)
        .with_rebalance_timeout_ms(LONG_MS)
        .with_member_id(text(member_id))
        .with_protocol_type(text(CONSUMER))
        .with_protocols(
            protocols
                .iter()
                .map(|name| {
                    JoinGroupRequestProtocol::default()
                        .with_name(text(name))
                        .with_metadata(metadata.clone())
                })
                .collect(),
        )
}

/// A SyncGroup of `member_id` in `generation`; `assignments` (member id, assignment bytes) are
/// the leader's, empty for a follower. Valid at every version; from v5 Kafka wants the protocol
/// type and name too: see [`with_protocol`].
pub fn sync_group(
    group: &str,
    generation: i32,
    member_id: &str,
    assignments: &[(&str, Bytes)],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member_id))
        .with_assignments(
            assignments
                .iter()
                .map(|(id, bytes)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(text(id))
                        .with_assignment(bytes.clone())
                })
                .collect(),
        )
}

/// `request` naming protocol type [`CONSUMER`] and protocol [`RANGE`] (SyncGroup v5+).
pub fn with_protocol(request: SyncGroupRequest) -> SyncGroupRequest {
    with_protocol_named(request, RANGE)
}

/// `request` naming protocol type [`CONSUMER`] and protocol `protocol`, the one the group
/// chose (SyncGroup v5+).
pub fn with_protocol_named(request: SyncGroupRequest, protocol: &str) -> SyncGroupRequest {
    request
        .with_protocol_type(Some(text(CONSUMER)))
        .with_protocol_name(Some(text(protocol)))
}

/// A Heartbeat of `member_id` of `group` in `generation`.
pub fn heartbeat(group: &str, generation: i32, member_id: &str) -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member_id))
}

/// An OffsetCommit to `group` of `(partition, offset)`s of `topic`, by `member_id` in
/// `generation` (-1 and "" for a commit from outside group management, as admin tools send).
pub fn offset_commit(
    group: &str,
    generation: i32,
    member_id: &str,
    topic: &str,
    offsets: &[(i32, i64)],
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(text(member_id))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(
                offsets
                    .iter()
                    .map(|&(partition, offset)| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(partition)
                            .with_committed_offset(offset)
                    })
                    .collect(),
            )])
}

/// A `ConsumerProtocolSubscription` (version 0) of `topics`, as a member's JoinGroup metadata.
pub fn subscription(topics: &[&str]) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| text(t)).collect())
        .encode(&mut buf, 0)
        .expect("a subscription encodes");
    buf.freeze()
}

/// The topics of a member's subscription metadata, whatever its version.
///
/// # Errors
/// Metadata too short or not a consumer subscription.
pub fn subscribed_topics(mut metadata: Bytes) -> Result<Vec<String>> {
    ensure!(metadata.len() >= 2, "subscription metadata too short");
    let version = metadata.get_i16().min(3);
    let subscription = ConsumerProtocolSubscription::decode(&mut metadata, version)?;
    Ok(subscription.topics.iter().map(|t| t.to_string()).collect())
}

/// A `ConsumerProtocolAssignment` (version 0) of `partitions` of `topic`.
pub fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![AssignedTopic::default()
            .with_topic(name(topic))
            .with_partitions(partitions.to_vec())])
        .encode(&mut buf, 0)
        .expect("an assignment encodes");
    buf.freeze()
}

/// The partitions of `topic` in a SyncGroup assignment, whatever its version (none for empty
/// bytes).
///
/// # Errors
/// Bytes that are not a consumer assignment.
pub fn assigned_partitions(mut bytes: Bytes, topic: &str) -> Result<BTreeSet<i32>> {
    if bytes.is_empty() {
        return Ok(BTreeSet::new());
    }
    ensure!(bytes.len() >= 2, "assignment too short");
    let version = bytes.get_i16().min(3);
    let decoded = ConsumerProtocolAssignment::decode(&mut bytes, version)?;
    Ok(decoded
        .assigned_partitions
        .iter()
        .filter(|t| t.topic.0.as_str() == topic)
        .flat_map(|t| t.partitions.iter().copied())
        .collect())
}

/// `(node id, address)` of `group`'s coordinator, as FindCoordinator v4 asked of `client`
/// names it.
///
/// # Errors
/// The request failing, or an error in the answer.
pub async fn find_coordinator(client: &Client, group: &str) -> Result<(i32, SocketAddr)> {
    let request = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![text(group)]);
    let answer = client.send(request, 4).await?;
    let found = answer
        .coordinators
        .first()
        .ok_or_else(|| anyhow::anyhow!("FindCoordinator v4 for {group:?}: no coordinator"))?;
    ensure!(
        found.error_code == 0,
        "FindCoordinator v4 for {group:?}: {}",
        err(found.error_code)
    );
    let addr = format!("{}:{}", found.host.as_str(), found.port).parse()?;
    Ok((found.node_id.0, addr))
}

/// A client with `client_id` connected to `group`'s coordinator, found by asking `cluster`'s
/// first broker.
///
/// # Errors
/// The lookup or the connection failing.
pub async fn connect_to_coordinator(
    cluster: &kmock::Cluster,
    group: &str,
    client_id: &str,
) -> Result<Client> {
    let any = Client::connect(cluster.brokers()[0].addr).await?;
    let (_, addr) = find_coordinator(&any, group).await?;
    Ok(Client::connect_with_client_id(addr, client_id).await?)
}

/// A scripted member's first JoinGroup (v5, `join` without a member id): MEMBER_ID_REQUIRED
/// with the id to use (KIP-394), which is returned.
///
/// # Errors
/// Any other answer.
pub async fn fresh_member_id(client: &Client, join: JoinGroupRequest) -> Result<String> {
    let group = join.group_id.to_string();
    let answer = client.send(join.with_member_id(text("")), 5).await?;
    ensure!(
        answer.error_code == kafka_protocol::ResponseError::MemberIdRequired.code()
            && !answer.member_id.is_empty(),
        "a first JoinGroup v5 to {group} without a member id: got {} with member id {:?}, \
         expected MEMBER_ID_REQUIRED with the id to use",
        err(answer.error_code),
        answer.member_id.as_str()
    );
    Ok(answer.member_id.to_string())
}
