//! The group `wire_versions` sets up before its first request (a member of `g` that joined and
//! synced), and the JoinGroup and SyncGroup requests it sends at each version.

use super::*;

/// A JoinGroup of a consumer with one protocol.
pub(super) fn join(group_id: &str, v: i16, member_id: &str) -> JoinGroupRequest {
    let protocol = join_group_request::JoinGroupRequestProtocol::default()
        .with_name(text("range"))
        .with_metadata(Bytes::from_static(b"\0\0"));
    JoinGroupRequest::default()
        .with_group_id(group(group_id))
        .with_member_id(text(member_id))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(if v >= 1 { 10_000 } else { -1 })
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![protocol])
}

/// The member's SyncGroup at `v`, giving itself [`ASSIGNMENT`] as the group's leader (with the
/// protocol type and name that Kafka requires from v5).
pub(super) fn sync(f: &Fixture, v: i16) -> SyncGroupRequest {
    let request = if v >= 5 {
        SyncGroupRequest::default()
            .with_protocol_type(Some(text("consumer")))
            .with_protocol_name(Some(text("range")))
    } else {
        SyncGroupRequest::default()
    };
    request
        .with_group_id(group("g"))
        .with_generation_id(f.generation_id)
        .with_member_id(f.member_id.clone())
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(f.member_id.clone())
            .with_assignment(Bytes::from_static(ASSIGNMENT))])
}

/// The cluster, and group `g` with one member that has synced.
pub(super) async fn fixture() -> Result<Fixture> {
    let mut builder = Cluster::builder()
        .brokers(2)
        .topic("t", 2)
        .topic("grows", 1)
        .topic("txn", 1);
    for v in 1..=6 {
        builder = builder.topic(&format!("gone-v{v}"), 1);
    }
    let cluster = builder.start().await?;
    same(
        "leaders of t",
        (cluster.leader("t", 0), cluster.leader("t", 1)),
        (Some(1), Some(2)),
    )?;
    let client = connect_to(&cluster, 1).await?;
    let topic_id = client.metadata(Some(&["t"])).await?.topics[0].topic_id;
    let coordinator = connect_to(&cluster, cluster.coordinator("g")).await?;
    let first = coordinator.send(join("g", 5, ""), 5).await?;
    code_is("first join", first.error_code, Some(MemberIdRequired))?;
    let joined = coordinator.send(join("g", 5, &first.member_id), 5).await?;
    code_is("join", joined.error_code, None)?;
    let mut f = Fixture {
        cluster,
        topic_id,
        produced: 0,
        apis: 0,
        member_id: joined.member_id,
        generation_id: joined.generation_id,
    };
    let synced = coordinator.send(sync(&f, 5), 5).await?;
    code_is("sync", synced.error_code, None)?;
    let advertised = client.api_versions().await?.api_keys;
    let produce = advertised
        .iter()
        .find(|a| a.api_key == ApiKey::Produce as i16)
        .ok_or(anyhow!("Produce not advertised"))?;
    // Each Produce version appends one record to t/0.
    f.produced = i64::from(produce.max_version - produce.min_version + 1);
    f.apis = advertised.len();
    Ok(f)
}
