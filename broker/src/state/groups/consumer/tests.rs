//! The consumer group state machine without sockets: timers fence members, a static member's
//! place is kept for its replacement, a coordinator move keeps the group.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::{HeartbeatRequest, MemberState, Partitions};
use crate::state::groups::Groups;

const T: Uuid = Uuid::from_u128(7);

fn topics() -> BTreeMap<String, (Uuid, i32)> {
    BTreeMap::from([("t".to_owned(), (T, 4))])
}

fn groups() -> Groups {
    let mut g = Groups::default();
    g.consumer_config.assignment_interval = Duration::ZERO;
    g
}

fn join(member: &str) -> HeartbeatRequest {
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

fn beat(member: &str, epoch: i32, owned: Option<&[i32]>) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "g".to_owned(),
        member_id: member.to_owned(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: owned.map(|ps| Partitions::from([(T, ps.iter().copied().collect())])),
        ..HeartbeatRequest::default()
    }
}

fn owned(g: &Groups, member: &str) -> BTreeSet<i32> {
    let cg = g
        .get("g")
        .and_then(|g| g.consumer.as_deref())
        .expect("a consumer group");
    cg.members[member]
        .assigned_partitions()
        .remove(&T)
        .unwrap_or_default()
}

#[test]
fn a_member_whose_session_expires_is_fenced_and_the_group_epoch_moves_on() {
    let (mut g, t0) = (groups(), Instant::now());
    g.consumer_heartbeat(join("a"), &topics(), t0).unwrap();
    let b = g.consumer_heartbeat(join("b"), &topics(), t0).unwrap();
    g.consumer_heartbeat(
        beat("b", b.member_epoch, None),
        &topics(),
        t0 + Duration::from_secs(30),
    )
    .unwrap();
    let epoch = g.get("g").unwrap().consumer.as_ref().unwrap().group_epoch;
    g.tick(t0 + Duration::from_secs(44), |_| true);
    assert_eq!(
        g.get("g").unwrap().consumer.as_ref().unwrap().members.len(),
        2
    );
    g.tick(t0 + Duration::from_secs(46), |_| true);
    let cg = g.get("g").unwrap().consumer.as_ref().unwrap();
    assert_eq!(
        cg.members.keys().collect::<Vec<_>>(),
        ["b"],
        "a's session of 45 s expired"
    );
    assert_eq!(cg.group_epoch, epoch + 1);
}

#[test]
fn a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() {
    let (mut g, t0) = (groups(), Instant::now());
    let a = g.consumer_heartbeat(join("a"), &topics(), t0).unwrap();
    g.consumer_heartbeat(join("b"), &topics(), t0).unwrap();
    let asked = g
        .consumer_heartbeat(
            beat("a", a.member_epoch, Some(&[0, 1, 2, 3])),
            &topics(),
            t0,
        )
        .unwrap();
    assert_eq!(asked.member_epoch, a.member_epoch, "still revoking");
    let cg = g.get("g").unwrap().consumer.as_ref().unwrap();
    assert_eq!(cg.members["a"].state, MemberState::UnrevokedPartitions);
    // Heartbeats keep its session, not its revocation, alive.
    let later = t0 + Duration::from_secs(20);
    g.consumer_heartbeat(
        beat("a", a.member_epoch, Some(&[0, 1, 2, 3])),
        &topics(),
        later,
    )
    .unwrap();
    g.tick(t0 + Duration::from_secs(31), |_| true);
    let cg = g.get("g").unwrap().consumer.as_ref().unwrap();
    assert!(
        !cg.members.contains_key("a"),
        "fenced after its 30 s rebalance timeout"
    );
}

#[test]
fn a_static_member_away_keeps_its_partitions_for_the_member_that_takes_its_instance_id() {
    let (mut g, t0) = (groups(), Instant::now());
    let mut first = join("s1");
    first.instance_id = Some("i".to_owned());
    let s1 = g.consumer_heartbeat(first, &topics(), t0).unwrap();
    let mut away = beat("s1", -2, None);
    away.instance_id = Some("i".to_owned());
    assert_eq!(
        g.consumer_heartbeat(away, &topics(), t0)
            .unwrap()
            .member_epoch,
        -2
    );
    assert_eq!(
        owned(&g, "s1"),
        BTreeSet::from([0, 1, 2, 3]),
        "kept while away"
    );
    let mut second = join("s2");
    second.instance_id = Some("i".to_owned());
    let s2 = g.consumer_heartbeat(second, &topics(), t0).unwrap();
    assert_eq!(
        s2.member_epoch, s1.member_epoch,
        "no rebalance: the group epoch stays"
    );
    assert_eq!(owned(&g, "s2"), BTreeSet::from([0, 1, 2, 3]));
}

#[test]
fn a_coordinator_move_keeps_the_group_and_restarts_sessions() {
    let (mut g, t0) = (groups(), Instant::now());
    let a = g.consumer_heartbeat(join("a"), &topics(), t0).unwrap();
    let moved_at = t0 + Duration::from_secs(40);
    g.coordinator_moved(|_| true, moved_at);
    g.tick(t0 + Duration::from_secs(50), |_| true);
    let answer = g
        .consumer_heartbeat(
            beat("a", a.member_epoch, None),
            &topics(),
            t0 + Duration::from_secs(50),
        )
        .unwrap();
    assert_eq!(answer.member_epoch, a.member_epoch);
    assert_eq!(owned(&g, "a"), BTreeSet::from([0, 1, 2, 3]));
}

#[test]
fn a_topic_only_a_member_that_left_subscribed_to_does_not_bump_the_group_epoch() {
    let (mut g, t0) = (groups(), Instant::now());
    let epoch = |g: &Groups| g.get("g").unwrap().consumer.as_ref().unwrap().group_epoch;
    let mut a = join("a");
    a.subscribed_topic_names = Some(vec!["x".to_owned(), "t".to_owned(), "x".to_owned()]);
    g.consumer_heartbeat(a, &topics(), t0).unwrap();
    let b = g.consumer_heartbeat(join("b"), &topics(), t0).unwrap();
    let with_x = |n: i32| {
        let mut t = topics();
        t.insert("x".to_owned(), (Uuid::from_u128(8), n));
        t
    };
    // `x` appears: a subscribes to it, so the group epoch moves on.
    let before = epoch(&g);
    let b = g
        .consumer_heartbeat(beat("b", b.member_epoch, None), &with_x(1), t0)
        .unwrap();
    assert_eq!(epoch(&g), before + 1, "x created, a subscribed");
    // a leaves; `x` grows: nobody subscribes to it now, so only the leave bumped the epoch.
    let leave = HeartbeatRequest {
        member_epoch: -1,
        ..beat("a", 0, None)
    };
    g.consumer_heartbeat(leave, &with_x(1), t0).unwrap();
    assert_eq!(epoch(&g), before + 2, "a's leave");
    // b's next heartbeat drops `x` from the group's subscription metadata (kmock does it at
    // the heartbeat after a leave, not at the leave as Kafka does); then `x` grows: nobody
    // subscribes to it now, so the group epoch stays.
    let b = g
        .consumer_heartbeat(beat("b", b.member_epoch, None), &with_x(1), t0)
        .unwrap();
    let settled = epoch(&g);
    let b = g
        .consumer_heartbeat(beat("b", b.member_epoch, None), &with_x(2), t0)
        .unwrap();
    assert_eq!((epoch(&g), b.member_epoch > 0), (settled, true));
}
