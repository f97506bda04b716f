//! Joining a consumer group and rebalancing (classic protocol), checked against Apache Kafka's
//! group coordinator: MEMBER_ID_REQUIRED (KIP-394), generations, the leader's view of the
//! members, each member's own assignment, session-timeout and protocol-type checks, and static
//! members (KIP-345).

mod common;

use common::classic_group::*;

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

/// A JoinGroup naming one protocol twice: Kafka (4.4.0, and 3.x) counts protocol names with
/// duplicates, a candidate being a protocol counted once per member, so a lone member naming
/// `[range, range, roundrobin]` is served with `roundrobin`; one naming `[range, range]` has no
/// candidate: Kafka answers its first join of v4+ MEMBER_ID_REQUIRED as any, then takes the
/// member in and never answers (its protocol vote throws); kmock closes that connection and
/// removes the member.
#[tokio::test]
async fn a_join_naming_one_protocol_twice_counts_it_twice() -> Result<()> {
    let cluster = cluster().await?;
    let protocol = |name: &str| {
        join_group_request::JoinGroupRequestProtocol::default()
            .with_name(text(name))
            .with_metadata(Bytes::from_static(META_A))
    };
    let twice = |group: &str, member: &str, and: &[&str]| {
        let mut protocols = vec![protocol(RANGE), protocol(RANGE)];
        protocols.extend(and.iter().map(|name| protocol(name)));
        join_request(group, member, META_A).with_protocols(protocols)
    };
    // [range, range, roundrobin]: only roundrobin is counted once for the one member.
    let at = coordinator(&cluster, "twice-then-other").await?;
    let client = connect(at, "consumer-a").await?;
    let first = join(&client, twice("twice-then-other", "", &["roundrobin"]), 9).await?;
    code_is(
        "first JoinGroup v9",
        first.error_code,
        Some(MemberIdRequired),
    )?;
    let id = first.member_id.to_string();
    let joined = join(&client, twice("twice-then-other", &id, &["roundrobin"]), 9).await?;
    let what = "JoinGroup v9 naming [range, range, roundrobin]";
    code_is(what, joined.error_code, None)?;
    same(
        &format!("{what}: protocol"),
        joined.protocol_name.as_ref().map(|p| p.as_str()),
        Some("roundrobin"),
    )?;
    same(&format!("{what}: generation"), joined.generation_id, 1)?;
    // [range, range]: no candidate, the join is never answered.
    let closed = |answer: &Result<Bytes>| {
        answer.as_ref().err().is_some_and(|e| {
            matches!(
                e.downcast_ref::<kmock_client::Error>(),
                Some(kmock_client::Error::ConnectionClosed)
            )
        })
    };
    let at = coordinator(&cluster, "twice").await?;
    let client = connect(at, "consumer-a").await?;
    let first = join(&client, twice("twice", "", &[]), 9).await?;
    code_is(
        "first JoinGroup v9",
        first.error_code,
        Some(MemberIdRequired),
    )?;
    let rejoin = within(
        "JoinGroup v9",
        client.send_raw(twice("twice", &first.member_id, &[]), 9),
    )
    .await;
    ensure!(
        closed(&rejoin),
        "JoinGroup v9 with the member id: got {rejoin:?}, expected the connection closed"
    );
    let at = coordinator(&cluster, "twice-v3").await?;
    let client = connect(at, "consumer-a").await?;
    let old = within(
        "JoinGroup v3",
        client.send_raw(twice("twice-v3", "", &[]), 3),
    )
    .await;
    ensure!(
        closed(&old),
        "JoinGroup v3: got {old:?}, expected the connection closed"
    );
    // The member is not left in the group, and the journal says why each connection closed,
    // on the join's own entry.
    for (group, version) in [("twice", 9), ("twice-v3", 3)] {
        let client = connect(coordinator(&cluster, group).await?, "admin").await?;
        let described = describe(&client, group).await?;
        same(
            &format!("{group}'s members after the closed join"),
            described_members(&described),
            Vec::new(),
        )?;
        let entry = cluster
            .wait_for(
                |e| e.is("JoinGroup") && e.version == Some(version) && e.closed.is_some(),
                PATIENCE,
            )
            .await?;
        let reason = entry.closed.unwrap_or_default();
        ensure!(
            reason.contains("candidate protocols"),
            "JoinGroup v{version}'s entry: closed for {reason:?}, expected no candidate protocol"
        );
    }
    Ok(())
}
