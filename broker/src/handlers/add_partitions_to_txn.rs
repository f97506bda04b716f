//! AddPartitionsToTxn (API key 24), versions 0–5: 0–3 the client versions, 4–5 the batched
//! versions a partition leader sends the transaction coordinator (KIP-890).
//!
//! As Kafka's `KafkaApis.handleAddPartitionsToTxnRequest` and `TransactionCoordinator.
//! handleAddPartitionsToTransaction`: a partition that does not exist fails the whole request,
//! answered UNKNOWN_TOPIC_OR_PARTITION and every other partition OPERATION_NOT_ATTEMPTED; then
//! an empty transactional id is INVALID_REQUEST, a broker other than the transaction
//! coordinator answers NOT_COORDINATOR (COORDINATOR_NOT_AVAILABLE while its partition is
//! offline), an unknown transactional id or another producer id INVALID_PRODUCER_ID_MAPPING,
//! another epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2); otherwise the partitions
//! join the transaction, which becomes Ongoing. Every partition gets the same answer.
//!
//! v4+ (Kafka's `handleAddPartitionsToTxnRequest` from v4): each transaction of the batch is
//! answered on its own, in `results_by_transaction`, with the same checks; one with
//! `verify_only` adds nothing and answers, as `handleVerifyPartitionsInTransaction`, each
//! partition NONE when it is in the transaction and TRANSACTION_ABORTABLE when not (after the
//! checks above, an empty id INVALID_REQUEST on every partition); a v5 add is made with
//! transaction version 2 (the next EndTxn must then carry the epoch a version-2 client sends).
//! A transactional id named twice is answered once, its partitions merged
//! (`partitionsByTransaction`).
//!
//! Deviations from Apache Kafka: kmock's own partitions verify a transactional Produce
//! against the coordinator's state directly, never with this request; v4+ needs no
//! CLUSTER_ACTION permission (kmock has no authorization), and its transactions are answered
//! in request order, where Kafka answers them in the order they complete.
//! CONCURRENT_TRANSACTIONS is never answered, since kmock ends a transaction while it answers
//! its EndTxn.

use std::collections::{BTreeSet, HashMap};

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::producers::ProducerIdAndEpoch;
use crate::state::ClusterState;

/// Versions implemented.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// Adds the partitions to the transaction, or answers why not.
pub fn handle(
    ctx: &Ctx<'_>,
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version >= 4 {
        return handle_batch(ctx, &request, version);
    }
    let txn_id = request.v3_and_below_transactional_id.0.as_str();
    // Entries are looked at in place: a request may name millions (up to the frame size),
    // and only the distinct partitions of existing topics are kept, in the transaction.
    let entries = || {
        request
            .v3_and_below_topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |&p| (t.name.0.as_str(), p)))
    };
    let mut state = ctx.shared.state();
    let missing = |state: &ClusterState, (topic, p): (&str, i32)| {
        state
            .topics
            .get(topic)
            .and_then(|t| t.partition(p))
            .is_none()
    };
    let result: Result<(), ResponseError> = if entries().any(|tp| missing(&state, tp)) {
        Err(ResponseError::OperationNotAttempted)
    } else {
        let producer = (
            request.v3_and_below_producer_id.0,
            request.v3_and_below_producer_epoch,
        );
        let partitions = || {
            let distinct: BTreeSet<(&str, i32)> = entries().collect();
            distinct
                .into_iter()
                .map(|(topic, p)| (topic.to_owned(), p))
                .collect()
        };
        add_to_transaction(ctx, &mut state, txn_id, producer, partitions, None, false)
    };
    let error_of = |tp: (&str, i32)| match result {
        Err(ResponseError::OperationNotAttempted) if missing(&state, tp) => {
            ResponseError::UnknownTopicOrPartition.code()
        }
        result => error_code(result, version),
    };
    let topics = request
        .v3_and_below_topics
        .iter()
        .map(|t| {
            let results = t
                .partitions
                .iter()
                .map(|&p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(error_of((t.name.0.as_str(), p)))
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(results)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics)
}

/// The v4+ answer: each transaction of the batch added or verified on its own.
fn handle_batch(
    ctx: &Ctx<'_>,
    request: &AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    // `partitionsByTransaction`: one entry per transactional id, partitions merged.
    // In first-seen order; `index` finds an id's entry without a scan per transaction.
    let mut by_id: Vec<(&AddPartitionsToTxnTransaction, BTreeSet<(&str, i32)>)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for t in &request.transactions {
        let partitions = t.topics.iter().flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(move |&p| (topic.name.0.as_str(), p))
        });
        match index.get(t.transactional_id.0.as_str()) {
            Some(&i) => by_id[i].1.extend(partitions),
            None => {
                index.insert(t.transactional_id.0.as_str(), by_id.len());
                by_id.push((t, partitions.collect()));
            }
        }
    }
    let mut state = ctx.shared.state();
    let results = by_id
        .into_iter()
        .map(|(t, partitions)| {
            let codes = batch_transaction(ctx, &mut state, t, &partitions, version);
            let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
            for ((topic, p), code) in partitions.iter().zip(codes) {
                let result = AddPartitionsToTxnPartitionResult::default()
                    .with_partition_index(*p)
                    .with_partition_error_code(code);
                match topics.last_mut() {
                    Some(last) if last.name.0.as_str() == *topic => {
                        last.results_by_partition.push(result);
                    }
                    _ => topics.push(
                        AddPartitionsToTxnTopicResult::default()
                            .with_name(super::topic_name(topic))
                            .with_results_by_partition(vec![result]),
                    ),
                }
            }
            AddPartitionsToTxnResult::default()
                .with_transactional_id(t.transactional_id.clone())
                .with_topic_results(topics)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

/// One transaction of a v4+ batch: the error code of each of its `partitions`, in order.
fn batch_transaction(
    ctx: &Ctx<'_>,
    state: &mut ClusterState,
    t: &AddPartitionsToTxnTransaction,
    partitions: &BTreeSet<(&str, i32)>,
    version: i16,
) -> Vec<i16> {
    let missing = |state: &ClusterState, (topic, p): (&str, i32)| {
        state
            .topics
            .get(topic)
            .and_then(|t| t.partition(p))
            .is_none()
    };
    if partitions.iter().any(|&tp| missing(state, tp)) {
        return partitions
            .iter()
            .map(|&tp| {
                if missing(state, tp) {
                    ResponseError::UnknownTopicOrPartition.code()
                } else {
                    ResponseError::OperationNotAttempted.code()
                }
            })
            .collect();
    }
    let txn_id = t.transactional_id.0.as_str();
    let producer = (t.producer_id.0, t.producer_epoch);
    if !t.verify_only {
        let owned = || {
            partitions
                .iter()
                .map(|&(topic, p)| (topic.to_owned(), p))
                .collect()
        };
        let result = add_to_transaction(ctx, state, txn_id, producer, owned, None, version >= 5);
        return vec![error_code(result, version); partitions.len()];
    }
    if let Err(e) = check_coordinator(ctx, state, txn_id) {
        return vec![e.code(); partitions.len()];
    }
    let producer = ProducerIdAndEpoch {
        producer_id: producer.0,
        producer_epoch: producer.1,
    };
    partitions
        .iter()
        .map(|&(topic, p)| {
            let result = state.verify_in_transaction(txn_id, producer, topic, p);
            error_code(result, version)
        })
        .collect()
}

/// Adds `partitions` (made once the checks pass) and `group` to the transaction of
/// `transactional_id`, for `producer` (id and epoch), as AddPartitionsToTxn and
/// AddOffsetsToTxn do: the coordinator's first checks ([`check_coordinator`]), then the
/// producer's (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED), and the transaction becomes
/// Ongoing.
///
/// # Errors
/// As above.
pub(super) fn add_to_transaction(
    ctx: &Ctx<'_>,
    state: &mut ClusterState,
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    partitions: impl FnOnce() -> Vec<(String, i32)>,
    group: Option<&str>,
    epoch_bump: bool,
) -> Result<(), ResponseError> {
    check_coordinator(ctx, state, transactional_id)?;
    let producer = ProducerIdAndEpoch {
        producer_id,
        producer_epoch,
    };
    let now = (tokio::time::Instant::now(), ctx.shared.now_ms());
    state.add_to_transaction(
        transactional_id,
        producer,
        &partitions(),
        group,
        now,
        epoch_bump,
    )
}

/// The error code answering `result` at `version`: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
/// before v2, as Kafka answers the versions that came before PRODUCER_FENCED did.
pub(super) fn error_code(result: Result<(), ResponseError>, version: i16) -> i16 {
    match result {
        Ok(()) => 0,
        Err(ResponseError::ProducerFenced) if version < 2 => {
            ResponseError::InvalidProducerEpoch.code()
        }
        Err(e) => e.code(),
    }
}

/// The transaction coordinator's first checks, shared by the transaction APIs: an empty
/// transactional id is INVALID_REQUEST; a broker that does not coordinate it answers
/// NOT_COORDINATOR, or COORDINATOR_NOT_AVAILABLE while its `__transaction_state` partition is
/// offline (Kafka's `TransactionStateManager.getTransactionState`).
///
/// # Errors
/// As above.
pub fn check_coordinator(
    ctx: &Ctx<'_>,
    state: &ClusterState,
    transactional_id: &str,
) -> Result<(), ResponseError> {
    if transactional_id.is_empty() {
        return Err(ResponseError::InvalidRequest);
    }
    match state.transaction_coordinator(transactional_id) {
        -1 => Err(ResponseError::CoordinatorNotAvailable),
        node if node != ctx.node_id => Err(ResponseError::NotCoordinator),
        _ => Ok(()),
    }
}
