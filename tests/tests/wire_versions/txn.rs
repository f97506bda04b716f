//! The transaction APIs of `wire_versions` (transaction version 1): each version of each API
//! in a transaction of its own, begun by InitProducerId at the transaction coordinator (found
//! with FindCoordinator key type 1), over topic `txn` and a group of its own, and ended as a
//! client ends it.

use anyhow::{anyhow, Result};
use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest};
use kmock_client::Client;

use super::Fixture;
use crate::common::transactions::{
    add_offsets, add_partitions, end_txn, init_producer_id, txn_offset_commit,
};
use crate::common::{code_is, connect_to, text};

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
    let added = client
        .send(add_partitions(id, pid, epoch, "txn", &[0]), v)
        .await?;
    let result = added
        .results_by_topic_v3_and_below
        .first()
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
            code_is("EndTxn commit", ended.error_code, None)
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
