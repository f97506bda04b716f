//! Idempotent producers at the edges of sequences and epochs (InitProducerId without a
//! transactional id at each version is `ids.rs`' case): sequences wrapping at 2^31 (a batch ending at
//! `i32::MAX`, one crossing it), a sequence below zero, the highest epoch, and each partition
//! keeping its own sequence.

use anyhow::Result;
use kmock_client::record;

use super::batches::{v2, with_producer};
use super::produce::{init_producer_id, produce, produce_labelled};
use super::{case, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(produce_idempotent_sequence_wraps_at_the_maximum),
    case!(produce_idempotent_batch_across_the_wrap),
    case!(produce_idempotent_sequence_below_zero),
    case!(produce_idempotent_highest_epoch),
    case!(produce_idempotent_sequences_per_partition),
];

/// A client, a topic of `partitions` partitions and an idempotent producer's id and epoch.
async fn producer(cx: &Ctx, partitions: i32) -> Result<(kmock_client::Client, String, i64, i16)> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", partitions, &[]).await?;
    let (pid, epoch) = init_producer_id(&client).await?;
    Ok((client, full, pid, epoch))
}

/// Produces each (label, epoch, first sequence, record count) to partition 0.
async fn plan(
    cx: &Ctx,
    (client, full, pid): (&kmock_client::Client, &str, i64),
    steps: &[(&str, i16, i32, usize)],
) -> Result<Lines> {
    let mut lines = Vec::new();
    for (what, epoch, sequence, count) in steps {
        let records: Vec<_> = (0..*count)
            .map(|i| record(b"k", format!("{sequence}+{i}").as_bytes()))
            .collect();
        let batch = with_producer(v2(&records)?, pid, *epoch, *sequence);
        lines.extend(produce_labelled(cx, client, what, full, batch, -1).await?);
    }
    Ok(lines)
}

/// A first batch at `i32::MAX - 1` of two records (ending at `i32::MAX`), then sequence 0,
/// then a retry of the first, then 2 (a gap).
async fn produce_idempotent_sequence_wraps_at_the_maximum(cx: Ctx) -> Result<Lines> {
    let (client, full, pid, epoch) = producer(&cx, 1).await?;
    let max = i32::MAX;
    plan(
        &cx,
        (&client, &full, pid),
        &[
            ("seq max-1 x2", epoch, max - 1, 2),
            ("seq 0 x1", epoch, 0, 1),
            ("seq max-1 x2 again", epoch, max - 1, 2),
            ("seq 2 x1", epoch, 2, 1),
            ("seq 1 x1", epoch, 1, 1),
        ],
    )
    .await
}

/// A batch of three records from `i32::MAX - 1` (its last sequence wraps to 0), then 1.
async fn produce_idempotent_batch_across_the_wrap(cx: Ctx) -> Result<Lines> {
    let (client, full, pid, epoch) = producer(&cx, 1).await?;
    let max = i32::MAX;
    plan(
        &cx,
        (&client, &full, pid),
        &[
            ("seq max x1", epoch, max, 1),
            ("seq 0 x3", epoch, 0, 3),
            ("seq max-1 x3 at epoch+1", epoch + 1, max - 1, 3),
            ("seq 1 x1 at epoch+1", epoch + 1, 1, 1),
            ("seq 0 x1 at epoch+1", epoch + 1, 0, 1),
        ],
    )
    .await
}

async fn produce_idempotent_sequence_below_zero(cx: Ctx) -> Result<Lines> {
    let (client, full, pid, epoch) = producer(&cx, 1).await?;
    plan(
        &cx,
        (&client, &full, pid),
        &[
            ("seq -5 x1", epoch, -5, 1),
            ("seq -1 x1", epoch, -1, 1),
            ("seq 0 x1", epoch, 0, 1),
            ("seq -1 x1 after 0", epoch, -1, 1),
        ],
    )
    .await
}

/// A producer writing at epoch `i16::MAX` and then at its own epoch, and at epoch -1.
async fn produce_idempotent_highest_epoch(cx: Ctx) -> Result<Lines> {
    let (client, full, pid, epoch) = producer(&cx, 1).await?;
    plan(
        &cx,
        (&client, &full, pid),
        &[
            ("epoch max seq 0", i16::MAX, 0, 1),
            ("epoch max seq 1", i16::MAX, 1, 1),
            ("its epoch seq 0", epoch, 0, 1),
            ("epoch -2 seq 0", -2, 0, 1),
        ],
    )
    .await
}

/// One producer on two partitions: each starts at 0 and keeps its own next sequence; both in
/// one Produce.
async fn produce_idempotent_sequences_per_partition(cx: Ctx) -> Result<Lines> {
    let (client, full, pid, epoch) = producer(&cx, 2).await?;
    let batch = |sequence: i32| -> Result<Option<bytes::Bytes>> {
        Ok(Some(bytes::Bytes::from(with_producer(
            v2(&[record(b"k", b"v")])?,
            pid,
            epoch,
            sequence,
        ))))
    };
    let mut lines = Vec::new();
    for (what, parts) in [
        ("p0 seq 0, p1 seq 0", vec![(0, 0), (1, 0)]),
        ("p0 seq 1, p1 seq 2", vec![(0, 1), (1, 2)]),
        ("p1 seq 1", vec![(1, 1)]),
        ("p0 seq 1 again, p1 seq 2", vec![(0, 1), (1, 2)]),
    ] {
        lines.push(format!("{what}:"));
        let parts = parts
            .into_iter()
            .map(|(p, s)| Ok((full.clone(), p, batch(s)?)))
            .collect::<Result<Vec<_>>>()?;
        lines.extend(produce(&cx, &client, parts, -1).await?);
    }
    Ok(lines)
}
