//! Idempotent producers: InitProducerId without a transactional id (new ids, the epoch bump
//! of KIP-360, half-given ids), and Produce sequences across batches of several records
//! (duplicates of older batches, a retry with another record count, producer ids the broker
//! never gave, epochs from the future).

use anyhow::Result;

use super::batches::{v2, with_producer};
use super::produce::{init_producer_id, init_producer_id_with, produce_labelled};
use super::{case, err, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(init_producer_id_without_a_transactional_id),
    case!(produce_idempotent_batches_of_several_records),
    case!(produce_idempotent_unknown_producer_and_epochs),
];

/// InitProducerId v4 without a transactional id: twice from nothing, then with the first id
/// and epoch (an idempotent producer bumping its epoch, KIP-360), then with only one of them
/// given.
async fn init_producer_id_without_a_transactional_id(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (first, epoch) = init_producer_id(&client).await?;
    let (second, _) = init_producer_id(&client).await?;
    let mut lines = vec![
        format!("first: epoch {epoch}"),
        format!("second: a new id {}", second != first),
    ];
    for (what, id, e) in [
        ("with its id and epoch", first, epoch),
        ("with its id and no epoch", first, -1),
        ("with no id and an epoch", -1, epoch),
        ("with an id never given", 987_654_321, 0),
    ] {
        let answer = init_producer_id_with(&client, id, e).await?;
        lines.push(format!(
            "{what}: {} same id {} epoch {}",
            err(answer.error_code),
            answer.producer_id.0 == first,
            answer.producer_epoch
        ));
    }
    Ok(lines)
}

/// A client, a one-partition topic and an idempotent producer's id and epoch.
async fn producer(cx: &Ctx) -> Result<(kmock_client::Client, String, i64, i16)> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let (pid, epoch) = init_producer_id(&client).await?;
    Ok((client, full, pid, epoch))
}

/// Batches of 3, 2 and 1 records (sequences 0, 3, 5), then retries: of the first and second
/// batch (duplicates of older batches), of sequence 3 with one record (another count), of the
/// last, and the next sequence; then six more batches and a retry of one older than the five
/// Kafka remembers.
async fn produce_idempotent_batches_of_several_records(cx: Ctx) -> Result<Lines> {
    let (client, full, pid, epoch) = producer(&cx).await?;
    let mut plan: Vec<(String, i32, usize)> = [
        ("seq 0 x3", 0, 3),
        ("seq 3 x2", 3, 2),
        ("seq 5 x1", 5, 1),
        ("seq 0 x3 again", 0, 3),
        ("seq 3 x2 again", 3, 2),
        ("seq 3 x1", 3, 1),
        ("seq 5 x1 again", 5, 1),
        ("seq 6 x1", 6, 1),
    ]
    .into_iter()
    .map(|(what, sequence, count)| (what.to_owned(), sequence, count))
    .collect();
    plan.extend((7..13).map(|sequence| (format!("seq {sequence} x1"), sequence, 1)));
    plan.push(("seq 6 x1 again (six batches back)".to_owned(), 6, 1));
    plan.push(("seq 8 x1 again (five batches back)".to_owned(), 8, 1));
    let mut lines = Vec::new();
    for (what, sequence, count) in plan {
        let records: Vec<_> = (0..count)
            .map(|i| kmock_client::record(b"k", format!("{sequence}+{i}").as_bytes()))
            .collect();
        let batch = with_producer(v2(&records)?, pid, epoch, sequence);
        lines.extend(produce_labelled(&cx, &client, &what, &full, batch, -1).await?);
    }
    Ok(lines)
}

/// A producer id the broker never gave, at sequence 0 and 5; a known producer at an epoch
/// ahead of its own with sequence 0 and 3, then its own epoch again.
async fn produce_idempotent_unknown_producer_and_epochs(cx: Ctx) -> Result<Lines> {
    let (client, full, pid, epoch) = producer(&cx).await?;
    let mut lines = Vec::new();
    for (what, id, e, sequence) in [
        ("unknown id seq 5", 987_654_321, 0, 5),
        ("unknown id seq 0", 987_654_322, 0, 0),
        ("seq 0", pid, epoch, 0),
        ("epoch+5 seq 3", pid, epoch + 5, 3),
        ("epoch+5 seq 0", pid, epoch + 5, 0),
        ("epoch+5 seq 1", pid, epoch + 5, 1),
        ("epoch seq 1", pid, epoch, 1),
        ("epoch -1 seq 2", pid, -1, 2),
    ] {
        let batch = with_producer(v2(&[kmock_client::record(b"k", b"v")])?, id, e, sequence);
        lines.extend(produce_labelled(&cx, &client, what, &full, batch, -1).await?);
    }
    Ok(lines)
}
