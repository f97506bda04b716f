//! Session and rebalance deadlines of the classic group protocol, checked against Apache
//! Kafka's group coordinator on Tokio's paused clock (`start_paused`): kmock's group timers
//! run on Tokio time (`Groups::tick` every 50 ms of it, broker/src/state/groups.rs), and a
//! paused clock moves only when
//! every task, the cluster's included, waits for a timer, so a deadline is met exactly, not
//! "within a while" of wall time on a loaded machine. The sockets are real loopback sockets:
//! a request written to one is readable at once, so the clock never moves while a request or
//! an answer is on its way.

mod common;

use common::classic_group::*;
use common::requests::fresh_member_id;
use tokio::time::Instant;

/// How often the coordinator checks its timers, in Tokio time (`Groups::tick`).
const TICK: Duration = Duration::from_millis(50);
/// Kafka's `group.min.session.timeout.ms`, as a duration.
const MIN_SESSION: Duration = Duration::from_millis(MIN_SESSION_MS as u64);

/// Kafka restarts a member's session when it answers its SyncGroup (and on each heartbeat):
/// b, silent from then on, is still a member 1 ms before its session timeout has passed, and
/// gone once it has (and the coordinator's next timer check has run).
#[tokio::test(start_paused = true)]
async fn a_member_that_stops_heartbeating_is_removed_after_its_session_timeout() -> Result<()> {
    const G: &str = "silent";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    let a = connect(at, "consumer-a").await?;
    let b = connect(at, "consumer-b").await?;
    let (a_id, b_id) = two_members_with_session(&a, &b, G, MIN_SESSION_MS).await?;
    // Both SyncGroups were just answered (the clock has not moved since).
    let synced = Instant::now();
    // a heartbeats every second (its own session must not end); b never again.
    for second in 1..MIN_SESSION.as_secs() {
        tokio::time::sleep_until(synced + Duration::from_secs(second)).await;
        let beat = heartbeat(&a, G, 2, &a_id, None).await?;
        code_is(&format!("a's Heartbeat {second} s in"), beat, None)?;
    }
    tokio::time::sleep_until(synced + MIN_SESSION - Duration::from_millis(1)).await;
    let beat = heartbeat(&a, G, 2, &a_id, None).await?;
    code_is("a's Heartbeat 1 ms before b's session ends", beat, None)?;
    tokio::time::sleep_until(synced + MIN_SESSION + 2 * TICK).await;
    let beat = heartbeat(&a, G, 2, &a_id, None).await?;
    code_is(
        "a's Heartbeat once b's session has ended",
        beat,
        Some(RebalanceInProgress),
    )?;
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

/// Kafka restarts the session of every member whose SyncGroup it answers
/// (`GroupCoordinator.propagateAssignment`: `completeAndScheduleNextHeartbeatExpiration`): a
/// follower kept waiting in SyncGroup for 8 s by a leader that heartbeats meanwhile, with a
/// 6 s session, is still a member 1 s after it got its assignment (9 s after its JoinGroup).
#[tokio::test(start_paused = true)]
async fn a_follower_kept_waiting_in_sync_group_gets_a_full_session_after_its_assignment(
) -> Result<()> {
    const G: &str = "slow-leader";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    let a = connect(at, "member-a").await?;
    let b = connect(at, "member-b").await?;
    let request =
        |id: &str, metadata| join_request(G, id, metadata).with_session_timeout_ms(MIN_SESSION_MS);
    let a_id = fresh_member_id(&a, request("", META_A)).await?;
    let b_id = fresh_member_id(&b, request("", META_B)).await?;
    let (a_joined, b_joined) = tokio::join!(
        join(&a, request(&a_id, META_A), 5),
        join(&b, request(&b_id, META_B), 5)
    );
    let (a_joined, b_joined) = (a_joined?, b_joined?);
    let chosen = a_joined.leader.to_string();
    ensure!(
        a_joined.error_code == 0
            && b_joined.error_code == 0
            && a_joined.generation_id == b_joined.generation_id
            && b_joined.leader.as_str() == chosen
            && (chosen == a_id || chosen == b_id),
        "JoinGroups: member-a {} generation {} leader {:?}, member-b {} generation {} leader {:?}",
        err(a_joined.error_code),
        a_joined.generation_id,
        chosen,
        err(b_joined.error_code),
        b_joined.generation_id,
        b_joined.leader.as_str()
    );
    let generation = a_joined.generation_id;
    // Either may lead.
    let ((leader, leader_id), (follower, follower_id)) = if chosen == a_id {
        ((&a, &a_id), (&b, &b_id))
    } else {
        ((&b, &b_id), (&a, &a_id))
    };

    // The follower asks for its assignment at once; the leader, heartbeating every second,
    // hands it out only 8 s later: longer than the 6 s session timeout.
    let joined = Instant::now();
    let leader_side = async {
        for second in 1..=8 {
            tokio::time::sleep_until(joined + Duration::from_secs(second)).await;
            let beat = heartbeat(leader, G, generation, leader_id, None).await?;
            code_is(
                "the leader's heartbeat while it holds the assignment back",
                beat,
                None,
            )?;
        }
        let assignments = [
            (leader_id.as_str(), ASSIGN_A),
            (follower_id.as_str(), ASSIGN_B),
        ];
        sync(leader, G, generation, leader_id, &assignments).await
    };
    let follower_side = sync(follower, G, generation, follower_id, &[]);
    let (leader_synced, follower_synced) = tokio::join!(leader_side, follower_side);
    let (leader_synced, follower_synced) = (leader_synced?, follower_synced?);
    code_is("the leader's SyncGroup", leader_synced.error_code, None)?;
    code_is("the follower's SyncGroup", follower_synced.error_code, None)?;
    same(
        "the follower's assignment",
        follower_synced.assignment,
        Bytes::from_static(ASSIGN_B),
    )?;
    same(
        "when the follower's SyncGroup was answered",
        joined.elapsed(),
        Duration::from_secs(8),
    )?;

    tokio::time::sleep(Duration::from_secs(1)).await;
    let beat = heartbeat(follower, G, generation, follower_id, None).await?;
    code_is(
        "the follower's heartbeat 1 s after it got its assignment (9 s after its JoinGroup): \
         its session runs from the assignment",
        beat,
        None,
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// Kafka waits for an unused member id handed out with MEMBER_ID_REQUIRED
/// (`GroupMetadata.hasAllMembersJoined` wants no pending member) until its session expires,
/// and then completes the join at once (`removePendingMemberAndUpdateGroup`): the rebalance a
/// newcomer starts completes exactly when the unused id's 6 s session ends, not at the 30 s
/// rebalance timeout.
#[tokio::test(start_paused = true)]
async fn an_unused_member_id_holds_a_rebalance_up_only_until_it_expires() -> Result<()> {
    const G: &str = "abandoned";
    let cluster = cluster().await?;
    let at = coordinator(&cluster, G).await?;
    // A first member, alone and Stable in generation 1, with a 30 s session and rebalance
    // timeout.
    let first = connect(at, "first").await?;
    let first_id = stable_member(&first, G).await?;

    // A client that gets a member id (6 s session) and is never heard from again.
    let abandoned = connect(at, "abandoned").await?;
    let unused = join_request(G, "", META_B).with_session_timeout_ms(MIN_SESSION_MS);
    fresh_member_id(&abandoned, unused).await?;
    let given_out = Instant::now();

    // A newcomer joins, which starts a rebalance; the first member, told so by its heartbeat,
    // rejoins. Both JoinGroups wait for the unused id.
    let newcomer = connect(at, "newcomer").await?;
    let newcomer_id = fresh_member_id(&newcomer, join_request(G, "", META_B)).await?;
    let newcomer_side = join(&newcomer, join_request(G, &newcomer_id, META_B), 5);
    let first_side = async {
        cluster
            .wait_for(
                |e| {
                    e.is("JoinGroup")
                        && e.client_id.as_deref() == Some("newcomer")
                        && e.response.is_none()
                },
                PATIENCE,
            )
            .await?;
        let beat = heartbeat(&first, G, 1, &first_id, None).await?;
        code_is(
            "the first member's heartbeat while the newcomer's JoinGroup waits",
            beat,
            Some(RebalanceInProgress),
        )?;
        join(&first, join_request(G, &first_id, META_A), 5).await
    };
    let (newcomer_joined, first_joined) = tokio::join!(newcomer_side, first_side);
    let took = given_out.elapsed();
    let (newcomer_joined, first_joined) = (newcomer_joined?, first_joined?);
    code_is("the newcomer's JoinGroup", newcomer_joined.error_code, None)?;
    code_is("the first member's rejoin", first_joined.error_code, None)?;
    same(
        "the newcomer's generation",
        newcomer_joined.generation_id,
        2,
    )?;
    same(
        "the first member's generation",
        first_joined.generation_id,
        2,
    )?;
    // Tokio time, not wall time: the expiry at 6 s, seen at the coordinator's next timer check,
    // completed the join; the 30 s rebalance timeout had nothing to do with it.
    ensure!(
        took >= MIN_SESSION && took <= MIN_SESSION + TICK,
        "the rebalance completed {took:?} (Tokio time) after the unused member id was given \
         out; expected when its {MIN_SESSION:?} session ended, at the coordinator's next timer \
         check (every {TICK:?})"
    );
    cluster.shutdown().await;
    Ok(())
}
