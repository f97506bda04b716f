//! Where a consumer group lives, checked against Apache Kafka's group coordinator:
//! FindCoordinator (v3 key and v4 batch) names the same broker on every broker, and every
//! group request sent to another broker is answered NOT_COORDINATOR; while the coordinator
//! loads (`coordinator_load`), a Heartbeat is answered NONE and a JoinGroup refused, until the
//! load's rules are removed; a group request to another broker is still NOT_COORDINATOR.

mod common;

use common::classic_group::*;

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

/// Kafka's `GroupCoordinatorService.heartbeat` answers a Heartbeat NONE while its runtime
/// loads the group's partition ("blindly respond"), where a JoinGroup, DescribeGroups and
/// ListGroups get COORDINATOR_LOAD_IN_PROGRESS; an empty group id is INVALID_GROUP_ID. The load
/// lasts 600 s, far past this test: every request below is within it.
#[tokio::test]
async fn while_the_coordinator_loads_a_heartbeat_is_answered_none_and_a_join_is_refused(
) -> Result<()> {
    const G: &str = "loading";
    let cluster = Cluster::builder()
        .coordinator_load(Duration::from_secs(600))
        .start()
        .await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let beat = heartbeat(&client, G, 1, "no-such-member", None).await?;
    code_is("Heartbeat of an unknown member while loading", beat, None)?;
    let beat = heartbeat(&client, "", 1, "no-such-member", None).await?;
    code_is(
        "Heartbeat of an empty group id while loading",
        beat,
        Some(InvalidGroupId),
    )?;
    let joined = join(&client, join_request(G, "", META_A), 9).await?;
    code_is(
        "JoinGroup while loading",
        joined.error_code,
        Some(CoordinatorLoadInProgress),
    )?;
    let described = describe(&client, G).await?;
    code_is(
        "DescribeGroups while loading",
        described.error_code,
        Some(CoordinatorLoadInProgress),
    )?;
    let listed = within(
        "ListGroups v4",
        client.send(ListGroupsRequest::default(), 4),
    )
    .await?;
    code_is(
        "ListGroups while loading",
        listed.error_code,
        Some(CoordinatorLoadInProgress),
    )?;
    let loaded: Vec<(String, bool)> = cluster
        .journal()
        .entries()
        .iter()
        .filter(|e| matches!(e.api.as_deref(), Some("Heartbeat" | "JoinGroup")))
        .map(|e| {
            let load = e.faults.iter().any(|f| f.contains("coordinator_load"));
            (e.api.as_deref().unwrap_or_default().to_owned(), load)
        })
        .collect();
    same(
        "whether the load's fault rule fired, per request",
        loaded,
        vec![
            ("Heartbeat".to_owned(), true),
            ("Heartbeat".to_owned(), false),
            ("JoinGroup".to_owned(), true),
        ],
    )?;
    cluster.shutdown().await;
    // Without a load the same Heartbeat is refused: the NONE above came from the load.
    let cluster = Cluster::builder().start().await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let beat = heartbeat(&client, G, 1, "no-such-member", None).await?;
    code_is(
        "Heartbeat of an unknown member",
        beat,
        Some(UnknownMemberId),
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// Kafka's `CoordinatorRuntime` answers NOT_COORDINATOR for a group this broker does not
/// coordinate before it looks at the load: every group API sent to the other broker of two
/// is NOT_COORDINATOR while the coordinator loads, and the load's rule does not fire on it.
#[tokio::test]
async fn while_the_coordinator_loads_another_broker_answers_not_coordinator() -> Result<()> {
    const G: &str = "loading-elsewhere";
    let cluster = Cluster::builder()
        .brokers(2)
        .coordinator_load(Duration::from_secs(600))
        .start()
        .await?;
    let at = coordinator(&cluster, G).await?;
    let other = cluster
        .brokers()
        .iter()
        .find(|b| b.addr != at)
        .context("a broker that is not the coordinator")?
        .addr;
    let client = Client::connect(other).await?;
    let group = || GroupId(text(G));
    let mut codes: Vec<(&str, String)> = Vec::new();
    let beat = heartbeat(&client, G, 1, "no-such-member", None).await?;
    codes.push(("Heartbeat", err(beat)));
    let joined = join(&client, join_request(G, "", META_A), 9).await?;
    codes.push(("JoinGroup", err(joined.error_code)));
    let synced = within(
        "SyncGroup v3",
        client.send(
            SyncGroupRequest::default()
                .with_group_id(group())
                .with_generation_id(1)
                .with_member_id(text("m")),
            3,
        ),
    )
    .await?;
    codes.push(("SyncGroup", err(synced.error_code)));
    let left = within(
        "LeaveGroup v5",
        client.send(
            LeaveGroupRequest::default()
                .with_group_id(group())
                .with_members(vec![MemberIdentity::default().with_member_id(text("m"))]),
            5,
        ),
    )
    .await?;
    codes.push(("LeaveGroup", err(left.error_code)));
    let described = describe(&client, G).await?;
    codes.push(("DescribeGroups", err(described.error_code)));
    let deleted = within(
        "DeleteGroups v2",
        client.send(
            DeleteGroupsRequest::default().with_groups_names(vec![group()]),
            2,
        ),
    )
    .await?;
    let code = deleted.results.first().map_or(-1, |r| r.error_code);
    codes.push(("DeleteGroups", err(code)));
    let fetched = within(
        "OffsetFetch v7",
        client.send(OffsetFetchRequest::default().with_group_id(group()), 7),
    )
    .await?;
    codes.push(("OffsetFetch", err(fetched.error_code)));
    let deleted = within(
        "OffsetDelete v0",
        client.send(OffsetDeleteRequest::default().with_group_id(group()), 0),
    )
    .await?;
    codes.push(("OffsetDelete", err(deleted.error_code)));
    let described = within(
        "ConsumerGroupDescribe v0",
        client.send(
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![group()]),
            0,
        ),
    )
    .await?;
    let code = described.groups.first().map_or(-1, |g| g.error_code);
    codes.push(("ConsumerGroupDescribe", err(code)));
    let expected: Vec<(&str, String)> = codes
        .iter()
        .map(|(api, _)| (*api, err(NotCoordinator.code())))
        .collect();
    same(
        "answers of the broker that is not the coordinator",
        codes,
        expected,
    )?;
    let fired: Vec<u64> = cluster
        .journal()
        .entries()
        .iter()
        .filter(|e| e.faults.iter().any(|f| f.contains("coordinator_load")))
        .map(|e| e.seq)
        .collect();
    same("entries the load's rules fired on", fired, Vec::new())?;
    cluster.shutdown().await;
    Ok(())
}

/// The load ends when its rules are removed: a Heartbeat answered NONE by the load (its entry
/// names the `coordinator_load` rule) is refused as Kafka refuses it once they are gone.
#[tokio::test]
async fn the_heartbeat_load_window_ends_when_its_rules_are_removed() -> Result<()> {
    const G: &str = "loaded-early";
    let cluster = Cluster::builder()
        .coordinator_load(Duration::from_secs(600))
        .start()
        .await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let beat = heartbeat(&client, G, 1, "no-such-member", None).await?;
    code_is("Heartbeat of an unknown member while loading", beat, None)?;
    let removed = cluster.remove_rules();
    ensure!(
        !removed.is_empty(),
        "no rule removed: the load has no rules"
    );
    let beat = heartbeat(&client, G, 1, "no-such-member", None).await?;
    code_is(
        "Heartbeat of an unknown member after the load's rules are removed",
        beat,
        Some(UnknownMemberId),
    )?;
    let faults: Vec<Vec<String>> = cluster
        .journal()
        .entries()
        .iter()
        .filter(|e| e.is("Heartbeat"))
        .map(|e| e.faults.clone())
        .collect();
    same(
        "faults of each Heartbeat's entry",
        faults,
        vec![
            vec!["coordinator_load: error(CoordinatorLoadInProgress)".to_owned()],
            vec![],
        ],
    )?;
    cluster.shutdown().await;
    Ok(())
}
