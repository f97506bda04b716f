//! Group edge cases where a fake is easily more lenient, or stricter, than Kafka.

mod common;

use anyhow::Result;
use common::{code_is, name, start, text};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use kmock_client::Client;

fn commit(group: &str, member: &str, partition: i32, offset: i64) -> OffsetCommitRequest {
    common::requests::offset_commit(group, -1, member, "t", &[(partition, offset)])
}

fn fetch(group: &str) -> OffsetFetchRequest {
    OffsetFetchRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name("t"))
            .with_partition_indexes(vec![0])]))
}

#[tokio::test]
async fn committed_offsets_are_forgotten_when_their_topic_is_deleted() -> Result<()> {
    let (_cluster, client) = start(1, &["t"], 1).await?;
    let committed = client.send(commit("g", "", 0, 5), 8).await?;
    code_is(
        "commit 5",
        committed.topics[0].partitions[0].error_code,
        None,
    )?;
    let before = client.send(fetch("g"), 7).await?;
    common::same(
        "offset before delete",
        before.topics[0].partitions[0].committed_offset,
        5,
    )?;
    let deleted = client
        .send(
            DeleteTopicsRequest::default()
                .with_timeout_ms(30_000)
                .with_topic_names(vec![name("t")]),
            5,
        )
        .await?;
    code_is("delete t", deleted.responses[0].error_code, None)?;
    let create = CreatableTopic::default()
        .with_name(name("t"))
        .with_num_partitions(1)
        .with_replication_factor(1);
    let created = client
        .send(CreateTopicsRequest::default().with_topics(vec![create]), 7)
        .await?;
    code_is("create t again", created.topics[0].error_code, None)?;
    let fetched = client.send(fetch("g"), 7).await?;
    common::same(
        "offset after delete and re-create",
        fetched.topics[0].partitions[0].committed_offset,
        -1,
    )
}

#[tokio::test]
async fn commits_from_outside_group_management_are_taken_by_an_empty_group_whatever_the_member_id(
) -> Result<()> {
    let (_cluster, client) = start(1, &["t"], 1).await?;
    for offset in [3, 4] {
        let answer = client.send(commit("g", "someone", 0, offset), 8).await?;
        code_is(
            &format!("commit {offset}"),
            answer.topics[0].partitions[0].error_code,
            None,
        )?;
    }
    // Kafka keeps accepting commits for the empty group id, for backwards compatibility.
    let answer = client.send(commit("", "", 0, 1), 8).await?;
    code_is(
        "commit to group \"\"",
        answer.topics[0].partitions[0].error_code,
        None,
    )
}

#[tokio::test]
async fn sync_group_v5_without_protocol_type_or_name_is_inconsistent_group_protocol() -> Result<()>
{
    let (_cluster, client) = start(1, &["t"], 1).await?;
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(text("g")))
        .with_member_id(text("m"));
    let answer = client.send(request, 5).await?;
    code_is(
        "SyncGroup v5 without protocol",
        answer.error_code,
        Some(ResponseError::InconsistentGroupProtocol),
    )
}

#[tokio::test]
async fn offset_delete_of_a_partition_that_does_not_exist_is_unknown_topic_or_partition(
) -> Result<()> {
    let (_cluster, client) = start(1, &["t"], 1).await?;
    let committed = client.send(commit("g", "", 0, 5), 8).await?;
    code_is(
        "commit 5",
        committed.topics[0].partitions[0].error_code,
        None,
    )?;
    let topic = OffsetDeleteRequestTopic::default()
        .with_name(name("t"))
        .with_partitions(
            vec![0, 99]
                .into_iter()
                .map(|p| OffsetDeleteRequestPartition::default().with_partition_index(p))
                .collect(),
        );
    let answer = client
        .send(
            OffsetDeleteRequest::default()
                .with_group_id(GroupId(text("g")))
                .with_topics(vec![topic]),
            0,
        )
        .await?;
    let codes: Vec<i16> = answer.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    common::same(
        "OffsetDelete t-0, t-99",
        codes,
        vec![0, ResponseError::UnknownTopicOrPartition.code()],
    )
}

#[tokio::test]
async fn offset_fetch_v1_puts_a_group_error_on_every_partition_asked() -> Result<()> {
    let (cluster, _) = start(3, &["t"], 1).await?;
    // Ask every broker: the two that do not coordinate "g" must say so on the partition.
    let mut not_coordinator = 0;
    for broker in cluster.brokers() {
        let client = Client::connect(broker.addr).await?;
        let answer = client.send(fetch("g"), 1).await?;
        let code = answer
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map(|p| p.error_code);
        if code == Some(ResponseError::NotCoordinator.code()) {
            not_coordinator += 1;
        }
    }
    common::same(
        "brokers answering NOT_COORDINATOR per partition",
        not_coordinator,
        2,
    )
}

/// An OffsetCommit naming `t`-0 1,000,000 times, offsets 0 to 999,999, from outside any group:
/// every entry answered NONE, and the last entry's offset is the group's (kmock keeps one
/// offset per partition while it reads the request, as TxnOffsetCommit does).
#[tokio::test]
async fn a_huge_offset_commit_keeps_the_last_offset_of_a_partition() -> Result<()> {
    const ENTRIES: i64 = 1_000_000;
    let (_cluster, client) = start(1, &["t"], 1).await?;
    let mut request = commit("g", "", 0, 0);
    let entry = request.topics[0].partitions[0].clone();
    request.topics[0].partitions = (0..ENTRIES)
        .map(|offset| entry.clone().with_committed_offset(offset))
        .collect();
    let answer = client.send(request, 8).await?;
    let partitions = &answer.topics[0].partitions;
    common::same("answers", partitions.len(), ENTRIES as usize)?;
    common::same(
        "entries refused",
        partitions.iter().filter(|p| p.error_code != 0).count(),
        0,
    )?;
    let fetched = client.send(fetch("g"), 7).await?;
    let p = &fetched.topics[0].partitions[0];
    code_is("OffsetFetch", p.error_code, None)?;
    common::same("committed offset", p.committed_offset, ENTRIES - 1)?;
    Ok(())
}
