//! Transaction API requests as a transactional producer sends them (transaction version 1), and
//! transactional Produce requests.

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest, ProducerId,
    TransactionalId,
};

use super::idempotent::producer_batch;
use super::{code_is, name, text};

/// A transactional id from a `&str`.
pub fn txn_id(s: &str) -> TransactionalId {
    TransactionalId(text(s))
}

/// InitProducerId for `transactional_id` with `timeout_ms`, naming no producer id.
pub fn init_producer_id(transactional_id: &str, timeout_ms: i32) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(transactional_id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

/// AddPartitionsToTxn (v0–3 form) adding `topic`'s `partitions`.
pub fn add_partitions(
    transactional_id: &str,
    producer_id: i64,
    epoch: i16,
    topic: &str,
    partitions: &[i32],
) -> AddPartitionsToTxnRequest {
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(transactional_id))
        .with_v3_and_below_producer_id(ProducerId(producer_id))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(name(topic))
            .with_partitions(partitions.to_vec())])
}

/// EndTxn committing (`commit`) or aborting.
pub fn end_txn(
    transactional_id: &str,
    producer_id: i64,
    epoch: i16,
    commit: bool,
) -> EndTxnRequest {
    EndTxnRequest::default()
        .with_transactional_id(txn_id(transactional_id))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_committed(commit)
}

/// A Produce request (acks=all) of `transactional_id` holding one transactional batch of
/// `count` records from `producer_id` at `epoch`, sequences from `first`, for
/// `topic`-`partition`.
pub fn transactional_batch(
    transactional_id: &str,
    topic: &str,
    partition: i32,
    producer: (i64, i16),
    first: i32,
    count: usize,
) -> ProduceRequest {
    producer_batch(
        topic,
        partition,
        producer,
        first,
        count,
        Some(transactional_id),
    )
}

/// The latest offset of `topic`-`partition` as ListOffsets v5 answers it at `isolation_level`
/// (0 read_uncommitted: the high watermark; 1 read_committed: the last stable offset).
pub async fn latest_offset(
    client: &kmock_client::Client,
    topic: &str,
    partition: i32,
    isolation_level: i8,
) -> anyhow::Result<i64> {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest};
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(-1)])]);
    let answer = client.send(request, 5).await?;
    let p = &answer.topics[0].partitions[0];
    anyhow::ensure!(
        p.error_code == 0,
        "ListOffsets: {}",
        super::err(p.error_code)
    );
    Ok(p.offset)
}

/// AddOffsetsToTxn adding `group`.
pub fn add_offsets(
    transactional_id: &str,
    producer_id: i64,
    epoch: i16,
    group: &str,
) -> kafka_protocol::messages::AddOffsetsToTxnRequest {
    kafka_protocol::messages::AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(transactional_id))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_group_id(kafka_protocol::messages::GroupId(text(group)))
}

/// TxnOffsetCommit of `offset` for `topic`-0 from outside group management (generation -1).
pub fn txn_offset_commit(
    transactional_id: &str,
    producer_id: i64,
    epoch: i16,
    group: &str,
    topic: &str,
    offset: i64,
) -> kafka_protocol::messages::TxnOffsetCommitRequest {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    kafka_protocol::messages::TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(transactional_id))
        .with_group_id(kafka_protocol::messages::GroupId(text(group)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)])])
}

/// A read_committed Fetch (v11, isolation level 1) of `t`-0 from offset 0, waiting up to `max_wait_ms` for data.
pub async fn fetch_committed(
    client: &kmock_client::Client,
    max_wait_ms: i32,
) -> anyhow::Result<kafka_protocol::messages::FetchResponse> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest};
    let fetch = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])]);
    Ok(client.send(fetch, 11).await?)
}

/// InitProducerId v4 for `transactional_id` (60 s transaction timeout): its (producer id,
/// epoch). Fails unless answered without error.
pub async fn init_ok(
    client: &kmock_client::Client,
    transactional_id: &str,
) -> anyhow::Result<(i64, i16)> {
    let init = client
        .send(init_producer_id(transactional_id, 60_000), 4)
        .await?;
    code_is("InitProducerId", init.error_code, None)?;
    Ok((init.producer_id.0, init.producer_epoch))
}

/// AddPartitionsToTxn v3 of `topic`-`partitions` to the transaction of `producer`. Fails unless
/// every partition was added without error.
pub async fn add_partitions_ok(
    client: &kmock_client::Client,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    topic: &str,
    partitions: &[i32],
) -> anyhow::Result<()> {
    let added = client
        .send(
            add_partitions(transactional_id, producer_id, epoch, topic, partitions),
            3,
        )
        .await?;
    for t in &added.results_by_topic_v3_and_below {
        for p in &t.results_by_partition {
            code_is("AddPartitionsToTxn", p.partition_error_code, None)?;
        }
    }
    Ok(())
}

/// Produce v9 of a [`transactional_batch`]. Fails unless it was stored without error.
pub async fn produce_txn_ok(
    client: &kmock_client::Client,
    transactional_id: &str,
    topic: &str,
    partition: i32,
    producer: (i64, i16),
    first: i32,
    count: usize,
) -> anyhow::Result<()> {
    let produced = client
        .send(
            transactional_batch(transactional_id, topic, partition, producer, first, count),
            9,
        )
        .await?;
    code_is(
        "Produce",
        produced.responses[0].partition_responses[0].error_code,
        None,
    )
}

/// EndTxn v3 committing (`commit`) or aborting the transaction of `producer`. Fails unless
/// answered without error.
pub async fn end_txn_ok(
    client: &kmock_client::Client,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    commit: bool,
) -> anyhow::Result<()> {
    let end = client
        .send(end_txn(transactional_id, producer_id, epoch, commit), 3)
        .await?;
    code_is("EndTxn", end.error_code, None)
}

/// A one-broker cluster finalizing transaction version 2 ([`kmock::TransactionVersion::V2`],
/// kmock's default) with `topics` of `partitions` partitions each (auto-creation off), and a
/// client connected to it.
pub async fn start_v2(
    topics: &[&str],
    partitions: i32,
) -> anyhow::Result<(kmock::Cluster, kmock_client::Client)> {
    start_at(kmock::TransactionVersion::V2, topics, partitions).await
}

/// [`start_v2`] finalizing transaction version 1 ([`kmock::TransactionVersion::V1`], Kafka 3.x's
/// transactions).
pub async fn start_v1(
    topics: &[&str],
    partitions: i32,
) -> anyhow::Result<(kmock::Cluster, kmock_client::Client)> {
    start_at(kmock::TransactionVersion::V1, topics, partitions).await
}

async fn start_at(
    version: kmock::TransactionVersion,
    topics: &[&str],
    partitions: i32,
) -> anyhow::Result<(kmock::Cluster, kmock_client::Client)> {
    let mut builder = kmock::Cluster::builder()
        .auto_create_topics(false)
        .transaction_version(version);
    for topic in topics {
        builder = builder.topic(topic, partitions);
    }
    let cluster = builder.start().await?;
    let client = kmock_client::Client::connect(cluster.brokers()[0].addr).await?;
    Ok((cluster, client))
}

/// EndTxn v5 (transaction version 2) of the transaction of `producer`: its error code, and the
/// producer id and epoch it names.
pub async fn end_txn_v5(
    client: &kmock_client::Client,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    commit: bool,
) -> anyhow::Result<(i16, (i64, i16))> {
    let end = client
        .send(end_txn(transactional_id, producer_id, epoch, commit), 5)
        .await?;
    Ok((end.error_code, (end.producer_id.0, end.producer_epoch)))
}

/// Produce v12 (transaction version 2: the partition is added by the Produce) of a
/// [`transactional_batch`]: the partition's error code.
pub async fn produce_v12(
    client: &kmock_client::Client,
    transactional_id: &str,
    (topic, partition): (&str, i32),
    producer: (i64, i16),
    first: i32,
    count: usize,
) -> anyhow::Result<i16> {
    let produced = client
        .send(
            transactional_batch(transactional_id, topic, partition, producer, first, count),
            12,
        )
        .await?;
    Ok(produced.responses[0].partition_responses[0].error_code)
}
