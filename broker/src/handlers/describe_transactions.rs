//! DescribeTransactions (API key 65), version 0.
//!
//! As Kafka's `KafkaApis.handleDescribeTransactionsRequest` and
//! `TransactionCoordinator.handleDescribeTransactions`, each transactional id answered on its
//! own, in request order: an empty id is INVALID_REQUEST; a broker other than the
//! transaction coordinator answers NOT_COORDINATOR (COORDINATOR_NOT_AVAILABLE while its
//! `__transaction_state` partition is offline); an id never initialised is
//! TRANSACTIONAL_ID_NOT_FOUND; otherwise its state (`Empty`, `Ongoing`, `CompleteCommit`,
//! `CompleteAbort`), producer id and epoch, `transaction.timeout.ms`, the start of its last
//! transaction (ms since the Unix epoch, -1 before the first) and the partitions of the open
//! transaction by topic, with the `__consumer_offsets` partition of each group added by
//! AddOffsetsToTxn (where Kafka's coordinator keeps them).
//!
//! Deviations from Apache Kafka: kmock ends a transaction while it answers its EndTxn, so the
//! states PrepareCommit, PrepareAbort and PrepareEpochFence are never answered; topics come in
//! name order and partitions in index order, where Kafka's order is its hash set's.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId,
};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;

use super::add_partitions_to_txn::check_coordinator;
use super::{str_bytes, topic_name, Ctx};
use crate::state::coordinator::partition_for;
use crate::state::ClusterState;

/// Versions implemented.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// Kafka's name of the group offsets topic, whose partitions AddOffsetsToTxn adds.
const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Describes each transactional id, or answers why not.
pub fn handle(
    ctx: &Ctx<'_>,
    request: DescribeTransactionsRequest,
    _version: i16,
) -> DescribeTransactionsResponse {
    let state = ctx.shared.state();
    let states = request
        .transactional_ids
        .iter()
        .map(|id| describe(ctx, &state, id.0.as_str()).with_transactional_id(id.clone()))
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

fn describe(ctx: &Ctx<'_>, state: &ClusterState, transactional_id: &str) -> TransactionState {
    let fail = |e: ResponseError| TransactionState::default().with_error_code(e.code());
    if let Err(e) = check_coordinator(ctx, state, transactional_id) {
        return fail(e);
    }
    let Some(txn) = state.transactions.get(transactional_id) else {
        return fail(ResponseError::TransactionalIdNotFound);
    };
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in &txn.partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    for group in &txn.groups {
        let partition = partition_for(group, state.consumer_offsets.len() as i32);
        let partitions = by_topic.entry(OFFSETS_TOPIC).or_default();
        if !partitions.contains(&partition) {
            partitions.push(partition);
            partitions.sort_unstable();
        }
    }
    let topics = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            TopicData::default()
                .with_topic(topic_name(topic))
                .with_partitions(partitions)
        })
        .collect();
    TransactionState::default()
        .with_transaction_state(str_bytes(txn.state.name()))
        .with_transaction_timeout_ms(txn.timeout_ms)
        .with_transaction_start_time_ms(txn.start_time_ms)
        .with_producer_id(ProducerId(txn.producer_id))
        .with_producer_epoch(txn.producer_epoch)
        .with_topics(topics)
}
