//! Fetch at its edges: partition limits below a batch, at and past the high watermark, fetch
//! sessions (KIP-227) and forgotten topics, and an isolation level no version defines (in
//! ListOffsets too).

use anyhow::Result;
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ListOffsetsRequest};
use kmock_client::Client;

use super::batches::{record_at, v2};
use super::fetch::fetch;
use super::offsets::three_records;
use super::produce::produce;
use super::{answered, case, closed, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(fetch_partition_max_bytes_below_a_batch),
    case!(fetch_at_and_past_the_high_watermark),
    case!(
        fetch_sessions,
        "kmock keeps no fetch sessions (KIP-227): it answers session id 0 to a request for one, \
         and FETCH_SESSION_ID_NOT_FOUND to every incremental request; stricter, a client falls \
         back to full fetches"
    ),
    case!(fetch_forgotten_topics_without_a_session),
    case!(fetch_and_list_offsets_unknown_isolation_level),
];

/// Two partitions of two one-record batches each, fetched with partition limits of 1 byte
/// (the first partition still returns its first batch, KIP-74; the second nothing), a
/// response limit of 1 byte, and the first partition at its end.
async fn fetch_partition_max_bytes_below_a_batch(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 2, &[]).await?;
    for stamp in [1000, 2000] {
        let parts = (0..2)
            .map(|p| {
                Ok((
                    full.clone(),
                    p,
                    Some(Bytes::from(v2(&[record_at(b"k", b"v", stamp)])?)),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        produce(&cx, &client, parts, -1).await?;
    }
    let t = full.as_str();
    let mut lines = Vec::new();
    for (what, max_bytes, partition_max, first_offset) in [
        ("partition max 1", 1 << 20, 1, 0),
        ("max 1", 1, 1 << 20, 0),
        ("partition max 1, first at its end", 1 << 20, 1, 2),
    ] {
        lines.push(format!("{what}:"));
        let asked = [
            (t, 0, first_offset, -1, partition_max),
            (t, 1, 0, -1, partition_max),
        ];
        lines.extend(fetch(&cx, &client, 12, max_bytes, 0, &asked).await?);
    }
    Ok(lines)
}

/// Three records: a fetch at the high watermark (3) and past it (4), and at -1, each read
/// uncommitted and committed.
async fn fetch_at_and_past_the_high_watermark(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    for offset in [3, 4, -1] {
        for level in [0, 1] {
            lines.push(format!("at {offset} isolation {level}:"));
            let asked = [(full.as_str(), 0, offset, -1, 1 << 20)];
            lines.extend(fetch(&cx, &client, 12, 1 << 20, level, &asked).await?);
        }
    }
    Ok(lines)
}

/// A Fetch v12 of partition 0 of `full` from offset 0 with `session` (id, epoch) and
/// `forgotten` partitions of it.
async fn fetch_session(
    client: &Client,
    full: &str,
    session: (i32, i32),
    forgotten: &[i32],
) -> Result<FetchResponse> {
    let request = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_id(session.0)
        .with_session_epoch(session.1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(full))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_current_leader_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])])
        .with_forgotten_topics_data(if forgotten.is_empty() {
            Vec::new()
        } else {
            vec![ForgottenTopic::default()
                .with_topic(name(full))
                .with_partitions(forgotten.to_vec())]
        });
    Ok(client.send(request, 12).await?)
}

/// `what: ERROR session new|0 partitions N`.
fn session_line(what: &str, answer: &FetchResponse) -> String {
    let partitions: usize = answer.responses.iter().map(|t| t.partitions.len()).sum();
    format!(
        "{what}: {} session {} partitions {partitions}",
        err(answer.error_code),
        if answer.session_id == 0 { "0" } else { "new" }
    )
}

/// A new session (id 0, epoch 0), its next epoch, a skipped epoch, an unknown id, epoch 1 with
/// no id, and closing the session (epoch -1).
async fn fetch_sessions(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let t = full.as_str();
    let first = fetch_session(&client, t, (0, 0), &[]).await?;
    let id = first.session_id;
    let mut lines = vec![session_line("new session", &first)];
    for (what, session) in [
        ("epoch 1", (id, 1)),
        ("epoch 5", (id, 5)),
        ("unknown id", (id.wrapping_add(1).max(1), 1)),
        ("no id, epoch 1", (0, 1)),
        ("close", (id, -1)),
        ("after close, epoch 2", (id, 2)),
    ] {
        let answer = fetch_session(&client, t, session, &[]).await?;
        lines.push(session_line(what, &answer));
    }
    Ok(lines)
}

/// A sessionless full fetch (id 0, epoch -1) that also forgets the partition it fetches, and
/// one that forgets another.
async fn fetch_forgotten_topics_without_a_session(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let t = full.as_str();
    let mut lines = Vec::new();
    for (what, forgotten) in [
        ("forgetting it", &[0][..]),
        ("forgetting another", &[1][..]),
    ] {
        let answer = fetch_session(&client, t, (0, -1), forgotten).await?;
        lines.push(session_line(what, &answer));
    }
    Ok(lines)
}

/// Isolation level 2 (0 and 1 are the only ones) in a Fetch v12 and a ListOffsets v9, each on a
/// connection of its own.
async fn fetch_and_list_offsets_unknown_isolation_level(cx: Ctx) -> Result<Lines> {
    let (_, full) = three_records(&cx).await?;
    let mut lines = Vec::new();
    let client = cx.connect().await?;
    let asked = [(full.as_str(), 0, 0, -1, 1 << 20)];
    match fetch(&cx, &client, 12, 1 << 20, 2, &asked).await {
        Ok(l) => {
            lines.push("fetch isolation 2:".to_owned());
            lines.extend(l);
        }
        Err(e) if closed(&e) => lines.push("fetch isolation 2: connection closed".to_owned()),
        Err(e) => return Err(e),
    }
    let client = cx.connect().await?;
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_isolation_level(2)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(&full))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(-1)])]);
    match answered(client.send(request, 9).await)? {
        None => lines.push("list offsets isolation 2: connection closed".to_owned()),
        Some(answer) => {
            for t in &answer.topics {
                for p in &t.partitions {
                    lines.push(format!(
                        "list offsets isolation 2: {} offset {}",
                        err(p.error_code),
                        p.offset
                    ));
                }
            }
        }
    }
    Ok(lines)
}
