//! ElectLeaders and DescribeLogDirs on the one-node broker: preferred and unclean elections
//! where none is needed, unknown topics and partitions, every partition (null list, only this
//! case's topics printed: a real broker holds every other case's); the log directory's
//! partitions and sizes at each version, asked by name and all at once.

use anyhow::Result;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{DescribeLogDirsRequest, ElectLeadersRequest};
use kmock_client::Client;

use super::offsets::three_records;
use super::{case, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(elect_leaders_where_none_is_needed),
    case!(describe_log_dirs_at_each_version),
];

/// ElectLeaders at `version` of `election_type` and (topic, partitions) or every partition:
/// the top-level error (v1+) and `  NAME/P: ERROR` per partition of this case's topics, sorted.
pub(super) async fn elect(
    cx: &Ctx,
    client: &Client,
    version: i16,
    election_type: i8,
    asked: Option<&[(&str, &[i32])]>,
) -> Result<Lines> {
    let request = ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_timeout_ms(30_000)
        .with_topic_partitions(asked.map(|topics| {
            topics
                .iter()
                .map(|(t, ps)| {
                    TopicPartitions::default()
                        .with_topic(name(t))
                        .with_partitions(ps.to_vec())
                })
                .collect()
        }));
    let answer = client.send(request, version).await?;
    let mut lines = vec![format!(
        "elect v{version} type {election_type} {}: {}",
        if asked.is_some() { "named" } else { "every" },
        err(answer.error_code)
    )];
    let mut results: Lines = answer
        .replica_election_results
        .iter()
        .filter(|t| cx.short(&t.topic.0) != t.topic.0.as_str())
        .flat_map(|t| {
            let mut lines = vec![format!(
                "  {}: {} results",
                cx.short(&t.topic.0),
                t.partition_result.len()
            )];
            lines.extend(t.partition_result.iter().map(|p| {
                format!(
                    "  {}/{}: {}",
                    cx.short(&t.topic.0),
                    p.partition_id,
                    err(p.error_code)
                )
            }));
            lines
        })
        .collect();
    results.sort();
    lines.extend(results);
    Ok(lines)
}

async fn elect_leaders_where_none_is_needed(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let t = cx.create(&client, "t", 2, &[]).await?;
    let unknown = cx.topic("unknown");
    let both: &[(&str, &[i32])] = &[(t.as_str(), &[0, 1])];
    let mut lines = elect(&cx, &client, 0, 0, Some(both)).await?;
    lines.extend(elect(&cx, &client, 1, 0, Some(both)).await?);
    lines.extend(elect(&cx, &client, 2, 1, Some(both)).await?);
    lines.extend(
        elect(
            &cx,
            &client,
            2,
            0,
            Some(&[(t.as_str(), &[5]), (unknown.as_str(), &[0])]),
        )
        .await?,
    );
    lines.extend(elect(&cx, &client, 2, 0, None).await?);
    lines.extend(elect(&cx, &client, 2, 1, None).await?);
    Ok(lines)
}

/// DescribeLogDirs at `version` of `asked` (or every topic): per directory its error and, for
/// this case's topics, `  NAME/P size S lag L future F`, sorted.
pub(super) async fn log_dirs(
    cx: &Ctx,
    client: &Client,
    version: i16,
    asked: Option<&[(&str, &[i32])]>,
) -> Result<Lines> {
    let request = DescribeLogDirsRequest::default().with_topics(asked.map(|topics| {
        topics
            .iter()
            .map(|(t, ps)| {
                DescribableLogDirTopic::default()
                    .with_topic(name(t))
                    .with_partitions(ps.to_vec())
            })
            .collect()
    }));
    let answer = client.send(request, version).await?;
    let mut lines = vec![format!(
        "log dirs v{version} {}: {} directories, {}",
        if asked.is_some() { "named" } else { "every" },
        answer.results.len(),
        err(answer.error_code)
    )];
    for dir in &answer.results {
        let mut parts: Lines = dir
            .topics
            .iter()
            .filter(|t| cx.short(&t.name.0) != t.name.0.as_str())
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    format!(
                        "  {}/{} size {} lag {} future {}",
                        cx.short(&t.name.0),
                        p.partition_index,
                        p.partition_size,
                        p.offset_lag,
                        p.is_future_key
                    )
                })
            })
            .collect();
        parts.sort();
        lines.push(format!("  dir: {}", err(dir.error_code)));
        lines.extend(parts);
    }
    Ok(lines)
}

async fn describe_log_dirs_at_each_version(cx: Ctx) -> Result<Lines> {
    let (client, t) = three_records(&cx).await?;
    let unknown = cx.topic("unknown");
    let asked: &[(&str, &[i32])] = &[(t.as_str(), &[0, 3]), (unknown.as_str(), &[0])];
    let mut lines = Vec::new();
    for version in 1..=4 {
        lines.extend(log_dirs(&cx, &client, version, Some(asked)).await?);
    }
    lines.extend(log_dirs(&cx, &client, 4, None).await?);
    Ok(lines)
}
