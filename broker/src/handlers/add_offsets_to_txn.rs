//! AddOffsetsToTxn (API key 25), versions 0–4 (v4, KIP-890: the client understands
//! TRANSACTION_ABORTABLE; answered as v3).
//!
//! As Kafka's `KafkaApis.handleAddOffsetsToTxnRequest`: the group's `__consumer_offsets`
//! partition joins the transaction, with the checks and errors of AddPartitionsToTxn
//! ([`super::add_partitions_to_txn`]): INVALID_REQUEST, NOT_COORDINATOR,
//! COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED
//! (INVALID_PRODUCER_EPOCH before v2). kmock keeps the group itself in the transaction, and
//! its TxnOffsetCommit offsets pending until the EndTxn.
//!
//! Deviations from Apache Kafka: CONCURRENT_TRANSACTIONS is never answered.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use kafka_protocol::protocol::VersionRange;

use super::add_partitions_to_txn::{add_to_transaction, error_code};
use super::Ctx;

/// Versions implemented.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// Adds the group to the transaction, or answers why not.
pub fn handle(
    ctx: &Ctx<'_>,
    request: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let txn_id = request.transactional_id.0.as_str();
    let producer = (request.producer_id.0, request.producer_epoch);
    let group = Some(request.group_id.0.as_str());
    let mut state = ctx.shared.state();
    let result = add_to_transaction(ctx, &mut state, txn_id, producer, Vec::new, group, false);
    AddOffsetsToTxnResponse::default().with_error_code(error_code(result, version))
}
