//! Committing and fetching a consumer group's offsets (OffsetCommit, OffsetFetch), checked
//! against Apache Kafka's group coordinator: who may commit (generation and member checks),
//! what is stored and given back, and the per-partition errors.

mod common;

use common::classic_group::*;

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
        // In Kafka's order: the refused partitions first, one entry per topic name, then the
        // group's answers merged into them (conformance case `offset_commit_answer_order`).
        committed(&[
            ("nope", 0, Some(UnknownTopicOrPartition)),
            (TOPIC, 9, Some(UnknownTopicOrPartition)),
            (TOPIC, 0, None),
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

/// Kafka refuses a member's commit at its current generation only while CompletingRebalance
/// (`ClassicGroup.validateOffsetCommit`): while PreparingRebalance it is stored, also after the
/// member's own JoinGroup (which waits for the other member), sent on another connection.
#[tokio::test]
async fn offset_commit_at_the_current_generation_while_preparing_rebalance_is_stored() -> Result<()>
{
    const G: &str = "rejoining";
    let cluster = cluster().await?;
    let addr = coordinator(&cluster, G).await?;
    let (a, b) = (
        connect(addr, "consumer-a").await?,
        connect(addr, "consumer-b").await?,
    );
    let a_commits = connect(addr, "consumer-a-commits").await?;
    let (a_id, b_id) = two_members(&a, &b, G).await?;
    let mut rejoin = Box::pin(join(&a, join_request(G, &a_id, META_A), 9));
    still_waiting("a's JoinGroup before b rejoined", &mut rejoin).await?;
    same(
        "state after a's JoinGroup",
        describe(&a_commits, G).await?.group_state.to_string(),
        "PreparingRebalance".to_owned(),
    )?;
    same(
        "a's OffsetCommit in generation 2 after its own JoinGroup, while PreparingRebalance",
        commit_one(&a_commits, G, 2, &a_id, 10).await?,
        err(0),
    )?;
    same(
        "OffsetFetch v8 of t-0",
        fetch_offsets(&a_commits, G, &[0]).await?,
        vec![(0, 10, -1, String::new())],
    )?;
    // b rejoins: the rebalance completes, both in generation 3.
    let (joined_a, joined_b) = tokio::join!(rejoin, join(&b, join_request(G, &b_id, META_B), 9));
    for joined in [joined_a?, joined_b?] {
        code_is("JoinGroup after b rejoined", joined.error_code, None)?;
        same("generation after the rebalance", joined.generation_id, 3)?;
    }
    Ok(())
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

/// Kafka 4.4.0 (verified by hand, not a recorded conformance case) answers an OffsetCommit
/// naming an unknown topic with no partition with an empty entry for it:
/// `[nope [], t [0]]` gets `nope [] | t [0 NONE]`, and `[nope []]` gets `nope []`
/// (`OffsetCommitResponse.Builder.addPartitions` creates the topic's entry); a known topic with
/// no partition gets no entry.
#[tokio::test]
async fn offset_commit_keeps_an_entry_for_an_unknown_topic_named_with_no_partition() -> Result<()> {
    const G: &str = "empty-entries";
    let cluster = cluster().await?;
    let client = connect(coordinator(&cluster, G).await?, "admin").await?;
    let topic = |topic: &str, partitions: &[i32]| {
        OffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&p| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(4)
                    })
                    .collect(),
            )
    };
    let cases = [
        (
            "[nope [], t [0]]",
            vec![topic("nope", &[]), topic(TOPIC, &[0])],
            vec![
                ("nope".to_owned(), vec![]),
                (TOPIC.to_owned(), vec![(0, err(0))]),
            ],
        ),
        (
            "[nope []]",
            vec![topic("nope", &[])],
            vec![("nope".to_owned(), vec![])],
        ),
        (
            "[t [], t [1]]",
            vec![topic(TOPIC, &[]), topic(TOPIC, &[1])],
            vec![(TOPIC.to_owned(), vec![(1, err(0))])],
        ),
    ];
    for (what, topics, expected) in cases {
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(G)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(topics);
        let what = format!("OffsetCommit v7 of {what}");
        let answer = within(&what, client.send(request, 7)).await?;
        let got: Vec<(String, Vec<(i32, String)>)> = answer
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, err(p.error_code)))
                    .collect();
                (t.name.to_string(), partitions)
            })
            .collect();
        same(&what, got, expected)?;
    }
    Ok(())
}
