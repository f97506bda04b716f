//! What `Cluster::reset` keeps and what it clears, as its documentation promises, seen over
//! the wire: topics, groups, committed offsets and the journal in memory start afresh (the
//! configured topics again, empty, with new topic ids; auto-created ones gone); open
//! connections, brokers down, fault rules, producer id allocation and journal numbering carry
//! on.

mod common;

use anyhow::{ensure, Result};
use bytes::Bytes;
use common::requests::{join_group, offset_commit, sync_group};
use common::{broker_addr, code_is, same, text};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    DescribeGroupsRequest, GroupId, InitProducerIdRequest, ListOffsetsRequest, MetadataRequest,
    OffsetFetchRequest,
};
use kafka_protocol::ResponseError;
use kmock::{ApiKey, Cluster, Rule};
use kmock_client::{record, Client};

/// The latest offset (high watermark) of t-`partition`, by ListOffsets v7.
async fn latest(client: &Client, partition: i32) -> Result<i64> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(common::name("t"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(-1)])]);
    let answer = client.send(request, 7).await?;
    let p = &answer.topics[0].partitions[0];
    code_is("ListOffsets latest", p.error_code, None)?;
    Ok(p.offset)
}

/// `(error code, topic id)` of `topic` by Metadata v12, without creating it.
async fn topic(client: &Client, name: &str) -> Result<(i16, uuid::Uuid)> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(common::name(name)))
        ]))
        .with_allow_auto_topic_creation(false);
    let answer = client.send(request, 12).await?;
    Ok((answer.topics[0].error_code, answer.topics[0].topic_id))
}

/// The producer id InitProducerId v4 gives an idempotent producer.
async fn producer_id(client: &Client) -> Result<i64> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(kafka_protocol::messages::ProducerId(-1))
        .with_producer_epoch(-1);
    let answer = client.send(request, 4).await?;
    code_is("InitProducerId", answer.error_code, None)?;
    Ok(answer.producer_id.0)
}

/// The committed offset of group `g` for t-0 (-1: none), by OffsetFetch v7 at its coordinator.
async fn committed(cluster: &Cluster) -> Result<i64> {
    let client = Client::connect(broker_addr(cluster, cluster.coordinator("g"))).await?;
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text("g")))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(common::name("t"))
            .with_partition_indexes(vec![0])]));
    let answer = client.send(request, 7).await?;
    code_is("OffsetFetch", answer.error_code, None)?;
    Ok(answer.topics[0].partitions[0].committed_offset)
}

#[tokio::test]
async fn reset_clears_topics_groups_offsets_and_the_journal_and_keeps_connections_brokers_rules_and_ids(
) -> Result<()> {
    let cluster = Cluster::builder().brokers(2).topic("t", 2).start().await?;
    let client = Client::connect(broker_addr(&cluster, 1)).await?;
    // t-0 on broker 1 (its preferred leader) holds 3 records.
    same("t-0's leader", cluster.leader("t", 0), Some(1))?;
    let records = vec![record(b"k", b"v"); 3];
    client.produce("t", 0, &records, -1).await?;
    same("t-0's end", latest(&client, 0).await?, 3)?;
    let (_, t_id) = topic(&client, "t").await?;
    let create = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(common::name("auto")))
        ]))
        .with_allow_auto_topic_creation(true);
    client.send(create, 12).await?;
    code_is("topic auto", topic(&client, "auto").await?.0, None)?;
    let g_at = Client::connect(broker_addr(&cluster, cluster.coordinator("g"))).await?;
    let answer = g_at
        .send(offset_commit("g", -1, "", "t", &[(0, 2)]), 8)
        .await?;
    code_is(
        "g's commit",
        answer.topics[0].partitions[0].error_code,
        None,
    )?;
    same("g's committed offset", committed(&cluster).await?, 2)?;
    // A one-member group "members", Stable.
    let coordinator = cluster.coordinator("members");
    let member = Client::connect(broker_addr(&cluster, coordinator)).await?;
    let joined = member
        .send(join_group("members", "", Bytes::from_static(b"m")), 3)
        .await?;
    let id = joined.member_id.to_string();
    let own = [(id.as_str(), Bytes::from_static(b"a"))];
    member
        .send(sync_group("members", joined.generation_id, &id, &own), 3)
        .await?;
    let first_id = producer_id(&client).await?;
    let rule = cluster.add_rule(
        Rule::on(ApiKey::Metadata)
            .named("kept")
            .delay(std::time::Duration::ZERO),
    )?;
    cluster.broker_down(2).await?;
    let before = cluster.journal().entries().last().expect("entries").seq;

    cluster.reset();

    // The journal in memory starts empty and numbering goes on.
    ensure!(
        cluster.journal().entries().is_empty(),
        "the journal in memory after reset: {:?}",
        cluster.journal().entries()
    );
    // The same connection still works; its first request is numbered after everything before.
    client.api_versions().await?;
    let after = cluster.journal().entries()[0].seq;
    ensure!(
        after > before + 1,
        "seq {after} after the reset, {before} before"
    );
    // The configured topic again, empty, with a new id; the auto-created one gone.
    let (code, new_id) = topic(&client, "t").await?;
    code_is("topic t after reset", code, None)?;
    ensure!(
        new_id != t_id,
        "t kept its topic id {t_id} across the reset"
    );
    same("t-0's end after reset", latest(&client, 0).await?, 0)?;
    code_is(
        "topic auto after reset",
        topic(&client, "auto").await?.0,
        Some(ResponseError::UnknownTopicOrPartition),
    )?;
    // Committed offsets and groups gone.
    same(
        "g's committed offset after reset",
        committed(&cluster).await?,
        -1,
    )?;
    let members_at = Client::connect(broker_addr(&cluster, cluster.coordinator("members"))).await?;
    let described = members_at
        .send(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(text("members"))]),
            5,
        )
        .await?;
    let group = &described.groups[0];
    same(
        "group members after reset: (state, members)",
        (group.group_state.to_string(), group.members.len()),
        ("Dead".to_owned(), 0),
    )?;
    // Producer ids keep counting up.
    let next_id = producer_id(&client).await?;
    ensure!(
        next_id > first_id,
        "InitProducerId gave {next_id} after the reset, {first_id} before: ids must not repeat"
    );
    // The rule is still in force, and broker 2 still down.
    let fired = rule.fired();
    client.metadata(None).await?;
    same(
        "the rule fired on the Metadata after reset",
        rule.fired(),
        fired + 1,
    )?;
    ensure!(
        Client::connect(broker_addr(&cluster, 2)).await.is_err(),
        "broker 2 accepts connections after the reset"
    );
    let brokers: Vec<i32> = client
        .metadata(Some(&[]))
        .await?
        .brokers
        .iter()
        .map(|b| b.node_id.0)
        .collect();
    same("brokers Metadata lists after reset", brokers, vec![1])?;
    cluster.shutdown().await;
    Ok(())
}
