//! EndTxn (API key 26), versions 0–5 (v5: transaction version 2).
//!
//! As Kafka's `TransactionCoordinator.endTransaction` for transaction version 1: an empty
//! transactional id is INVALID_REQUEST; a broker other than the transaction coordinator
//! answers NOT_COORDINATOR (COORDINATOR_NOT_AVAILABLE while its partition is offline); an
//! unknown transactional id or another producer id is INVALID_PRODUCER_ID_MAPPING; another
//! epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2). An open transaction is committed or
//! aborted: a control batch with the commit or abort marker is appended to every partition of
//! the transaction (aborts enter the partition's aborted index, the last stable offset moves
//! on), and the offsets its TxnOffsetCommits left pending become the groups' committed offsets
//! (commit) or are dropped (abort). A retry of the EndTxn that ended the last transaction is
//! answered NONE again; any other EndTxn without an open transaction is INVALID_TXN_STATE.
//!
//! v5 (transaction version 2, KIP-890 part 2; Kafka takes the version of the request, not the
//! cluster's feature, as the client's transaction version): every EndTxn that ends a
//! transaction bumps the producer epoch, the markers carry the bumped epoch, and the answer
//! names the producer id and epoch to go on with: the bumped epoch, or, when the epoch was
//! exhausted (32766 or more), a new producer id at epoch 0. After such an end, the epoch sent
//! must be the one before the bump (a retry, answered NONE with the current id and epoch, or
//! INVALID_TXN_STATE when it turned from commit to abort or back); the current epoch with no
//! transaction open is INVALID_TXN_STATE for a commit, while an abort is taken and bumps the
//! epoch as any end does (the producer may not know whether anything was added; also right
//! after InitProducerId); any other epoch PRODUCER_FENCED
//! (`TransactionCoordinator.endTransaction`; checked against Kafka 4.4.0 by the conformance case
//! `txn_v2_end_txn_bumps_the_epoch`). v0–4 answers carry no producer id or epoch.
//!
//! Deviations from Apache Kafka: the markers are written before the answer, so the
//! transaction is never seen in PrepareCommit or PrepareAbort and CONCURRENT_TRANSACTIONS is
//! never answered. The answer to an EndTxn that rolled the producer id over names the new id
//! and epoch 0, as KIP-890 describes; this was not seen on a real broker (32766 transactions).

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;

use super::add_partitions_to_txn::check_coordinator;
use super::Ctx;
use crate::state::producers::ProducerIdAndEpoch;

/// Versions implemented.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// Commits or aborts the transaction, or answers why not.
pub fn handle(ctx: &Ctx<'_>, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    let txn_id = request.transactional_id.0.as_str();
    let producer = ProducerIdAndEpoch {
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
    };
    let now_ms = ctx.shared.now_ms();
    let mut state = ctx.shared.state();
    let result = check_coordinator(ctx, &state, txn_id).and_then(|()| {
        state.end_transaction(txn_id, producer, request.committed, version >= 5, now_ms)
    });
    drop(state);
    match result {
        Ok(ended) => {
            if !ended.markers.is_empty() {
                tracing::debug!(
                    transactional_id = txn_id,
                    committed = ended.committed,
                    markers = ended.markers.len(),
                    "transaction ended"
                );
                ctx.shared.data_arrived.notify_waiters();
            }
            let answer = EndTxnResponse::default();
            if version < 5 {
                return answer;
            }
            answer
                .with_producer_id(ProducerId(ended.producer.producer_id))
                .with_producer_epoch(ended.producer.producer_epoch)
        }
        Err(error) => {
            let error = match error {
                ResponseError::ProducerFenced if version < 2 => ResponseError::InvalidProducerEpoch,
                e => e,
            };
            EndTxnResponse::default()
                .with_error_code(error.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
    }
}
