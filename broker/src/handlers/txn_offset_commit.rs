//! TxnOffsetCommit (API key 28), versions 0–5.
//!
//! As Kafka's `KafkaApis.handleTxnOffsetCommitRequest` and the group coordinator's
//! `commitTransactionalOffsets`, in Kafka's order: partitions of unknown topics get
//! UNKNOWN_TOPIC_OR_PARTITION; then, for the rest, a broker other than the group's
//! coordinator answers NOT_COORDINATOR, an empty group id INVALID_GROUP_ID; the transaction is
//! verified (KIP-890 part 1): an unknown transactional id or another producer id is
//! INVALID_PRODUCER_ID_MAPPING, another epoch INVALID_PRODUCER_EPOCH, a group not added with
//! AddOffsetsToTxn TRANSACTION_ABORTABLE (INVALID_TXN_STATE before v4); then the group checks
//! member and generation (KIP-447, from v3: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
//! FENCED_INSTANCE_ID; a rebalance does not refuse it); metadata over 4096 UTF-16 code units is
//! OFFSET_METADATA_TOO_LARGE. Accepted offsets stay pending, invisible to OffsetFetch, until
//! the transaction's EndTxn commits them (or drops them on abort).
//!
//! With transaction version 2 ([`crate::TransactionVersion::V2`]), a v5 request whose group
//! is not in the transaction adds it (KIP-890 part 2: a version-2 client sends no
//! AddOffsetsToTxn), opening the transaction if none was; with version 1, or below v5, it is
//! refused as above.
//!
//! Deviations from Apache Kafka: Kafka 4.4 serves v6, kmock stops at v5 (the codec's
//! highest). For a KIP-848 consumer group, a member epoch older than the member's is
//! STALE_MEMBER_EPOCH whatever the partitions, where Kafka 4.4 takes it for partitions the
//! member has owned since that epoch (KIP-1251): stricter.

use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::offset_answers::answer_commits;
use super::Ctx;
use crate::state::ClusterState;

/// Versions implemented.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// Keeps each partition's offset pending in the transaction, or answers why not.
pub fn handle(
    ctx: &Ctx<'_>,
    request: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let group_id = request.group_id.0.as_str();
    let txn_id = request.transactional_id.0.as_str();
    let mut state = ctx.shared.state();
    let group = check(ctx, &mut state, &request, version);
    let (topics, accepted) = answer_commits(&state, &request.topics, group);
    if !accepted.is_empty() {
        tracing::debug!(
            transactional_id = txn_id,
            group_id,
            offsets = accepted.len(),
            "transactional offsets pending"
        );
        state.add_pending_offsets(group_id, request.producer_id.0, accepted);
    }
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The checks that answer every partition alike, in Kafka's order.
fn check(
    ctx: &Ctx<'_>,
    state: &mut ClusterState,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> Result<(), ResponseError> {
    let group_id = request.group_id.0.as_str();
    if !ctx.coordinates_group(state, group_id) {
        return Err(ResponseError::NotCoordinator);
    }
    if group_id.is_empty() {
        return Err(ResponseError::InvalidGroupId);
    }
    let in_txn = state
        .transactions
        .check_producer(
            request.transactional_id.0.as_str(),
            request.producer_id.0,
            request.producer_epoch,
        )
        .map_err(|e| match e {
            ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
            e => e,
        })?
        .groups
        .contains(group_id);
    let adds_group =
        version >= 5 && ctx.shared.config.transaction_version >= crate::TransactionVersion::V2;
    if !in_txn && adds_group {
        let producer = crate::state::producers::ProducerIdAndEpoch {
            producer_id: request.producer_id.0,
            producer_epoch: request.producer_epoch,
        };
        let now = (tokio::time::Instant::now(), ctx.shared.now_ms());
        let txn_id = request.transactional_id.0.as_str();
        state.add_to_transaction(txn_id, producer, &[], Some(group_id), now, true)?;
    } else if !in_txn {
        return Err(if version >= 4 {
            ResponseError::TransactionAbortable
        } else {
            ResponseError::InvalidTxnState
        });
    }
    state.groups.check_txn_commit(
        group_id,
        request.generation_id,
        request.member_id.as_str(),
        request.group_instance_id.as_ref().map(StrBytes::as_str),
    )
}
