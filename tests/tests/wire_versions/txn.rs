//! The transaction APIs of `wire_versions`: each version of each API in a transaction of its
//! own, begun by InitProducerId at the transaction coordinator (found with FindCoordinator key
//! type 1), over topic `txn` and a group of its own, and ended as a client ends it; the
//! transaction admin APIs describe such a transaction.

use anyhow::{anyhow, Result};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, DescribeProducersRequest, DescribeTransactionsRequest,
    FindCoordinatorRequest, ListTransactionsRequest, ProducerId,
};
use kmock_client::Client;

use super::Fixture;
use crate::common::transactions::{
    add_offsets, add_partitions, end_txn, init_producer_id, txn_id, txn_offset_commit,
};
use crate::common::{code_is, connect_to, name, same, text};

/// A producer of transactional id `id` at its coordinator: the connection, producer id and
/// epoch.
async fn begin(f: &Fixture, id: &str) -> Result<(Client, i64, i16)> {
    let find = FindCoordinatorRequest::default()
        .with_key(text(id))
        .with_key_type(1);
    let found = f.broker().await?.send(find, 3).await?;
    code_is("FindCoordinator", found.error_code, None)?;
    let coordinator = connect_to(&f.cluster, found.node_id.0).await?;
    let init = coordinator.send(init_producer_id(id, 60_000), 4).await?;
    code_is("InitProducerId", init.error_code, None)?;
    Ok((coordinator, init.producer_id.0, init.producer_epoch))
}

/// Adds `txn`-0 to the transaction at AddPartitionsToTxn `v`.
async fn add_txn_partition(
    client: &Client,
    id: &str,
    (pid, epoch): (i64, i16),
    v: i16,
) -> Result<()> {
    let request = if v >= 4 {
        // The batched versions a partition leader sends: one transaction, added.
        AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(txn_id(id))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(name("txn"))
                    .with_partitions(vec![0])]),
        ])
    } else {
        add_partitions(id, pid, epoch, "txn", &[0])
    };
    let added = client.send(request, v).await?;
    let result = added
        .results_by_topic_v3_and_below
        .iter()
        .chain(
            added
                .results_by_transaction
                .iter()
                .flat_map(|t| &t.topic_results),
        )
        .next()
        .and_then(|t| t.results_by_partition.first())
        .ok_or(anyhow!("no partition result"))?;
    code_is("AddPartitionsToTxn", result.partition_error_code, None)
}

/// Sends `api` at `v` inside a transaction of its own and checks the answer.
pub async fn check(f: &Fixture, api: ApiKey, v: i16) -> Result<()> {
    let id = format!("{api:?}-v{v}");
    let (client, pid, epoch) = begin(f, &id).await?;
    match api {
        ApiKey::AddPartitionsToTxn => {
            add_txn_partition(&client, &id, (pid, epoch), v).await?;
            let ended = client.send(end_txn(&id, pid, epoch, false), 0).await?;
            code_is("EndTxn abort", ended.error_code, None)
        }
        ApiKey::AddOffsetsToTxn => {
            let added = client.send(add_offsets(&id, pid, epoch, &id), v).await?;
            code_is("AddOffsetsToTxn", added.error_code, None)?;
            let ended = client.send(end_txn(&id, pid, epoch, false), 0).await?;
            code_is("EndTxn abort", ended.error_code, None)
        }
        ApiKey::EndTxn => {
            add_txn_partition(&client, &id, (pid, epoch), 0).await?;
            let ended = client.send(end_txn(&id, pid, epoch, true), v).await?;
            code_is("EndTxn commit", ended.error_code, None)?;
            // v5 (transaction version 2) answers the bumped epoch; earlier versions none.
            let expected = if v >= 5 { (pid, epoch + 1) } else { (-1, -1) };
            same(
                "EndTxn's producer id and epoch",
                (ended.producer_id.0, ended.producer_epoch),
                expected,
            )
        }
        ApiKey::DescribeTransactions => {
            let request =
                DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(&id)]);
            let described = client.send(request, v).await?;
            let state = described
                .transaction_states
                .first()
                .ok_or(anyhow!("no transaction state"))?;
            code_is("DescribeTransactions", state.error_code, None)?;
            same("state", state.transaction_state.as_str(), "Empty")?;
            same(
                "producer",
                (state.producer_id.0, state.producer_epoch),
                (pid, epoch),
            )
        }
        ApiKey::ListTransactions => {
            let request =
                ListTransactionsRequest::default().with_producer_id_filters(vec![ProducerId(pid)]);
            let listed = client.send(request, v).await?;
            code_is("ListTransactions", listed.error_code, None)?;
            let ids: Vec<String> = listed
                .transaction_states
                .iter()
                .map(|t| t.transactional_id.0.to_string())
                .collect();
            same("listed by producer id", ids, vec![id.clone()])
        }
        ApiKey::DescribeProducers => {
            add_txn_partition(&client, &id, (pid, epoch), 0).await?;
            let ended = client.send(end_txn(&id, pid, epoch, false), 0).await?;
            code_is("EndTxn abort", ended.error_code, None)?;
            // Asked of the leader of txn-0 (the marker made the producer active there).
            let leader = f
                .cluster
                .leader("txn", 0)
                .ok_or(anyhow!("txn-0 has no leader"))?;
            let request =
                DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
                    .with_name(name("txn"))
                    .with_partition_indexes(vec![0])]);
            let described = connect_to(&f.cluster, leader)
                .await?
                .send(request, v)
                .await?;
            let partition = described
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .ok_or(anyhow!("no partition result"))?;
            code_is("DescribeProducers", partition.error_code, None)?;
            let producer = partition
                .active_producers
                .iter()
                .find(|p| p.producer_id.0 == pid)
                .ok_or(anyhow!("the producer is not among the active ones"))?;
            same("its epoch", producer.producer_epoch, i32::from(epoch))
        }
        ApiKey::TxnOffsetCommit => {
            let added = client.send(add_offsets(&id, pid, epoch, &id), 0).await?;
            code_is("AddOffsetsToTxn", added.error_code, None)?;
            // TxnOffsetCommit goes to the group's coordinator.
            let group = connect_to(&f.cluster, f.cluster.coordinator(&id)).await?;
            let committed = group
                .send(txn_offset_commit(&id, pid, epoch, &id, "txn", 1), v)
                .await?;
            let partition = committed
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .ok_or(anyhow!("no partition result"))?;
            code_is("TxnOffsetCommit", partition.error_code, None)?;
            let ended = client.send(end_txn(&id, pid, epoch, true), 0).await?;
            code_is("EndTxn commit", ended.error_code, None)
        }
        _ => Err(anyhow!("advertised but unknown to this test")),
    }
}
