//! Classic group membership without the wire: a static member's replacement.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::{Groups, JoinRequest, Pending};

fn static_join(member_id: &str, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        group_id: "g".to_owned(),
        member_id: member_id.to_owned(),
        group_instance_id: Some("i1".to_owned()),
        client_id: "c".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".to_owned(),
        protocols: protocols
            .iter()
            .map(|p| ((*p).to_owned(), Bytes::new()))
            .collect(),
        require_known_member_id: true,
        supports_skip_assignment: true,
    }
}

/// The answer of a request the group answered before returning (at once or by its waiter).
fn answered<T>(pending: Pending<T>) -> T {
    match pending {
        Pending::Now(result) => result,
        Pending::Wait(mut rx) => rx.try_recv().expect("answered already"),
    }
}

/// A static member alone in a Stable group, leading it: its member id and generation.
fn stable(groups: &mut Groups, now: Instant) -> (String, i32) {
    let joined = answered(groups.join(static_join("", &["range"]), now));
    assert_eq!(joined.error, None);
    let member = joined.member_id.clone();
    let assignment = vec![(member.clone(), Bytes::from_static(b"a"))];
    let synced = groups.sync(
        "g",
        joined.generation_id,
        &member,
        Some("i1"),
        None,
        None,
        assignment,
        now,
    );
    assert!(answered(synced).is_ok(), "the leader's sync completes");
    (member, joined.generation_id)
}

#[tokio::test(start_paused = true)]
async fn a_new_instance_of_a_static_member_replaces_it_in_a_stable_group_without_a_rebalance() {
    let (mut groups, now) = (Groups::default(), Instant::now());
    let (old, generation) = stable(&mut groups, now);
    let replaced = answered(groups.join(static_join("", &["range"]), now));
    assert_eq!(replaced.error, None);
    assert_ne!(replaced.member_id, old);
    assert_eq!(replaced.generation_id, generation, "no rebalance");
    assert_eq!(
        replaced.leader, replaced.member_id,
        "the leader's id moves with it"
    );
    assert_eq!(
        replaced.members.len(),
        1,
        "the leader is told of its members"
    );
    assert_eq!(
        groups.heartbeat("g", generation, &old, Some("i1"), now),
        Err(ResponseError::FencedInstanceId)
    );
    assert_eq!(
        groups.heartbeat("g", generation, &replaced.member_id, Some("i1"), now),
        Ok(())
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_instance_that_changes_the_group_s_protocol_rebalances_it() {
    let (mut groups, now) = (Groups::default(), Instant::now());
    let (old, generation) = stable(&mut groups, now);
    let replaced = answered(groups.join(static_join("", &["roundrobin", "range"]), now));
    assert_eq!(replaced.error, None);
    assert_eq!(replaced.generation_id, generation + 1, "a rebalance");
    assert_eq!(
        groups.heartbeat("g", generation, &old, Some("i1"), now),
        Err(ResponseError::FencedInstanceId)
    );
}
