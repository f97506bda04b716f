//! ListOffsets (duplicate entries, the special timestamps at each version) and Fetch at the
//! edges of a log.

use anyhow::Result;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest};
use kmock_client::Client;

use super::batches::{record_at, v2};
use super::{answered, case, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(list_offsets_same_partition_twice),
    case!(list_offsets_special_timestamps),
    case!(list_offsets_special_timestamps_at_older_versions),
    case!(list_offsets_unknown_partition),
    case!(fetch_out_of_range_and_unknown),
];

/// The timestamps of the three records [`three_records`] appends: 1000, 3000, 2000.
const STAMPS: [i64; 3] = [1000, 3000, 2000];

/// A client and a one-partition topic holding three records stamped [`STAMPS`].
pub(super) async fn three_records(cx: &Ctx) -> Result<(Client, String)> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    for stamp in STAMPS {
        let batch = v2(&[record_at(b"k", b"v", stamp)])?;
        let answer = client
            .send(
                kafka_protocol::messages::ProduceRequest::default()
                    .with_acks(-1)
                    .with_timeout_ms(30_000)
                    .with_topic_data(vec![
                        kafka_protocol::messages::produce_request::TopicProduceData::default()
                            .with_name(name(&full))
                            .with_partition_data(vec![
                                kafka_protocol::messages::produce_request::PartitionProduceData::default()
                                    .with_index(0)
                                    .with_records(Some(batch.into())),
                            ]),
                    ]),
                9,
            )
            .await?;
        let code = answer.responses[0].partition_responses[0].error_code;
        anyhow::ensure!(code == 0, "producing to {full}: {}", err(code));
    }
    Ok((client, full))
}

/// ListOffsets at `version` of (partition, timestamp) entries of `full`: a line naming the
/// entries asked, then one line per answer, `P: ERROR offset O timestamp T`, sorted (Kafka
/// answers the partitions in hash order); `connection closed` if the broker closed it.
pub(super) async fn list(
    cx: &Ctx,
    full: &str,
    version: i16,
    entries: &[(i32, i64)],
) -> Result<Lines> {
    let client = cx.connect().await?;
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_timeout_ms(30_000)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(full))
            .with_partitions(
                entries
                    .iter()
                    .map(|(p, ts)| {
                        ListOffsetsPartition::default()
                            .with_partition_index(*p)
                            .with_current_leader_epoch(-1)
                            .with_timestamp(*ts)
                    })
                    .collect(),
            )]);
    let asked: Vec<String> = entries.iter().map(|(p, ts)| format!("{p}@{ts}")).collect();
    let mut lines = vec![format!("v{version} [{}]:", asked.join(" "))];
    let Some(answer) = answered(client.send(request, version).await)? else {
        lines.push("  connection closed".to_owned());
        return Ok(lines);
    };
    let mut answers: Lines = answer
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            format!(
                "  {}: {} offset {} timestamp {}",
                p.partition_index,
                err(p.error_code),
                p.offset,
                p.timestamp
            )
        })
        .collect();
    answers.sort();
    lines.extend(answers);
    Ok(lines)
}

async fn list_offsets_same_partition_twice(cx: Ctx) -> Result<Lines> {
    let (_client, full) = three_records(&cx).await?;
    let mut lines = list(&cx, &full, 7, &[(0, -1), (0, -2)]).await?;
    lines.extend(list(&cx, &full, 7, &[(0, -1), (0, -1)]).await?);
    Ok(lines)
}

/// Latest (-1), earliest (-2), max timestamp (-3), earliest local (-4), latest tiered (-5),
/// -6 (earliest pending upload, from v11) and -7 (nothing), and real timestamps, at
/// ListOffsets v10 (kafka-protocol's highest).
async fn list_offsets_special_timestamps(cx: Ctx) -> Result<Lines> {
    let (_client, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for ts in [-1, -2, -3, -4, -5, -6, -7, 2000, 2500, 4000] {
        lines.extend(list(&cx, &full, 10, &[(0, ts)]).await?);
    }
    Ok(lines)
}

/// The special timestamps at the versions before the one that brought them: -3 came with v7
/// (KIP-734), -4 with v8 (KIP-405), -5 with v9 (KIP-1005), -6 with v11 (KIP-1023); and -1, -2
/// and a timestamp at v1.
async fn list_offsets_special_timestamps_at_older_versions(cx: Ctx) -> Result<Lines> {
    let (_client, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for (version, ts) in [
        (6, -3),
        (7, -4),
        (8, -5),
        (9, -6),
        (1, -1),
        (1, -2),
        (1, 2000),
    ] {
        lines.extend(list(&cx, &full, version, &[(0, ts)]).await?);
    }
    Ok(lines)
}

async fn list_offsets_unknown_partition(cx: Ctx) -> Result<Lines> {
    let (_client, full) = three_records(&cx).await?;
    let mut lines = list(&cx, &full, 7, &[(3, -1), (-1, -1)]).await?;
    lines.extend(list(&cx, &cx.topic("nobody"), 7, &[(0, -1)]).await?);
    Ok(lines)
}

/// Fetch v12 at offset 3 (the end), 4 and -1, and Fetch v13 of an unknown topic id.
async fn fetch_out_of_range_and_unknown(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for offset in [3, 4, -1, 0] {
        let answer = client
            .fetch(&full, 0, offset, std::time::Duration::from_millis(10))
            .await?;
        let p = &answer.responses[0].partitions[0];
        lines.push(format!(
            "fetch at {offset}: {} high watermark {} log start {} records {}",
            err(p.error_code),
            p.high_watermark,
            p.log_start_offset,
            p.records.as_ref().map_or(0, |r| r.len()).min(1)
        ));
    }
    let by_id = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(10)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(uuid::Uuid::from_u128(0x1234_5678))
            .with_partitions(vec![FetchPartition::default()
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)
                .with_log_start_offset(-1)
                .with_current_leader_epoch(-1)])]);
    let answer = client.send(by_id, 13).await?;
    lines.push(format!(
        "fetch v13 of an unknown topic id: {}",
        err(answer.error_code)
    ));
    for t in &answer.responses {
        for p in &t.partitions {
            lines.push(format!(
                "  partition {}: {}",
                p.partition_index,
                err(p.error_code)
            ));
        }
    }
    Ok(lines)
}
