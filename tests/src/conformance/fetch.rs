//! Fetch edge cases: `max_bytes` and `partition_max_bytes` of 0 (Kafka still returns the first
//! batch, KIP-74), both isolation levels on records outside transactions, the partition's
//! `current_leader_epoch` above and below the leader's, partitions and topics that do not
//! exist, and offsets out of range at an older version.

use anyhow::Result;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::FetchRequest;
use kmock_client::Client;

use super::offsets::three_records;
use super::{case, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(fetch_max_bytes_zero),
    case!(fetch_isolation_levels),
    case!(fetch_leader_epochs),
    case!(fetch_unknown_partition_and_topic),
];

/// One partition of a Fetch: (topic full name, partition, fetch offset, current leader epoch,
/// partition max bytes).
type Asked<'a> = (&'a str, i32, i64, i32, i32);

/// Fetch at `version` (4..=12, by topic name) with `max_bytes` and `isolation_level` of the
/// `asked` partitions, not waiting: one line per partition answer, `NAME/P: ERROR hw H lso L
/// log start S records N` (N the records decoded), sorted.
pub(super) async fn fetch(
    cx: &Ctx,
    client: &Client,
    version: i16,
    max_bytes: i32,
    isolation_level: i8,
    asked: &[Asked<'_>],
) -> Result<Lines> {
    let topics = asked
        .iter()
        .map(|(full, partition, offset, epoch, partition_max)| {
            FetchTopic::default()
                .with_topic(name(full))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(*partition)
                    .with_fetch_offset(*offset)
                    .with_current_leader_epoch(*epoch)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(*partition_max)])
        })
        .collect();
    let request = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_isolation_level(isolation_level)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics);
    let answer = client.send(request, version).await?;
    let mut lines = Vec::new();
    if answer.error_code != 0 {
        lines.push(format!("fetch: {}", err(answer.error_code)));
    }
    for t in &answer.responses {
        for p in &t.partitions {
            let records = match &p.records {
                Some(bytes) => kmock_client::decode_records(bytes)?.len(),
                None => 0,
            };
            lines.push(format!(
                "{}/{}: {} hw {} lso {} log start {} records {records}",
                cx.short(&t.topic.0),
                p.partition_index,
                err(p.error_code),
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset
            ));
        }
    }
    lines.sort();
    Ok(lines)
}

/// Three one-record batches fetched with `max_bytes` 0, `partition_max_bytes` 0, and both:
/// Kafka returns the first batch whatever the limits, so that a consumer always progresses.
async fn fetch_max_bytes_zero(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for (what, max_bytes, partition_max) in [
        ("max_bytes 0", 0, 1 << 20),
        ("partition_max_bytes 0", 1 << 20, 0),
        ("both 0", 0, 0),
        ("max_bytes 1", 1, 1),
    ] {
        lines.push(format!("{what}:"));
        let asked = [(full.as_str(), 0, 0, -1, partition_max)];
        lines.extend(fetch(&cx, &client, 12, max_bytes, 0, &asked).await?);
    }
    Ok(lines)
}

/// Records written without transactions, read uncommitted and committed.
async fn fetch_isolation_levels(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for (what, level) in [("read_uncommitted", 0), ("read_committed", 1)] {
        lines.push(format!("{what}:"));
        let asked = [(full.as_str(), 0, 0, -1, 1 << 20)];
        lines.extend(fetch(&cx, &client, 12, 1 << 20, level, &asked).await?);
    }
    Ok(lines)
}

/// The partition's `current_leader_epoch` as the leader's (0), above it and below no epoch.
async fn fetch_leader_epochs(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for epoch in [0, 1, 7, -1] {
        lines.push(format!("current leader epoch {epoch}:"));
        let asked = [(full.as_str(), 0, 0, epoch, 1 << 20)];
        lines.extend(fetch(&cx, &client, 12, 1 << 20, 0, &asked).await?);
    }
    Ok(lines)
}

/// A partition past the topic's, a negative one and an unknown topic, at v12 and v4; an
/// offset past the end at v4.
async fn fetch_unknown_partition_and_topic(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let nobody = cx.topic("nobody");
    let mut lines = Vec::new();
    for version in [12, 4] {
        lines.push(format!("v{version}:"));
        let asked = [
            (full.as_str(), 1, 0, -1, 1 << 20),
            (nobody.as_str(), 0, 0, -1, 1 << 20),
        ];
        lines.extend(fetch(&cx, &client, version, 1 << 20, 0, &asked).await?);
        let past = [(full.as_str(), 0, 10, -1, 1 << 20)];
        lines.extend(fetch(&cx, &client, version, 1 << 20, 0, &past).await?);
    }
    Ok(lines)
}
