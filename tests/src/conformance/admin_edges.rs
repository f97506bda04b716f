//! The admin APIs at their edges: DescribeTopicPartitions cursors at and past the last
//! partition, a topic named twice, negative limits; ElectLeaders with election types no
//! version defines, empty lists and a partition named twice; DescribeLogDirs of what does not
//! exist and of an empty list; partition reassignments of nothing; DescribeProducers' errors;
//! DescribeCluster's endpoint types; and one version past the highest of each of these APIs.

use anyhow::Result;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{ApiKey, DescribeClusterRequest, DescribeProducersRequest};

use super::bounds::{bounds, bounds_cases};
use super::describe_topic_partitions::page;
use super::offsets::three_records;
use super::reassignments::{alter, list};
use super::replicas::{elect, log_dirs};
use super::{answered, case, closed, err, name, Case, Ctx, Lines};

const EDGES: &[Case] = &[
    case!(describe_topic_partitions_cursor_at_the_last_partition),
    case!(describe_topic_partitions_same_topic_twice),
    case!(describe_topic_partitions_negative_limit),
    case!(elect_leaders_election_types_no_version_defines),
    case!(elect_leaders_unknown_type_for_every_partition),
    case!(elect_leaders_empty_lists),
    case!(elect_leaders_partition_named_twice),
    case!(describe_log_dirs_of_what_does_not_exist),
    case!(partition_reassignments_of_nothing),
    case!(describe_producers_errors),
    case!(describe_cluster_endpoint_types),
];

/// Every case of this file: the edges, then the version bounds.
pub fn cases() -> Vec<Case> {
    [EDGES, BOUNDS].concat()
}

// Kafka 4.4.0's ranges (broker/src/versions/tables.rs, KAFKA_4_4).
bounds_cases! {
    BOUNDS;
    delete_records_one_version_past_its_highest: DeleteRecords 0..=2,
    alter_configs_one_version_past_its_highest: AlterConfigs 0..=2,
    incremental_alter_configs_one_version_past_its_highest: IncrementalAlterConfigs 0..=1,
    describe_log_dirs_one_version_past_each_end: DescribeLogDirs 1..=5,
    elect_leaders_one_version_past_its_highest: ElectLeaders 0..=2,
    alter_partition_reassignments_one_version_past_its_highest: AlterPartitionReassignments 0..=1,
    list_partition_reassignments_one_version_past_its_highest: ListPartitionReassignments 0..=0,
    describe_topic_partitions_one_version_past_its_highest: DescribeTopicPartitions 0..=0,
}

/// A cursor at the last partition of the last topic, with a limit of exactly what is left, and
/// a limit of exactly every partition.
async fn describe_topic_partitions_cursor_at_the_last_partition(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let a = cx.create(&client, "a", 3, &[]).await?;
    let b = cx.create(&client, "b", 2, &[]).await?;
    let both = [a.as_str(), b.as_str()];
    let mut lines = page(&cx, &client, &both, 1, Some((b.as_str(), 1))).await?.0;
    lines.extend(page(&cx, &client, &both, 5, None).await?.0);
    lines.extend(page(&cx, &client, &both, 3, None).await?.0);
    lines.extend(page(&cx, &client, &both, 2, Some((a.as_str(), 2))).await?.0);
    Ok(lines)
}

async fn describe_topic_partitions_same_topic_twice(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let a = cx.create(&client, "a", 2, &[]).await?;
    let twice = [a.as_str(), a.as_str()];
    let mut lines = page(&cx, &client, &twice, 10, None).await?.0;
    lines.extend(
        page(&cx, &client, &twice, 1, Some((a.as_str(), 1)))
            .await?
            .0,
    );
    Ok(lines)
}

async fn describe_topic_partitions_negative_limit(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for limit in [-1, i32::MIN] {
        let client = cx.connect().await?;
        let a = cx.topic("a");
        if limit == -1 {
            cx.create(&client, "a", 2, &[]).await?;
        }
        match answered(
            client
                .send(
                    kafka_protocol::messages::DescribeTopicPartitionsRequest::default()
                        .with_topics(vec![
                            kafka_protocol::messages::describe_topic_partitions_request::TopicRequest::default()
                                .with_name(name(&a)),
                        ])
                        .with_response_partition_limit(limit),
                    0,
                )
                .await,
        )? {
            None => lines.push(format!("limit {limit}: connection closed")),
            Some(answer) => {
                lines.push(format!("limit {limit}:"));
                for t in &answer.topics {
                    lines.push(format!(
                        "  {}: {} partitions {}",
                        cx.short(t.name.as_ref().map_or("null", |n| n.0.as_str())),
                        err(t.error_code),
                        t.partitions.len()
                    ));
                }
            }
        }
    }
    Ok(lines)
}

/// Election types 2, -1 and 7 at v1 and v2 (0 preferred and 1 unclean are the only ones).
async fn elect_leaders_election_types_no_version_defines(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    let full = {
        let client = cx.connect().await?;
        cx.create(&client, "t", 1, &[]).await?
    };
    let asked: &[(&str, &[i32])] = &[(full.as_str(), &[0])];
    for (version, kind) in [(1, 2), (2, 2), (2, -1), (2, 7)] {
        let client = cx.connect().await?;
        match elect(&cx, &client, version, kind, Some(asked)).await {
            Ok(l) => lines.extend(l),
            Err(e) if closed(&e) => {
                lines.push(format!("elect v{version} type {kind}: connection closed"));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(lines)
}

/// Election type 2 with a null partition list (every partition).
async fn elect_leaders_unknown_type_for_every_partition(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    cx.create(&client, "t", 1, &[]).await?;
    match elect(&cx, &client, 2, 2, None).await {
        Ok(lines) => Ok(lines),
        Err(e) if closed(&e) => Ok(vec!["elect v2 type 2 every: connection closed".to_owned()]),
        Err(e) => Err(e),
    }
}

/// An empty topic list (not null: nothing to elect), and a topic with an empty partition list.
async fn elect_leaders_empty_lists(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = elect(&cx, &client, 2, 0, Some(&[])).await?;
    lines.extend(elect(&cx, &client, 2, 0, Some(&[(full.as_str(), &[])])).await?);
    Ok(lines)
}

/// A partition named twice in one topic entry, and a topic in two entries.
async fn elect_leaders_partition_named_twice(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 2, &[]).await?;
    let t = full.as_str();
    let mut lines = elect(&cx, &client, 2, 0, Some(&[(t, &[0, 0])])).await?;
    lines.extend(elect(&cx, &client, 2, 0, Some(&[(t, &[0]), (t, &[1])])).await?);
    Ok(lines)
}

/// An unknown topic, a partition past the topic's, and an empty topic list (not null).
async fn describe_log_dirs_of_what_does_not_exist(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let unknown = cx.topic("unknown");
    let mut lines = log_dirs(&cx, &client, 4, Some(&[(unknown.as_str(), &[0])])).await?;
    lines.extend(log_dirs(&cx, &client, 4, Some(&[(full.as_str(), &[5, 0])])).await?);
    lines.extend(log_dirs(&cx, &client, 4, Some(&[])).await?);
    Ok(lines)
}

/// AlterPartitionReassignments of no topic, ListPartitionReassignments of an empty list, of
/// an unknown topic, and of a topic with no partitions named.
async fn partition_reassignments_of_nothing(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let unknown = cx.topic("unknown");
    let mut lines = alter(&cx, &client, 1, true, &[]).await?;
    lines.extend(list(&cx, &client, Some(&[])).await?);
    lines.extend(list(&cx, &client, Some(&[(unknown.as_str(), &[0])])).await?);
    lines.extend(list(&cx, &client, Some(&[(full.as_str(), &[])])).await?);
    Ok(lines)
}

/// A topic written without producer ids, an unknown topic, a partition past the topic's, a
/// negative one, and a partition named twice: per partition `NAME/P: ERROR N producers`.
async fn describe_producers_errors(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let unknown = cx.topic("unknown");
    let request = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(name(&full))
            .with_partition_indexes(vec![0, 5, -1, 0]),
        TopicRequest::default()
            .with_name(name(&unknown))
            .with_partition_indexes(vec![0]),
    ]);
    let answer = client.send(request, 0).await?;
    let mut lines: Lines = answer
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                format!(
                    "{}/{}: {} {} producers",
                    cx.short(&t.name.0),
                    p.partition_index,
                    err(p.error_code),
                    p.active_producers.len()
                )
            })
        })
        .collect();
    lines.sort();
    Ok(lines)
}

/// DescribeCluster v1 and v2 asking for brokers (1), controllers (2), and types no version
/// defines (0, 3), with and without fenced brokers: the error, the endpoint type answered, the
/// number of nodes listed.
async fn describe_cluster_endpoint_types(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for (version, kind, fenced) in [
        (1, 1, false),
        (1, 2, false),
        (1, 0, false),
        (1, 3, false),
        (2, 1, true),
        (2, 2, true),
    ] {
        let client = cx.connect().await?;
        let request = DescribeClusterRequest::default()
            .with_endpoint_type(kind)
            .with_include_fenced_brokers(fenced);
        let what = format!("v{version} endpoint type {kind} fenced {fenced}");
        match answered(client.send(request, version).await)? {
            None => lines.push(format!("{what}: connection closed")),
            Some(a) => lines.push(format!(
                "{what}: {} endpoint type {} nodes {}",
                err(a.error_code),
                a.endpoint_type,
                a.brokers.len()
            )),
        }
    }
    Ok(lines)
}
