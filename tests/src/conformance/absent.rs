//! Requests about what is not there: each classic group API on a group that never existed, and
//! Metadata with an empty topic list at each version.

use anyhow::Result;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, HeartbeatRequest, LeaveGroupRequest,
    MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
    SyncGroupRequest,
};
use kafka_protocol::ResponseError;

use super::groups::coordinator;
use super::{case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(group_apis_on_a_group_that_never_existed),
    case!(metadata_empty_topic_list_at_each_version),
];

/// Heartbeat, SyncGroup, LeaveGroup, OffsetCommit (as a member and as no member),
/// DescribeGroups, OffsetFetch, OffsetDelete and DeleteGroups of a group id never used.
async fn group_apis_on_a_group_that_never_existed(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let group = cx.topic("g");
    let id = || GroupId(text(&group));
    coordinator(&client, &group).await?;
    // Kafka answers a Heartbeat NONE while the coordinator still loads ("blindly", its
    // GroupCoordinatorService says): wait until DescribeGroups no longer says it loads.
    loop {
        let describe = DescribeGroupsRequest::default().with_groups(vec![id()]);
        let code = client.send(describe, 5).await?.groups[0].error_code;
        if code != ResponseError::CoordinatorLoadInProgress.code() {
            break;
        }
        // A client's retry backoff; the case's hang guard bounds the loop.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let mut lines = Vec::new();
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(id())
        .with_generation_id(1)
        .with_member_id(text("m"));
    let answer = client.send(heartbeat, 4).await?;
    lines.push(format!("heartbeat: {}", err(answer.error_code)));
    let sync = SyncGroupRequest::default()
        .with_group_id(id())
        .with_generation_id(1)
        .with_member_id(text("m"))
        .with_protocol_type(Some(text("consumer")))
        .with_protocol_name(Some(text("range")));
    let answer = client.send(sync, 5).await?;
    lines.push(format!("sync: {}", err(answer.error_code)));
    let leave = LeaveGroupRequest::default()
        .with_group_id(id())
        .with_members(vec![MemberIdentity::default().with_member_id(text("m"))]);
    let answer = client.send(leave, 5).await?;
    let members: Vec<String> = answer.members.iter().map(|m| err(m.error_code)).collect();
    lines.push(format!(
        "leave: {} members {members:?}",
        err(answer.error_code)
    ));
    for (generation, member) in [(1, "m"), (-1, "")] {
        let commit = OffsetCommitRequest::default()
            .with_group_id(id())
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(text(member))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name(&topic))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(3)])]);
        let answer = client.send(commit, 9).await?;
        lines.push(format!(
            "commit generation {generation} member {member:?}: {}",
            err(answer.topics[0].partitions[0].error_code)
        ));
    }
    // The simple commit above made the group (Empty, with an offset); a second group id
    // stays unknown for the rest.
    let other = cx.topic("never");
    let other_id = || GroupId(text(&other));
    coordinator(&client, &other).await?;
    let describe = DescribeGroupsRequest::default().with_groups(vec![id(), other_id()]);
    let answer = client.send(describe, 5).await?;
    for g in &answer.groups {
        let which = if g.group_id.0.as_str() == group {
            "g"
        } else {
            "never"
        };
        lines.push(format!(
            "describe {which}: {} state {} protocol type {:?} members {}",
            err(g.error_code),
            g.group_state.as_str(),
            g.protocol_type.as_str(),
            g.members.len()
        ));
    }
    for (which, g) in [("g", &group), ("never", &other)] {
        let fetch =
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text(g)))
                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                    .with_name(name(&topic))
                    .with_partition_indexes(vec![0])]))]);
        let answer = client.send(fetch, 8).await?;
        let fetched = &answer.groups[0];
        lines.push(format!(
            "fetch {which}: {} partition {} offset {}",
            err(fetched.error_code),
            err(fetched.topics[0].partitions[0].error_code),
            fetched.topics[0].partitions[0].committed_offset
        ));
    }
    let delete_offsets = OffsetDeleteRequest::default()
        .with_group_id(other_id())
        .with_topics(vec![OffsetDeleteRequestTopic::default()
            .with_name(name(&topic))
            .with_partitions(vec![
                OffsetDeleteRequestPartition::default().with_partition_index(0)
            ])]);
    let answer = client.send(delete_offsets, 0).await?;
    lines.push(format!("offset delete never: {}", err(answer.error_code)));
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![other_id(), id()]);
    let answer = client.send(delete, 2).await?;
    // By name: Kafka 4.4.0's order of these two answers varies from run to run.
    let mut deleted: Vec<String> = answer
        .results
        .iter()
        .map(|r| {
            let which = if r.group_id.0.as_str() == group {
                "g"
            } else {
                "never"
            };
            format!("delete {which}: {}", err(r.error_code))
        })
        .collect();
    deleted.sort();
    lines.extend(deleted);
    Ok(lines)
}

/// Metadata v1-v13 with an empty topic list: no topics (v0's empty list meant every topic).
async fn metadata_empty_topic_list_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for version in 1..=13 {
        let request = MetadataRequest::default().with_topics(Some(Vec::new()));
        let answer = client.send(request, version).await?;
        lines.push(format!(
            "v{version}: {} topics, {} brokers",
            answer.topics.len(),
            answer.brokers.len()
        ));
    }
    Ok(lines)
}
