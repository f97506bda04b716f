//! Transactions as Kafka 4.4.0 answers them with `transaction.version` 2 finalized (its
//! default on a new cluster, and what `fixtures/kafka/kafka.sh`'s broker finalizes): the
//! feature in ApiVersions, a Produce v12 adding its partition, EndTxn v5's epoch bump with
//! its retry and fencing, AddPartitionsToTxn v4–5, and the admin APIs DescribeTransactions,
//! ListTransactions and DescribeProducers.
//!
//! A real coordinator writes the markers after it answers EndTxn, so a case waits until
//! DescribeTransactions shows the transaction complete before its next request ([`settled`]);
//! kmock is complete at once.

mod admin;
mod commits;
mod errors;
mod offsets;
mod v2;

use std::time::Duration;

use anyhow::{bail, Result};
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
    ProduceRequest, ProducerId, TransactionalId,
};
use kafka_protocol::records::{Compression, Record};
use kafka_protocol::ResponseError;
use kmock_client::{encode_batch, record, Client};

use super::{err, name, text, Case, Ctx};

/// The version-2 cases, the admin API cases, timeouts and transactional offsets, then the
/// refusals of each transactional request and of transactional offset commits and writes.
pub fn cases() -> Vec<Case> {
    [
        v2::CASES,
        admin::CASES,
        offsets::CASES,
        errors::CASES,
        commits::CASES,
    ]
    .concat()
}

pub(super) fn txn_id(s: &str) -> TransactionalId {
    TransactionalId(text(s))
}

/// Whether `code` asks to come back later (the coordinator loading, moving, or completing a
/// transaction).
pub(super) fn retriable(code: i16) -> bool {
    [
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::CoordinatorNotAvailable,
        ResponseError::NotCoordinator,
        ResponseError::ConcurrentTransactions,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// A client's retry backoff; the case's hang guard bounds every loop that uses it.
pub(super) async fn backoff() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// FindCoordinator v4 of `key` (`key_type` 0 a group, 1 a transactional id), asked again
/// while the coordinator loads, until it names one.
pub(super) async fn find_coordinator(client: &Client, key_type: i8, key: &str) -> Result<()> {
    loop {
        let find = FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_coordinator_keys(vec![text(key)]);
        let found = client.send(find, 4).await?;
        let code = found.coordinators.first().map_or(-1, |c| c.error_code);
        if code == 0 {
            return Ok(());
        }
        if !retriable(code) {
            bail!("FindCoordinator {key}: {}", err(code));
        }
        backoff().await;
    }
}

/// InitProducerId v5 for `id` (60 s timeout), after FindCoordinator names its coordinator,
/// asked again while the coordinator loads: its producer id and epoch.
pub(super) async fn init(client: &Client, id: &str) -> Result<(i64, i16)> {
    find_coordinator(client, 1, id).await?;
    Ok(init_answered(client, id, 5).await?.0)
}

/// InitProducerId v`version` for `id` (60 s timeout), asked again while Kafka answers a
/// retriable error (the coordinator loading, an open transaction of the id being aborted): the
/// producer id and epoch, and the error names answered on the way, each once in a row (the last
/// NONE).
pub(super) async fn init_answered(
    client: &Client,
    id: &str,
    version: i16,
) -> Result<((i64, i16), Vec<String>)> {
    let mut answers = Vec::new();
    loop {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(txn_id(id)))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let answer = client.send(request, version).await?;
        let name = err(answer.error_code);
        if answers.last() != Some(&name) {
            answers.push(name);
        }
        if answer.error_code == 0 {
            return Ok(((answer.producer_id.0, answer.producer_epoch), answers));
        }
        if !retriable(answer.error_code) {
            bail!("InitProducerId {id}: {}", err(answer.error_code));
        }
        backoff().await;
    }
}

/// Produce v`version` of one transactional batch of `count` records of `producer` (id, epoch)
/// from sequence `first` to `topic`-`partition`: the partition's error name.
pub(super) async fn produce(
    client: &Client,
    id: &str,
    (topic, partition): (&str, i32),
    (pid, epoch): (i64, i16),
    (first, count): (i32, i32),
    version: i16,
) -> Result<String> {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            producer_id: pid,
            producer_epoch: epoch,
            sequence: first + i,
            transactional: true,
            ..record(b"k", b"v")
        })
        .collect();
    let bytes: Bytes = encode_batch(&records, Compression::None)?;
    let request = ProduceRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(bytes))])]);
    let answer = client.send(request, version).await?;
    Ok(err(answer.responses[0].partition_responses[0].error_code))
}

/// EndTxn v`version`: its error name, and its producer id and epoch relative to `sent` (`same
/// id`, `epoch +1`, or the values when neither).
pub(super) async fn end(
    client: &Client,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
    version: i16,
) -> Result<String> {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let answer = client.send(request, version).await?;
    let named = match (answer.producer_id.0, answer.producer_epoch) {
        (-1, -1) => "no id".to_owned(),
        (p, e) if p == pid => format!("same id, epoch {:+}", e - epoch),
        (_, e) => format!("another id, epoch {e}"),
    };
    Ok(format!("{} ({named})", err(answer.error_code)))
}

/// Waits until DescribeTransactions shows `id` in no Prepare state (its markers written), and
/// returns that state.
pub(super) async fn settled(client: &Client, id: &str) -> Result<String> {
    loop {
        let state = describe(client, id).await?;
        if !state.starts_with("Prepare") {
            return Ok(state);
        }
        backoff().await;
    }
}

/// DescribeTransactions of `id` as one line: the error, or state, epoch, timeout, whether a
/// start time is set, and the partitions of the open transaction by topic (in name order;
/// Kafka's own order is its hash set's), this case's topics by their short names.
pub(super) async fn describe_line(cx: &Ctx, client: &Client, id: &str) -> Result<String> {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]);
    let answer = client.send(request, 0).await?;
    let t = &answer.transaction_states[0];
    if t.error_code != 0 {
        return Ok(err(t.error_code));
    }
    let mut topics: Vec<String> = t
        .topics
        .iter()
        .map(|topic| {
            let mut partitions = topic.partitions.clone();
            partitions.sort_unstable();
            format!("{}{partitions:?}", cx.short(topic.topic.0.as_str()))
        })
        .collect();
    topics.sort();
    Ok(format!(
        "{} epoch {} timeout {} start {} topics [{}]",
        t.transaction_state,
        t.producer_epoch,
        t.transaction_timeout_ms,
        if t.transaction_start_time_ms > 0 {
            "set"
        } else {
            "-1"
        },
        topics.join(" ")
    ))
}

/// The state DescribeTransactions gives `id` (or its error name).
pub(super) async fn describe(client: &Client, id: &str) -> Result<String> {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]);
    let answer = client.send(request, 0).await?;
    let t = &answer.transaction_states[0];
    Ok(if t.error_code == 0 {
        t.transaction_state.to_string()
    } else {
        err(t.error_code)
    })
}
