//! KIP-848's online migration without sockets: a classic group upgraded by a heartbeat, its
//! classic member reconciled through JoinGroup, SyncGroup and Heartbeat, the group downgraded
//! when the consumer-protocol member leaves, and each policy's refusals.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    consumer_protocol_assignment, ConsumerProtocolAssignment, ConsumerProtocolSubscription,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use super::{HeartbeatRequest, MigrationPolicy, Partitions};
use crate::state::groups::{GroupState, Groups, JoinRequest, Pending};

const T: Uuid = Uuid::from_u128(7);

fn topics() -> BTreeMap<String, (Uuid, i32)> {
    BTreeMap::from([("t".to_owned(), (T, 2))])
}

fn groups(policy: MigrationPolicy) -> Groups {
    let mut g = Groups::default();
    g.consumer_config.assignment_interval = Duration::ZERO;
    g.consumer_config.migration_policy = policy;
    g
}

fn subscription() -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_static_str("t")])
        .encode(&mut buf, 1)
        .unwrap();
    buf.freeze()
}

fn assignment(partitions: &[i32]) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![consumer_protocol_assignment::TopicPartition::default(
        )
        .with_topic(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(partitions.to_vec())])
        .encode(&mut buf, 1)
        .unwrap();
    buf.freeze()
}

fn partitions_of(bytes: &Bytes) -> Vec<i32> {
    let mut buf = bytes.slice(2..);
    let a = ConsumerProtocolAssignment::decode(&mut buf, 1).unwrap();
    a.assigned_partitions
        .into_iter()
        .flat_map(|t| t.partitions)
        .collect()
}

fn classic_join(member_id: &str) -> JoinRequest {
    JoinRequest {
        group_id: "g".to_owned(),
        member_id: member_id.to_owned(),
        group_instance_id: None,
        client_id: "c".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".to_owned(),
        protocols: vec![("range".to_owned(), subscription())],
        require_known_member_id: false,
        supports_skip_assignment: true,
    }
}

fn modern_join(member: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "g".to_owned(),
        member_id: member.to_owned(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".to_owned()]),
        owned: Some(Partitions::new()),
        ..HeartbeatRequest::default()
    }
}

/// The answer of a request the group answered before returning (at once or by its waiter).
fn answered<T>(pending: Pending<T>) -> T {
    match pending {
        Pending::Now(result) => result,
        Pending::Wait(mut rx) => rx.try_recv().expect("answered already"),
    }
}

/// A classic member alone in a Stable group owning both partitions: its id and generation.
fn stable_classic(g: &mut Groups, now: Instant) -> (String, i32) {
    let joined = answered(g.join_with(classic_join(""), &topics(), now));
    let (id, generation) = (joined.member_id.clone(), joined.generation_id);
    let given = vec![(id.clone(), assignment(&[0, 1]))];
    answered(g.sync("g", generation, &id, None, None, None, given, now)).unwrap();
    (id, generation)
}

#[test]
fn a_heartbeat_upgrades_the_group_and_the_classic_member_reconciles_through_rejoining() {
    let (mut g, now) = (groups(MigrationPolicy::Bidirectional), Instant::now());
    let (classic, generation) = stable_classic(&mut g, now);
    let answer = g
        .consumer_heartbeat(modern_join("m"), &topics(), now)
        .unwrap();
    assert_eq!(answer.member_epoch, generation + 1);
    // The classic member still owns both: the new member waits for one.
    assert_eq!(answer.assignment, Some(Partitions::new()));
    assert_eq!(g.get("g").unwrap().group_type(), "consumer");
    assert_eq!(g.take_conversions().len(), 1);
    assert_eq!(
        g.heartbeat("g", generation, &classic, None, now),
        Err(ResponseError::RebalanceInProgress)
    );
    let rejoined = answered(g.join_with(classic_join(&classic), &topics(), now));
    assert_eq!(rejoined.error, None);
    assert_eq!(rejoined.generation_id, generation + 1);
    assert_eq!(rejoined.protocol_name.as_deref(), Some("range"));
    let synced = answered(g.sync(
        "g",
        rejoined.generation_id,
        &classic,
        None,
        None,
        Some("range"),
        Vec::new(),
        now,
    ));
    assert_eq!(partitions_of(&synced.unwrap().assignment).len(), 1);
    assert_eq!(
        g.heartbeat("g", rejoined.generation_id, &classic, None, now),
        Ok(())
    );
    // Its commits are judged by its generation as the member epoch.
    let cg = g.get("g").unwrap().consumer.as_deref().unwrap();
    assert!(cg
        .check_commit(&classic, None, rejoined.generation_id, false, 2)
        .is_ok());
    assert_eq!(
        cg.check_commit(&classic, None, rejoined.generation_id + 1, false, 2)
            .err(),
        Some(ResponseError::IllegalGeneration)
    );
}

#[test]
fn the_last_consumer_member_leaving_downgrades_the_group_and_a_rebalance_starts() {
    let (mut g, now) = (groups(MigrationPolicy::Bidirectional), Instant::now());
    let (classic, _) = stable_classic(&mut g, now);
    let joined = g
        .consumer_heartbeat(modern_join("m"), &topics(), now)
        .unwrap();
    g.take_conversions();
    let leave = HeartbeatRequest {
        member_epoch: -1,
        ..modern_join("m")
    };
    g.consumer_heartbeat(leave, &topics(), now).unwrap();
    let group = g.get("g").unwrap();
    assert_eq!(group.group_type(), "classic");
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    // The classic generation is the group epoch (the leave does not move it: the group goes).
    assert_eq!(group.generation_id, joined.member_epoch);
    assert_eq!(group.members().len(), 1);
    let conversions = g.take_conversions();
    assert_eq!(
        (conversions[0].to, conversions[0].member_id.as_str()),
        ("classic", "m")
    );
    assert_eq!(
        g.heartbeat("g", group_generation(&g), &classic, None, now),
        Err(ResponseError::RebalanceInProgress)
    );
}

fn group_generation(g: &Groups) -> i32 {
    g.get("g").unwrap().generation_id
}

#[test]
fn each_policy_refuses_what_it_does_not_allow() {
    for policy in [MigrationPolicy::Downgrade, MigrationPolicy::Disabled] {
        let (mut g, now) = (groups(policy), Instant::now());
        stable_classic(&mut g, now);
        let (e, message) = g
            .consumer_heartbeat(modern_join("m"), &topics(), now)
            .unwrap_err();
        assert_eq!(e, ResponseError::GroupIdNotFound, "{policy:?}");
        assert_eq!(
            message,
            "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
        );
        assert_eq!(g.get("g").unwrap().group_type(), "classic");
    }
    // A consumer group takes no classic member with the policy `disabled`.
    let (mut g, now) = (groups(MigrationPolicy::Disabled), Instant::now());
    g.consumer_heartbeat(modern_join("m"), &topics(), now)
        .unwrap();
    let refused = answered(g.join_with(classic_join(""), &topics(), now));
    assert_eq!(
        refused.error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
    // With `upgrade`, the consumer member's leave fences it and the group stays a consumer group.
    let (mut g, now) = (groups(MigrationPolicy::Upgrade), Instant::now());
    stable_classic(&mut g, now);
    g.consumer_heartbeat(modern_join("m"), &topics(), now)
        .unwrap();
    let leave = HeartbeatRequest {
        member_epoch: -1,
        ..modern_join("m")
    };
    g.consumer_heartbeat(leave, &topics(), now).unwrap();
    assert_eq!(g.get("g").unwrap().group_type(), "consumer");
}

#[test]
fn a_group_of_another_protocol_type_is_not_upgraded() {
    let (mut g, now) = (groups(MigrationPolicy::Bidirectional), Instant::now());
    let join = JoinRequest {
        protocol_type: "connect".to_owned(),
        ..classic_join("")
    };
    answered(g.join_with(join, &topics(), now));
    let (e, message) = g
        .consumer_heartbeat(modern_join("m"), &topics(), now)
        .unwrap_err();
    assert_eq!(e, ResponseError::GroupIdNotFound);
    assert!(message.ends_with("because the group does not use the consumer embedded protocol."));
}

#[test]
fn a_consumer_member_fenced_by_its_session_timeout_downgrades_the_group_too() {
    let (mut g, t0) = (groups(MigrationPolicy::Bidirectional), Instant::now());
    let (classic, _) = stable_classic(&mut g, t0);
    g.consumer_heartbeat(modern_join("m"), &topics(), t0)
        .unwrap();
    g.take_conversions();
    // The classic member rejoins and heartbeats; the consumer member goes silent.
    let rejoined = answered(g.join_with(classic_join(&classic), &topics(), t0));
    let later = t0 + Duration::from_secs(25);
    answered(g.sync(
        "g",
        rejoined.generation_id,
        &classic,
        None,
        None,
        None,
        Vec::new(),
        later,
    ))
    .unwrap();
    g.tick(t0 + Duration::from_secs(46), |_| true);
    assert_eq!(g.get("g").unwrap().group_type(), "classic");
    let conversions = g.take_conversions();
    assert_eq!(conversions.len(), 1);
    assert_eq!(
        (conversions[0].to, conversions[0].member_id.as_str()),
        ("classic", "m")
    );
}

/// A consumer group of a classic member and the consumer-protocol static member `m` with
/// instance id `i`.
fn with_static_consumer_member(g: &mut Groups, now: Instant) -> String {
    let (classic, _) = stable_classic(g, now);
    let join = HeartbeatRequest {
        instance_id: Some("i".to_owned()),
        ..modern_join("m")
    };
    g.consumer_heartbeat(join, &topics(), now).unwrap();
    g.take_conversions();
    classic
}

fn static_classic_join(member_id: &str) -> JoinRequest {
    JoinRequest {
        group_instance_id: Some("i".to_owned()),
        ..classic_join(member_id)
    }
}

#[test]
fn a_classic_static_member_replaces_a_consumer_member_and_the_group_stays_without_downgrade() {
    let (mut g, now) = (groups(MigrationPolicy::Upgrade), Instant::now());
    with_static_consumer_member(&mut g, now);
    let joined = answered(g.join_with(static_classic_join(""), &topics(), now));
    assert_eq!(joined.error, None);
    let cg = g.get("g").unwrap().consumer.as_deref().unwrap();
    // Reconciled at once to the group epoch, as any classic join.
    assert_eq!(joined.generation_id, cg.group_epoch);
    assert_eq!(cg.members.len(), 2);
    assert!(!cg.members.contains_key("m"));
    let moved = &cg.members[&joined.member_id];
    assert_eq!(moved.instance_id.as_deref(), Some("i"));
    assert!(moved.classic.is_some());
    assert!(g.take_conversions().is_empty());
}

#[test]
fn a_classic_static_member_replacing_the_last_consumer_member_downgrades_the_group() {
    let (mut g, now) = (groups(MigrationPolicy::Bidirectional), Instant::now());
    let classic = with_static_consumer_member(&mut g, now);
    let joined = answered(g.join_with(static_classic_join(""), &topics(), now));
    assert_eq!(joined.error, Some(ResponseError::RebalanceInProgress));
    let group = g.get("g").unwrap();
    assert_eq!(group.group_type(), "classic");
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    let mut ids: Vec<String> = group.members().into_iter().map(|m| m.0).collect();
    ids.sort();
    let mut want = vec![classic.clone(), joined.member_id.clone()];
    want.sort();
    assert_eq!(ids, want);
    let conversions = g.take_conversions();
    assert_eq!(conversions.len(), 1);
    assert_eq!(conversions[0].to, "classic");
}

#[test]
fn a_classic_static_join_with_a_member_id_must_own_its_instance() {
    let (mut g, now) = (groups(MigrationPolicy::Upgrade), Instant::now());
    let classic = with_static_consumer_member(&mut g, now);
    let fenced = answered(g.join_with(static_classic_join("other"), &topics(), now));
    assert_eq!(fenced.error, Some(ResponseError::FencedInstanceId));
    let unknown = JoinRequest {
        group_instance_id: Some("unknown".to_owned()),
        ..classic_join(&classic)
    };
    let unknown = answered(g.join_with(unknown, &topics(), now));
    assert_eq!(unknown.error, Some(ResponseError::UnknownMemberId));
    let cg = g.get("g").unwrap().consumer.as_deref().unwrap();
    assert_eq!(cg.members.len(), 2);
    assert!(cg.members["m"].classic.is_none());
}

#[test]
fn a_refused_heartbeat_leaves_the_classic_group_as_it_was() {
    let (mut g, now) = (groups(MigrationPolicy::Bidirectional), Instant::now());
    g.consumer_config.max_size = 1;
    let (classic, generation) = stable_classic(&mut g, now);
    let refused = g
        .consumer_heartbeat(modern_join("m"), &topics(), now)
        .unwrap_err();
    assert_eq!(refused.0, ResponseError::GroupMaxSizeReached);
    let group = g.get("g").unwrap();
    assert_eq!(group.group_type(), "classic");
    assert_eq!(group.state(), GroupState::Stable);
    assert!(g.take_conversions().is_empty());
    assert_eq!(g.heartbeat("g", generation, &classic, None, now), Ok(()));
}

#[test]
fn a_leave_group_of_many_members_named_twice_fences_each_once_and_moves_the_epoch_once() {
    let (mut g, now) = (groups(MigrationPolicy::Bidirectional), Instant::now());
    g.consumer_config.max_size = 1000;
    stable_classic(&mut g, now);
    g.consumer_heartbeat(modern_join("m"), &topics(), now)
        .unwrap();
    let joined: Vec<String> = (0..300)
        .map(|_| answered(g.join_with(classic_join(""), &topics(), now)).member_id)
        .collect();
    let epoch = g.get("g").unwrap().consumer.as_deref().unwrap().group_epoch;
    let leaving: Vec<(String, Option<String>)> = joined
        .iter()
        .chain(joined.iter())
        .map(|id| (id.clone(), None))
        .collect();
    let answers = g.leave("g", &leaving, now);
    assert_eq!(answers.len(), 600);
    assert!(answers.iter().all(Result::is_ok));
    let cg = g.get("g").unwrap().consumer.as_deref().unwrap();
    // The first classic member and `m` stay: no downgrade.
    assert_eq!(cg.members.len(), 2);
    assert!(cg.members.contains_key("m"));
    assert_eq!(cg.group_epoch, epoch + 1);
}

#[test]
fn a_consumer_static_member_replaces_a_classic_member_holding_its_instance_id() {
    let (mut g, now) = (groups(MigrationPolicy::Bidirectional), Instant::now());
    stable_classic(&mut g, now);
    g.consumer_heartbeat(modern_join("m"), &topics(), now)
        .unwrap();
    let classic = answered(g.join_with(static_classic_join(""), &topics(), now));
    assert_eq!(classic.error, None);
    let join = HeartbeatRequest {
        instance_id: Some("i".to_owned()),
        ..modern_join("n")
    };
    let answer = g.consumer_heartbeat(join, &topics(), now).unwrap();
    assert_eq!(answer.member_id, "n");
    let cg = g.get("g").unwrap().consumer.as_deref().unwrap();
    assert!(!cg.members.contains_key(&classic.member_id));
    assert!(cg.members["n"].classic.is_none());
    assert_eq!(cg.members["n"].instance_id.as_deref(), Some("i"));
}

#[test]
fn a_classic_join_to_a_consumer_group_needs_a_protocol_every_classic_member_names() {
    let (mut g, now) = (groups(MigrationPolicy::Bidirectional), Instant::now());
    stable_classic(&mut g, now);
    g.consumer_heartbeat(modern_join("m"), &topics(), now)
        .unwrap();
    let with = |protocols: &[&str]| JoinRequest {
        protocols: protocols
            .iter()
            .map(|p| ((*p).to_owned(), subscription()))
            .collect(),
        ..classic_join("")
    };
    // The classic member names only `range`; the consumer-protocol member does not count.
    let refused = answered(g.join_with(with(&["roundrobin"]), &topics(), now));
    assert_eq!(
        refused.error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
    let joined = answered(g.join_with(with(&["roundrobin", "range"]), &topics(), now));
    assert_ne!(joined.error, Some(ResponseError::InconsistentGroupProtocol));
}
