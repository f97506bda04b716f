//! Leaving a consumer group and the admin view of groups, checked against Apache Kafka's group
//! coordinator: LeaveGroup (batch), DescribeGroups, ListGroups (state filter) and
//! DeleteGroups.

mod common;

use common::classic_group::*;

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
