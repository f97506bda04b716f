//! DeleteRecords: the log start offset moving up (never down, -1 the high watermark) at each
//! version, what ListOffsets and Fetch answer below and above it afterwards, offsets out of
//! range, and the errors of unknown partitions, a compacted topic and a partition named twice.

use anyhow::Result;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::DeleteRecordsRequest;
use kmock_client::Client;

use super::fetch::fetch;
use super::offsets::{list, three_records};
use super::{case, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(delete_records_moves_the_log_start),
    case!(delete_records_errors),
];

/// DeleteRecords at `version` of (topic full name, partition, offset) entries, in one topic
/// entry per item: a line naming what was asked, then `  NAME/P: ERROR low watermark L` per
/// answer, sorted (Kafka answers in hash order).
async fn delete(
    cx: &Ctx,
    client: &Client,
    version: i16,
    asked: &[(&str, i32, i64)],
) -> Result<Lines> {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            asked
                .iter()
                .map(|(full, p, offset)| {
                    DeleteRecordsTopic::default()
                        .with_name(name(full))
                        .with_partitions(vec![DeleteRecordsPartition::default()
                            .with_partition_index(*p)
                            .with_offset(*offset)])
                })
                .collect(),
        );
    let said: Vec<String> = asked
        .iter()
        .map(|(full, p, offset)| format!("{}/{p}->{offset}", cx.short(full)))
        .collect();
    let answer = client.send(request, version).await?;
    let mut answers: Lines = answer
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                format!(
                    "  {}/{}: {} low watermark {}",
                    cx.short(&t.name.0),
                    p.partition_index,
                    err(p.error_code),
                    p.low_watermark
                )
            })
        })
        .collect();
    answers.sort();
    let mut lines = vec![format!("delete v{version} [{}]:", said.join(" "))];
    lines.extend(answers);
    Ok(lines)
}

/// Three records stamped 1000, 3000, 2000 at offsets 0–2. Deleting before 1 (v0): earliest is
/// 1, a timestamp search starts there, a Fetch at 0 is out of range and one at 1 reads two
/// records. Before 2 (v1): where the largest timestamp lies, now below the log start. Before 1
/// again (v2): nothing moves. -1: up to the high watermark. Past it, and below -1: out of range.
async fn delete_records_moves_the_log_start(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let t = full.as_str();
    let mut lines = delete(&cx, &client, 0, &[(t, 0, 1)]).await?;
    for ts in [-2, -1, 0, 1500, -3] {
        lines.extend(list(&cx, t, 10, &[(0, ts)]).await?);
    }
    for offset in [0, 1] {
        lines.push(format!("fetch at {offset}:"));
        lines.extend(fetch(&cx, &client, 12, 1 << 20, 0, &[(t, 0, offset, -1, 1 << 20)]).await?);
    }
    lines.extend(delete(&cx, &client, 1, &[(t, 0, 2)]).await?);
    for ts in [-2, 0, -3] {
        lines.extend(list(&cx, t, 10, &[(0, ts)]).await?);
    }
    lines.extend(delete(&cx, &client, 2, &[(t, 0, 1)]).await?);
    lines.extend(delete(&cx, &client, 2, &[(t, 0, -1)]).await?);
    lines.extend(list(&cx, t, 10, &[(0, -2)]).await?);
    lines.push("fetch at 3:".to_owned());
    lines.extend(fetch(&cx, &client, 12, 1 << 20, 0, &[(t, 0, 3, -1, 1 << 20)]).await?);
    lines.extend(delete(&cx, &client, 2, &[(t, 0, 4)]).await?);
    lines.extend(delete(&cx, &client, 2, &[(t, 0, -2)]).await?);
    Ok(lines)
}

/// An unknown topic and partition, a compacted topic (POLICY_VIOLATION, even at offset 0), one
/// with both policies (allowed), and a partition named twice in one request (one answer). The
/// two offsets are the same: with different ones, Kafka 4.4.0 kept the last (1) in one run and
/// the first (2) in another, so which wins is not part of its behaviour.
async fn delete_records_errors(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let compact = cx
        .create(&client, "compact", 1, &[("cleanup.policy", "compact")])
        .await?;
    let both = cx
        .create(&client, "both", 1, &[("cleanup.policy", "compact,delete")])
        .await?;
    let unknown = cx.topic("unknown");
    let mut lines = delete(
        &cx,
        &client,
        2,
        &[
            (&unknown, 0, 0),
            (&full, 1, 0),
            (&compact, 0, 0),
            (&both, 0, 0),
        ],
    )
    .await?;
    lines.extend(delete(&cx, &client, 2, &[(&compact, 0, -1)]).await?);
    lines.extend(delete(&cx, &client, 2, &[(&full, 0, 2), (&full, 0, 2)]).await?);
    lines.extend(list(&cx, &full, 10, &[(0, -2)]).await?);
    Ok(lines)
}
