//! AddOffsetsToTxn (API key 25), versions 0–3.
//!
//! As Kafka's `KafkaApis.handleAddOffsetsToTxnRequest`: the group's `__consumer_offsets`
//! partition joins the transaction, with the checks and errors of AddPartitionsToTxn
//! ([`super::add_partitions_to_txn`]): INVALID_REQUEST, NOT_COORDINATOR,
//! COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED
//! (INVALID_PRODUCER_EPOCH before v2). kmock keeps the group itself in the transaction, and
//! its TxnOffsetCommit offsets pending until the EndTxn.
//!
//! Deviations from Apache Kafka: v4 (transaction version 2) is not implemented;
//! CONCURRENT_TRANSACTIONS is never answered.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;

use super::add_partitions_to_txn::check_coordinator;
use super::Ctx;
use crate::state::producers::ProducerIdAndEpoch;

/// Versions implemented.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 3 };

/// Adds the group to the transaction, or answers why not.
pub fn handle(
    ctx: &Ctx<'_>,
    request: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let txn_id = request.transactional_id.0.as_str();
    let producer = ProducerIdAndEpoch {
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
    };
    let mut state = ctx.shared.state();
    let result = check_coordinator(ctx, &state, txn_id).and_then(|()| {
        let now = tokio::time::Instant::now();
        let group = request.group_id.0.as_str();
        state.add_to_transaction(txn_id, producer, &[], Some(group), now)
    });
    let error = match result {
        Ok(()) => 0,
        Err(ResponseError::ProducerFenced) if version < 2 => {
            ResponseError::InvalidProducerEpoch.code()
        }
        Err(e) => e.code(),
    };
    AddOffsetsToTxnResponse::default().with_error_code(error)
}
