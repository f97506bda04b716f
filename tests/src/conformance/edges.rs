//! Edges: topic names Kafka refuses (length, characters, collisions), config values it refuses,
//! DeleteTopics of duplicates and empty lists, a deleted topic used again, ListOffsets and Fetch at the ends of a log, Produce of
//! records too large and of keyless records to a compacted topic, OffsetCommit refusals.

use anyhow::Result;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{DeleteTopicsRequest, GroupId, OffsetCommitRequest};
use kmock_client::Client;

use super::batches::{record_at, v2};
use super::fetch::fetch;
use super::offsets::{list, three_records};
use super::produce::produce_labelled;
use super::{case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(create_topics_invalid_names),
    case!(create_topics_name_lengths),
    case!(create_topics_already_exists),
    case!(create_topics_colliding_names),
    case!(create_topics_invalid_config_values),
    case!(delete_topics_duplicate_and_empty),
    case!(delete_topics_then_use_the_name),
    case!(list_offsets_empty_log),
    case!(list_offsets_timestamps_past_the_end_and_negative),
    case!(fetch_at_the_log_edges),
    case!(produce_record_too_large),
    case!(produce_keyless_record_to_a_compacted_topic),
    case!(offset_commit_refusals),
];

/// CreateTopics of one topic named `full` (one partition, replication factor 1) with
/// `configs`: `create LABEL: ERROR`.
async fn create_line(
    cx: &Ctx,
    client: &Client,
    label: &str,
    full: &str,
    configs: &[(&str, &str)],
) -> Result<String> {
    let request = kafka_protocol::messages::CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![
            kafka_protocol::messages::create_topics_request::CreatableTopic::default()
                .with_name(name(full))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            kafka_protocol::messages::create_topics_request::CreatableTopicConfig::default()
                                .with_name(text(k))
                                .with_value(Some(text(v)))
                        })
                        .collect(),
                ),
        ]);
    let answer = client.send(request, 7).await?;
    let code = answer.topics[0].error_code;
    if code == 0 {
        cx.ready(client, full, 1).await?;
    }
    Ok(format!("create {label}: {}", err(code)))
}

async fn create_topics_invalid_names(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for bad in ["", ".", "..", "a/b", "a b", "a:b", "ä", "a\nb"] {
        lines.push(create_line(&cx, &client, &format!("{bad:?}"), bad, &[]).await?);
    }
    Ok(lines)
}

async fn create_topics_name_lengths(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for length in [249, 250] {
        let mut full = cx.topic("n");
        full.extend(std::iter::repeat_n('x', length - full.len()));
        lines.push(create_line(&cx, &client, &format!("{length} chars"), &full, &[]).await?);
    }
    Ok(lines)
}

async fn create_topics_already_exists(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.topic("t");
    Ok(vec![
        create_line(&cx, &client, "first", &full, &[]).await?,
        create_line(&cx, &client, "again", &full, &[]).await?,
    ])
}

/// `a.b` and `a_b` collide in metric names: Kafka refuses the second.
async fn create_topics_colliding_names(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (dot, underscore) = (cx.topic("a.b"), cx.topic("a_b"));
    Ok(vec![
        create_line(&cx, &client, "a.b", &dot, &[]).await?,
        create_line(&cx, &client, "a_b", &underscore, &[]).await?,
    ])
}

async fn create_topics_invalid_config_values(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for (i, (key, value)) in [
        ("retention.ms", "abc"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "bogus"),
        ("cleanup.policy", "compact,delete"),
        ("min.insync.replicas", "0"),
        ("max.message.bytes", "-5"),
        ("segment.bytes", "1"),
        ("compression.type", "brotli"),
        ("compression.type", "zstd"),
        ("message.timestamp.type", "LogAppendTime"),
    ]
    .into_iter()
    .enumerate()
    {
        let full = cx.topic(&format!("c{i}"));
        let label = format!("{key}={value}");
        lines.push(create_line(&cx, &client, &label, &full, &[(key, value)]).await?);
    }
    Ok(lines)
}

/// DeleteTopics v6 of `names`: `delete [NAME: ERROR, ...]` sorted, or `connection closed`.
async fn delete(cx: &Ctx, client: &Client, names: &[&str]) -> Result<String> {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            names
                .iter()
                .map(|n| DeleteTopicState::default().with_name(Some(name(n))))
                .collect(),
        );
    let Some(answer) = super::answered(client.send(request, 6).await)? else {
        return Ok("delete: connection closed".to_owned());
    };
    let mut results: Vec<String> = answer
        .responses
        .iter()
        .map(|r| {
            format!(
                "{}: {}",
                r.name.as_ref().map_or("null", |n| cx.short(&n.0)),
                err(r.error_code)
            )
        })
        .collect();
    results.sort();
    Ok(format!("delete [{}]", results.join(", ")))
}

async fn delete_topics_duplicate_and_empty(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    // Not `__consumer_offsets`: Kafka 4.4 deletes it (NONE), and the group cases that follow
    // would then meet a coordinator that reloads.
    let mut lines = vec![delete(&cx, &client, &[&full, &full]).await?];
    lines.push(delete(&cx, &client, &[]).await?);
    Ok(lines)
}

/// Waits until Metadata no longer lists `full` (Kafka answers DeleteTopics once its controller
/// has removed the topic, before its broker has).
async fn gone(client: &Client, full: &str) -> Result<()> {
    loop {
        let metadata = client.metadata(Some(&[full])).await?;
        if metadata.topics[0].error_code != 0 {
            return Ok(());
        }
        // Polling, the only way a client learns a topic is gone; the case's hang guard bounds it.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A topic deleted, then its name used by Metadata, ListOffsets and Produce, then created anew.
async fn delete_topics_then_use_the_name(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = vec![delete(&cx, &client, &[&full]).await?];
    gone(&client, &full).await?;
    lines.push(delete(&cx, &client, &[&full]).await?);
    lines.extend(list(&cx, &full, 7, &[(0, -1)]).await?);
    let batch = v2(&[record_at(b"k", b"v", 1000)])?;
    lines.extend(produce_labelled(&cx, &client, "produce", &full, batch, -1).await?);
    lines.push(create_line(&cx, &client, "anew", &full, &[]).await?);
    lines.extend(list(&cx, &full, 7, &[(0, -1)]).await?);
    Ok(lines)
}

async fn list_offsets_empty_log(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for version in [1, 4, 7] {
        lines.extend(list(&cx, &full, version, &[(0, -2)]).await?);
        lines.extend(list(&cx, &full, version, &[(0, -1)]).await?);
        lines.extend(list(&cx, &full, version, &[(0, 0)]).await?);
    }
    lines.extend(list(&cx, &full, 7, &[(0, -3)]).await?);
    Ok(lines)
}

async fn list_offsets_timestamps_past_the_end_and_negative(cx: Ctx) -> Result<Lines> {
    let (_client, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for ts in [10_000, 3000, 3001, 0, 999, -6, -100] {
        lines.extend(list(&cx, &full, 7, &[(0, ts)]).await?);
    }
    Ok(lines)
}

async fn fetch_at_the_log_edges(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for offset in [0, 1, 2, 3, 4, -1, i64::MAX] {
        lines.push(format!("offset {offset}:"));
        let asked = [(full.as_str(), 0, offset, -1, 1 << 20)];
        lines.extend(fetch(&cx, &client, 12, 1 << 20, 0, &asked).await?);
    }
    Ok(lines)
}

async fn produce_record_too_large(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx
        .create(&client, "t", 1, &[("max.message.bytes", "200")])
        .await?;
    let mut lines = Vec::new();
    for size in [10usize, 300] {
        let batch = v2(&[record_at(b"k", &vec![b'x'; size], 1000)])?;
        let what = format!("value of {size} bytes");
        lines.extend(produce_labelled(&cx, &client, &what, &full, batch, -1).await?);
    }
    Ok(lines)
}

async fn produce_keyless_record_to_a_compacted_topic(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx
        .create(&client, "t", 1, &[("cleanup.policy", "compact")])
        .await?;
    let mut keyless = record_at(b"", b"v", 1000);
    keyless.key = None;
    let mut lines = Vec::new();
    let batch = v2(&[keyless])?;
    lines.extend(produce_labelled(&cx, &client, "no key", &full, batch, -1).await?);
    let batch = v2(&[record_at(b"k", b"v", 1000)])?;
    lines.extend(produce_labelled(&cx, &client, "a key", &full, batch, -1).await?);
    Ok(lines)
}

/// OffsetCommit v8 of one partition: `commit LABEL: ERROR`.
async fn commit_one(
    client: &Client,
    label: &str,
    group: &str,
    full: &str,
    partition: i32,
    offset: i64,
    metadata: Option<String>,
) -> Result<String> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(text(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(full))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(metadata.map(|m| text(&m)))])]);
    let answer = client.send(request, 8).await?;
    let codes: Vec<String> = answer
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| err(p.error_code))
        .collect();
    Ok(format!("commit {label}: {}", codes.join(" ")))
}

async fn offset_commit_refusals(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    super::groups::coordinator(&client, &group).await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let long = Some("m".repeat(4097));
    Ok(vec![
        commit_one(
            &client,
            "metadata 4096",
            &group,
            &full,
            0,
            1,
            Some("m".repeat(4096)),
        )
        .await?,
        commit_one(&client, "metadata 4097", &group, &full, 0, 1, long).await?,
        commit_one(&client, "partition 7", &group, &full, 7, 1, None).await?,
        commit_one(&client, "offset -5", &group, &full, 0, -5, None).await?,
        commit_one(&client, "past the end", &group, &full, 0, 1_000_000, None).await?,
    ])
}
