//! DescribeTopicPartitions (KIP-966): named topics paged by a partition limit with the cursor
//! until the last page, unknown and illegal names among them, a limit of 0, and the cursors
//! Kafka refuses. (Asking for every topic is not a case: a real broker holds the topics of
//! every other case.)

use anyhow::Result;
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::DescribeTopicPartitionsRequest;
use kmock_client::Client;

use super::{case, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(describe_topic_partitions_paging),
    case!(describe_topic_partitions_bad_cursors),
];

/// One DescribeTopicPartitions of `topics` (full names) with `limit` and `cursor`: a line per
/// topic, `  NAME: ERROR internal I ops O`, a line per partition, `    P leader L epoch E
/// replicas R isr I offline O elr E last known elr K`, and the next cursor. Returns the lines
/// and the next cursor.
pub(super) async fn page(
    cx: &Ctx,
    client: &Client,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> Result<(Lines, Option<(String, i32)>)> {
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(name(t)))
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            Cursor::default()
                .with_topic_name(name(t))
                .with_partition_index(p)
        }));
    let answer = client.send(request, 0).await?;
    let mut lines = vec![format!(
        "limit {limit} cursor {}:",
        cursor.map_or("none".to_owned(), |(t, p)| format!("{}/{p}", cx.short(t)))
    )];
    for t in &answer.topics {
        lines.push(format!(
            "  {}: {} internal {} ops {}",
            cx.short(t.name.as_ref().map_or("null", |n| n.0.as_str())),
            err(t.error_code),
            t.is_internal,
            t.topic_authorized_operations
        ));
        for p in &t.partitions {
            let ids = |v: &[kafka_protocol::messages::BrokerId]| {
                v.iter()
                    .map(|b| b.0.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let opt = |v: &Option<Vec<kafka_protocol::messages::BrokerId>>| {
                v.as_ref()
                    .map_or("null".to_owned(), |v| format!("[{}]", ids(v)))
            };
            lines.push(format!(
                "    {} leader {} epoch {} replicas [{}] isr [{}] offline [{}] elr {} last known elr {}",
                p.partition_index,
                p.leader_id.0,
                p.leader_epoch,
                ids(&p.replica_nodes),
                ids(&p.isr_nodes),
                ids(&p.offline_replicas),
                opt(&p.eligible_leader_replicas),
                opt(&p.last_known_elr)
            ));
        }
    }
    let next = answer
        .next_cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    lines.push(match &next {
        Some((t, p)) => format!("  next cursor {}/{p}", cx.short(t)),
        None => "  no next cursor".to_owned(),
    });
    Ok((lines, next))
}

/// Topics a (3 partitions), b (2), c (1), an unknown one and an illegal name, asked (in a
/// shuffled order, `b` twice) with a limit of 2, then with each next cursor until there is
/// none; then all at once with the default limit, and with a limit of 0.
async fn describe_topic_partitions_paging(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let a = cx.create(&client, "a", 3, &[]).await?;
    let b = cx.create(&client, "b", 2, &[]).await?;
    let c = cx.create(&client, "c", 1, &[]).await?;
    let unknown = cx.topic("unknown");
    let topics = [
        c.as_str(),
        unknown.as_str(),
        b.as_str(),
        "bad/name",
        a.as_str(),
        b.as_str(),
    ];
    let mut lines = Vec::new();
    let mut cursor: Option<(String, i32)> = None;
    for _ in 0..10 {
        let (page_lines, next) = page(
            &cx,
            &client,
            &topics,
            2,
            cursor.as_ref().map(|(t, p)| (t.as_str(), *p)),
        )
        .await?;
        lines.extend(page_lines);
        cursor = next;
        if cursor.is_none() {
            break;
        }
    }
    lines.extend(page(&cx, &client, &topics, 2000, None).await?.0);
    lines.extend(page(&cx, &client, &[a.as_str()], 0, None).await?.0);
    lines.extend(
        page(&cx, &client, &[a.as_str()], 2, Some((a.as_str(), 5)))
            .await?
            .0,
    );
    Ok(lines)
}

/// A cursor naming a topic that is not asked for, and a cursor with a negative partition.
async fn describe_topic_partitions_bad_cursors(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let a = cx.create(&client, "a", 2, &[]).await?;
    let other = cx.topic("other");
    let mut lines = page(&cx, &client, &[a.as_str()], 10, Some((other.as_str(), 0)))
        .await?
        .0;
    lines.extend(
        page(&cx, &client, &[a.as_str()], 10, Some((a.as_str(), -1)))
            .await?
            .0,
    );
    Ok(lines)
}
