//! One partition's batch appended: the topic's rules, `min.insync.replicas`, the transaction
//! verification and the producer state checks, in Kafka's order (see the handler's header).

use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::ResponseError;

use super::super::Ctx;
use crate::journal::ClusterOperation;
use crate::state::batch;
use crate::state::producer_state::WithoutState;
use crate::state::topics::{Partition, Topic};
use crate::state::txn::TxnMetadata;
use crate::versions::KafkaVersion;

pub(super) type PartitionResult = Result<PartitionProduceResponse, (ResponseError, Option<String>)>;

/// What every partition of one Produce request shares.
pub(super) struct ProduceContext<'a> {
    pub(super) ctx: &'a Ctx<'a>,
    pub(super) acks: i16,
    /// With a transactional id, its transaction as the coordinator knows it (`None`: unknown).
    pub(super) transaction: Option<Option<TxnMetadata>>,
    /// Whether a partition not in the transaction is added to it (transaction version 2 and
    /// Produce v12+), rather than refused.
    pub(super) adds_partitions: bool,
    /// The partitions this request added to its transaction, for the handler to add once
    /// every partition was looked at.
    pub(super) added: std::cell::RefCell<Vec<(String, i32)>>,
    /// With the journal recording, the records of the batch just stored, for the journal to
    /// compute their digests when first read (`batch::DeferredDigests`); `None` for a
    /// compressed batch or when nothing was stored.
    pub(super) stored: std::cell::Cell<Option<batch::DeferredDigests>>,
    pub(super) version: i16,
    pub(super) now_ms: i64,
}

/// Appends partition `index`'s batch, `None` when its records are null.
pub(super) fn append(
    request: &ProduceContext<'_>,
    topic: &mut Topic,
    index: i32,
    inspected: Option<batch::Inspected>,
) -> PartitionResult {
    let ctx = request.ctx;
    let log_append_time = topic.log_append_time().then_some(request.now_ms);
    let (before_max_ms, after_max_ms) = topic.timestamp_bounds_ms();
    let rules = batch::Rules {
        max_message_bytes: topic.max_message_bytes(),
        key_required: topic.compacted(),
    };
    let min_insync_replicas = topic.min_insync_replicas();
    let topic_name = topic.name.clone();
    let Some(partition) = topic.partition_mut(index) else {
        return Err((ResponseError::UnknownTopicOrPartition, None));
    };
    partition
        .check_leader(ctx.node_id, -1)
        .map_err(|e| (e, None))?;
    let Some(inspected) = inspected else {
        return Err((
            ResponseError::InvalidRecord,
            Some("records are null".into()),
        ));
    };
    let valid = inspected
        .validate(&rules)
        .map_err(|e| (e.error, Some(e.reason)))?;
    // acks=all cannot be satisfied with fewer in-sync replicas than min.insync.replicas,
    // capped at the replica count from Kafka 3.7 (Partition.appendRecordsToLeader and
    // Partition.effectiveMinIsr, KAFKA-15583).
    let in_sync = partition.isr.len() as i64;
    let replicas = partition.replicas.len() as i64;
    let min_isr = if ctx.shared.config.kafka_version >= KafkaVersion::V3_7 {
        min_insync_replicas.min(replicas)
    } else {
        min_insync_replicas
    };
    if request.acks == -1 && in_sync < min_isr {
        return Err((
            ResponseError::NotEnoughReplicas,
            Some(format!(
                "min.insync.replicas is {min_insync_replicas}, and {in_sync} of {replicas} replicas are in sync"
            )),
        ));
    }
    verify_transaction(request, &topic_name, index, partition, &valid.info)?;
    // `LogValidator.validateTimestamp`: CreateTime records within the topic's bounds of the
    // broker's clock.
    if let (None, Some((lowest, highest))) = (log_append_time, valid.record_timestamps) {
        let now = request.now_ms;
        if lowest < now.saturating_sub(before_max_ms) || highest > now.saturating_add(after_max_ms)
        {
            return Err((
                ResponseError::InvalidTimestamp,
                Some(format!(
                    "a record timestamp is outside [{}, {}] (message.timestamp.before.max.ms {before_max_ms}, after.max.ms {after_max_ms})",
                    now.saturating_sub(before_max_ms),
                    now.saturating_add(after_max_ms)
                )),
            ));
        }
    }
    // Rule 6 of `producer_state`: what a producer without state here may start at.
    let without_state = if request.adds_partitions && valid.info.transactional {
        WithoutState::ZeroOrOutOfOrder
    } else if ctx.shared.config.kafka_version < KafkaVersion::V2_5 {
        WithoutState::ZeroOrUnknownProducerId
    } else {
        WithoutState::AnySequence
    };
    let log_end = partition.log.log_end_offset();
    let appended = partition
        .append(
            valid,
            log_append_time,
            without_state,
            ctx.shared.config.max_stored_bytes,
            request.now_ms,
        )
        .map_err(|(error, reason)| (error, Some(reason)))?;
    // kmock's retention check on append (a duplicate appends nothing): the `retention.bytes`
    // pass alone (`Partition::delete_old_segments`), journaled after this request as the
    // timer's are.
    let stored = partition.log.log_end_offset() > log_end;
    if stored && ctx.shared.journal.records() {
        let batch = partition.log.batches().back();
        request
            .stored
            .set(batch.and_then(|b| batch::DeferredDigests::of_stored(&b.bytes)));
    }
    let deleted = stored
        .then(|| partition.delete_old_segments(request.now_ms, true))
        .flatten();
    if let Some(deleted) = deleted {
        let operation = ClusterOperation::retention(&topic_name, index, deleted);
        ctx.shared
            .journal
            .record_operation(partition.leader, operation);
    }
    Ok(PartitionProduceResponse::default()
        .with_index(index)
        .with_base_offset(appended.base_offset)
        .with_log_append_time_ms(appended.log_append_time_ms)
        .with_log_start_offset(partition.log.log_start_offset()))
}

/// Kafka's transaction checks of a batch before it is appended (see the header).
fn verify_transaction(
    request: &ProduceContext<'_>,
    topic: &str,
    index: i32,
    partition: &Partition,
    batch: &batch::BatchInfo,
) -> Result<(), (ResponseError, Option<String>)> {
    let pid = batch.producer_id;
    let ongoing = pid >= 0 && partition.log.has_ongoing_transaction(pid);
    if !batch.transactional {
        if ongoing {
            return Err((
                ResponseError::InvalidTxnState,
                Some(format!(
                    "expected a transactional write from producer {pid}: it has a transaction open on {topic}-{index}"
                )),
            ));
        }
        return Ok(());
    }
    let Some(transaction) = &request.transaction else {
        return Err((
            ResponseError::InvalidTxnState,
            Some("a transactional batch needs a transactional id".into()),
        ));
    };
    if ongoing {
        return Ok(());
    }
    let fail = |error, reason: String| Err((error, Some(reason)));
    match transaction {
        Some(t) if t.producer_id != pid => fail(
            ResponseError::InvalidProducerIdMapping,
            format!(
                "the transactional id has producer id {}, not {pid}",
                t.producer_id
            ),
        ),
        None => fail(
            ResponseError::InvalidProducerIdMapping,
            "the transactional id is unknown to its coordinator".into(),
        ),
        Some(t) if t.producer_epoch != batch.producer_epoch => fail(
            ResponseError::InvalidProducerEpoch,
            format!(
                "producer {pid}: epoch {} is not the transaction's epoch {}",
                batch.producer_epoch, t.producer_epoch
            ),
        ),
        Some(t)
            if !t.partitions.contains(&(topic.to_owned(), index)) && request.adds_partitions =>
        {
            request.added.borrow_mut().push((topic.to_owned(), index));
            Ok(())
        }
        Some(t) if !t.partitions.contains(&(topic.to_owned(), index)) => fail(
            if request.version > 10 {
                ResponseError::TransactionAbortable
            } else {
                ResponseError::InvalidTxnState
            },
            "Partition was not added to the transaction".into(),
        ),
        Some(_) => Ok(()),
    }
}
