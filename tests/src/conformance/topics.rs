//! Topic administration: CreateTopics (replica assignments, counts, configs, duplicates),
//! CreatePartitions (assignments, counts), DeleteTopics (names and ids), Metadata, and
//! `__consumer_offsets` met as an ordinary topic.

use anyhow::Result;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest,
};
use kmock_client::{record, Client};

use super::{case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(consumer_offsets_as_an_ordinary_topic),
    case!(create_topics_replica_assignment),
    case!(create_topics_assignment_naming_an_unknown_broker),
    case!(create_topics_assignment_naming_a_broker_twice),
    case!(create_topics_assignment_with_no_replicas),
    case!(create_topics_assignment_with_a_partition_count),
    case!(create_topics_assignment_with_a_replication_factor),
    case!(create_topics_assignment_with_a_gap),
    case!(create_topics_same_name_twice),
    case!(create_topics_validate_only),
    case!(create_topics_counts),
    case!(create_topics_configs),
    case!(create_partitions_assignment),
    case!(create_partitions_assignment_of_the_wrong_length),
    case!(create_partitions_assignment_naming_an_unknown_broker),
    case!(create_partitions_assignment_naming_a_broker_twice),
    case!(create_partitions_counts),
    case!(create_partitions_same_topic_twice),
    case!(create_partitions_validate_only),
    case!(delete_topics_by_name_and_id_at_once),
    case!(delete_topics_unknown_name_and_id),
    case!(metadata_unknown_and_invalid_topics),
];

fn brokers(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().map(|id| BrokerId(*id)).collect()
}

/// A CreatableTopic of `full` name.
pub(super) fn creatable(full: &str, partitions: i32, rf: i16) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(full))
        .with_num_partitions(partitions)
        .with_replication_factor(rf)
}

/// A CreatableTopic with a replica assignment: (partition index, broker ids) pairs.
fn assigned(full: &str, partitions: i32, rf: i16, assignment: &[(i32, &[i32])]) -> CreatableTopic {
    creatable(full, partitions, rf).with_assignments(
        assignment
            .iter()
            .map(|(p, ids)| {
                CreatableReplicaAssignment::default()
                    .with_partition_index(*p)
                    .with_broker_ids(brokers(ids))
            })
            .collect(),
    )
}

/// CreateTopics v7 of `topics`: one line per result, `name: ERROR` (sorted: the order of the
/// results is not what a case checks), then a Metadata line for each distinct topic.
pub(super) async fn create(
    cx: &Ctx,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut names: Vec<String> = topics.iter().map(|t| t.name.0.to_string()).collect();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
        .with_topics(topics);
    let answer = client.send(request, 7).await?;
    // Kafka answers once its controller has committed the topic, before its broker serves it.
    for t in &answer.topics {
        if t.error_code == 0 && !validate_only {
            cx.ready(&client, &t.name.0, t.num_partitions).await?;
        }
    }
    let mut lines: Lines = answer
        .topics
        .iter()
        .map(|t| {
            let extra = if t.error_code == 0 {
                format!(
                    " partitions {} rf {}",
                    t.num_partitions, t.replication_factor
                )
            } else {
                String::new()
            };
            format!(
                "create {}: {}{extra}",
                cx.short(&t.name.0),
                err(t.error_code)
            )
        })
        .collect();
    lines.sort();
    names.dedup();
    for full in names {
        lines.push(metadata_line(cx, &client, &full).await?);
    }
    Ok(lines)
}

/// `metadata NAME: ERROR, partitions [p:leader:replicas ...], internal`. Waits for the leaders
/// of a topic that exists (see [`Ctx::ready`]).
async fn metadata_line(cx: &Ctx, client: &Client, full: &str) -> Result<String> {
    let mut metadata = client.metadata(Some(&[full])).await?;
    if metadata.topics[0].error_code == 0 {
        cx.ready(client, full, metadata.topics[0].partitions.len() as i32)
            .await?;
        metadata = client.metadata(Some(&[full])).await?;
    }
    let t = &metadata.topics[0];
    let partitions: Vec<String> = t
        .partitions
        .iter()
        .map(|p| {
            let replicas: Vec<String> = p.replica_nodes.iter().map(|r| r.0.to_string()).collect();
            format!("{}:{}", p.partition_index, replicas.join(","))
        })
        .collect();
    Ok(format!(
        "metadata {}: {} partitions [{}] internal {}",
        cx.short(full),
        err(t.error_code),
        partitions.join(" "),
        t.is_internal
    ))
}

/// Kafka creates `__consumer_offsets` from CreateTopics like any topic (it is only created
/// otherwise on the first FindCoordinator), lists it as internal, and refuses produce to it
/// from a client.
async fn consumer_offsets_as_an_ordinary_topic(cx: Ctx) -> Result<Lines> {
    let mut lines = create(&cx, vec![creatable("__consumer_offsets", 1, 1)], false).await?;
    let client = cx.connect().await?;
    let produced = client
        .produce("__consumer_offsets", 0, &[record(b"k", b"v")], 1)
        .await?;
    lines.push(format!(
        "produce to __consumer_offsets: {}",
        err(produced.responses[0].partition_responses[0].error_code)
    ));
    let all = client
        .send(MetadataRequest::default().with_topics(None), 12)
        .await?;
    let listed = all.topics.iter().find(|t| {
        t.name
            .as_ref()
            .is_some_and(|n| n.0.as_str() == "__consumer_offsets")
    });
    lines.push(format!(
        "all topics list __consumer_offsets: {}",
        listed.map_or("no".to_owned(), |t| format!("internal {}", t.is_internal))
    ));
    Ok(lines)
}

async fn create_topics_replica_assignment(cx: Ctx) -> Result<Lines> {
    let t = assigned(&cx.topic("a"), -1, -1, &[(0, &[1]), (1, &[1])]);
    create(&cx, vec![t], false).await
}

async fn create_topics_assignment_naming_an_unknown_broker(cx: Ctx) -> Result<Lines> {
    let t = assigned(&cx.topic("a"), -1, -1, &[(0, &[7])]);
    create(&cx, vec![t], false).await
}

async fn create_topics_assignment_naming_a_broker_twice(cx: Ctx) -> Result<Lines> {
    let t = assigned(&cx.topic("a"), -1, -1, &[(0, &[1, 1])]);
    create(&cx, vec![t], false).await
}

async fn create_topics_assignment_with_no_replicas(cx: Ctx) -> Result<Lines> {
    let t = assigned(&cx.topic("a"), -1, -1, &[(0, &[])]);
    create(&cx, vec![t], false).await
}

async fn create_topics_assignment_with_a_partition_count(cx: Ctx) -> Result<Lines> {
    let t = assigned(&cx.topic("a"), 1, -1, &[(0, &[1])]);
    create(&cx, vec![t], false).await
}

async fn create_topics_assignment_with_a_replication_factor(cx: Ctx) -> Result<Lines> {
    let t = assigned(&cx.topic("a"), -1, 1, &[(0, &[1])]);
    create(&cx, vec![t], false).await
}

async fn create_topics_assignment_with_a_gap(cx: Ctx) -> Result<Lines> {
    let gap = assigned(&cx.topic("gap"), -1, -1, &[(0, &[1]), (2, &[1])]);
    let late = assigned(&cx.topic("late"), -1, -1, &[(1, &[1])]);
    create(&cx, vec![gap, late], false).await
}

async fn create_topics_same_name_twice(cx: Ctx) -> Result<Lines> {
    let full = cx.topic("twice");
    create(
        &cx,
        vec![creatable(&full, 1, 1), creatable(&full, 2, 1)],
        false,
    )
    .await
}

async fn create_topics_validate_only(cx: Ctx) -> Result<Lines> {
    create(&cx, vec![creatable(&cx.topic("dry"), 3, 1)], true).await
}

async fn create_topics_counts(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for (short, partitions, rf) in [
        ("p0", 0, 1),
        ("pneg", -2, 1),
        ("rf0", 1, 0),
        ("rf2", 1, 2),
        ("rfneg", 1, -2),
        ("defaults", -1, -1),
    ] {
        let t = creatable(&cx.topic(short), partitions, rf);
        lines.extend(create(&cx, vec![t], false).await?);
    }
    Ok(lines)
}

async fn create_topics_configs(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for (short, key, value) in [
        ("unknown", "no.such.config", Some("1")),
        ("before", "message.timestamp.before.max.ms", Some("3600000")),
        ("beforeneg", "message.timestamp.before.max.ms", Some("-1")),
        ("afterbad", "message.timestamp.after.max.ms", Some("soon")),
        ("after", "message.timestamp.after.max.ms", Some("3600000")),
        ("nullvalue", "retention.ms", None),
        ("tstype", "message.timestamp.type", Some("Sometime")),
    ] {
        let t =
            creatable(&cx.topic(short), 1, 1).with_configs(vec![CreatableTopicConfig::default()
                .with_name(text(key))
                .with_value(value.map(text))]);
        lines.extend(create(&cx, vec![t], false).await?);
    }
    Ok(lines)
}

/// CreatePartitions v3 of `topics` with `validate_only`: one line per result (sorted), then
/// Metadata.
async fn grow(cx: &Ctx, topics: Vec<CreatePartitionsTopic>, validate_only: bool) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut names: Vec<String> = topics.iter().map(|t| t.name.0.to_string()).collect();
    let counts: Vec<(String, i32)> = topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.count))
        .collect();
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
        .with_topics(topics);
    let answer = client.send(request, 3).await?;
    // Kafka answers once its controller has committed the partitions, before its broker serves
    // them.
    for r in &answer.results {
        let count = counts.iter().find(|(n, _)| n.as_str() == r.name.0.as_str());
        if let (0, false, Some((full, count))) = (r.error_code, validate_only, count) {
            cx.ready(&client, full, *count).await?;
        }
    }
    let mut lines: Lines = answer
        .results
        .iter()
        .map(|r| format!("grow {}: {}", cx.short(&r.name.0), err(r.error_code)))
        .collect();
    lines.sort();
    names.dedup();
    for full in names {
        lines.push(metadata_line(cx, &client, &full).await?);
    }
    Ok(lines)
}

/// A CreatePartitionsTopic to `count` with an assignment of the new partitions, or none.
fn to_count(full: &str, count: i32, assignment: Option<&[&[i32]]>) -> CreatePartitionsTopic {
    CreatePartitionsTopic::default()
        .with_name(name(full))
        .with_count(count)
        .with_assignments(assignment.map(|a| {
            a.iter()
                .map(|ids| CreatePartitionsAssignment::default().with_broker_ids(brokers(ids)))
                .collect()
        }))
}

/// A one-partition topic of this case, created and ready.
async fn one_partition(cx: &Ctx, short: &str) -> Result<String> {
    let client = cx.connect().await?;
    cx.create(&client, short, 1, &[]).await
}

async fn create_partitions_assignment(cx: Ctx) -> Result<Lines> {
    let full = one_partition(&cx, "g").await?;
    grow(&cx, vec![to_count(&full, 3, Some(&[&[1], &[1]]))], false).await
}

async fn create_partitions_assignment_of_the_wrong_length(cx: Ctx) -> Result<Lines> {
    let full = one_partition(&cx, "g").await?;
    grow(&cx, vec![to_count(&full, 3, Some(&[&[1]]))], false).await
}

async fn create_partitions_assignment_naming_an_unknown_broker(cx: Ctx) -> Result<Lines> {
    let full = one_partition(&cx, "g").await?;
    grow(&cx, vec![to_count(&full, 2, Some(&[&[7]]))], false).await
}

async fn create_partitions_assignment_naming_a_broker_twice(cx: Ctx) -> Result<Lines> {
    let full = one_partition(&cx, "g").await?;
    let mut lines = grow(&cx, vec![to_count(&full, 2, Some(&[&[1, 1]]))], false).await?;
    lines.extend(grow(&cx, vec![to_count(&full, 2, Some(&[&[]]))], false).await?);
    Ok(lines)
}

async fn create_partitions_counts(cx: Ctx) -> Result<Lines> {
    let full = one_partition(&cx, "g").await?;
    let mut lines = Vec::new();
    for count in [1, 0, -1, 2] {
        lines.push(format!("to {count}:"));
        lines.extend(grow(&cx, vec![to_count(&full, count, None)], false).await?);
    }
    let unknown = cx.topic("unknown");
    lines.extend(grow(&cx, vec![to_count(&unknown, 2, None)], false).await?);
    Ok(lines)
}

async fn create_partitions_same_topic_twice(cx: Ctx) -> Result<Lines> {
    let full = one_partition(&cx, "g").await?;
    let twice = vec![to_count(&full, 2, None), to_count(&full, 3, None)];
    grow(&cx, twice, false).await
}

async fn create_partitions_validate_only(cx: Ctx) -> Result<Lines> {
    let full = one_partition(&cx, "g").await?;
    grow(&cx, vec![to_count(&full, 4, None)], true).await
}

/// DeleteTopics v6 answered: `delete NAME|id: ERROR` per result (a known id printed as `id`).
async fn delete(cx: &Ctx, client: &Client, topics: Vec<DeleteTopicState>) -> Result<Lines> {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(topics);
    let answer = client.send(request, 6).await?;
    Ok(answer
        .responses
        .iter()
        .map(|r| {
            let who = r
                .name
                .as_ref()
                .map_or("(no name)".to_owned(), |n| cx.short(&n.0).to_owned());
            let id = if r.topic_id.is_nil() {
                "nil id"
            } else {
                "an id"
            };
            format!("delete {who} ({id}): {}", err(r.error_code))
        })
        .collect())
}

async fn topic_id(client: &Client, full: &str) -> Result<uuid::Uuid> {
    Ok(client.metadata(Some(&[full])).await?.topics[0].topic_id)
}

async fn delete_topics_by_name_and_id_at_once(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "both", 1, &[]).await?;
    let id = topic_id(&client, &full).await?;
    let both = DeleteTopicState::default()
        .with_name(Some(name(&full)))
        .with_topic_id(id);
    let mut lines = delete(&cx, &client, vec![both]).await?;
    lines.push(metadata_line(&cx, &client, &full).await?);
    Ok(lines)
}

async fn delete_topics_unknown_name_and_id(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let by_name = DeleteTopicState::default().with_name(Some(name(&cx.topic("nobody"))));
    let by_id = DeleteTopicState::default().with_topic_id(uuid::Uuid::from_u128(0x1234_5678));
    let neither = DeleteTopicState::default();
    let mut lines = Vec::new();
    for state in [by_name, by_id, neither] {
        lines.extend(delete(&cx, &client, vec![state]).await?);
    }
    Ok(lines)
}

async fn metadata_unknown_and_invalid_topics(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for full in [cx.topic("nobody"), "bad name!".to_owned(), String::new()] {
        lines.push(metadata_line(&cx, &client, &full).await?);
    }
    Ok(lines)
}
