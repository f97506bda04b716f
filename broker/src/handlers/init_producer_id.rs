//! InitProducerId (API key 22), versions 0–5.
//!
//! Without a transactional id: a fresh producer id with epoch 0 on every call, as Kafka's
//! `TransactionCoordinator.handleInitProducerId` (a KIP-360 bump request from an idempotent
//! producer gets a fresh id too). A producer id without an epoch, or an epoch without a
//! producer id, is INVALID_REQUEST, as is an empty transactional id. With a
//! transactional id: a transaction timeout outside 1..=900000 ms gets
//! INVALID_TRANSACTION_TIMEOUT, then a broker other than the transaction coordinator answers
//! NOT_COORDINATOR (Kafka's order); the first call allocates an id, later calls
//! bump the epoch (a new id when the epoch is exhausted); a call naming a producer id and epoch
//! (KIP-360) must name the current ones, or those before the last bump (a retry, answered with
//! the current ones), else PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4, as Kafka maps it).
//!
//! An open transaction of the transactional id is aborted first, with the epoch bumped once
//! (fencing the producer that opened it), and the call is answered CONCURRENT_TRANSACTIONS so
//! that its retry bumps again ([`crate::state::ClusterState::init_transactional_producer`]).
//!
//! Deviations from Apache Kafka: the abort's markers are written before the answer, where
//! Kafka writes them after (a retry may then meet CONCURRENT_TRANSACTIONS again there).

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::producers::ProducerIdAndEpoch;

/// Versions implemented.
pub const VERSIONS: VersionRange = InitProducerIdRequest::VERSIONS;

/// Kafka's default `transaction.max.timeout.ms`.
const TRANSACTION_MAX_TIMEOUT_MS: i32 = 900_000;

/// Allocates or bumps a producer id and epoch.
pub fn handle(
    ctx: &Ctx<'_>,
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let fail = |error: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    // `KafkaApis.handleInitProducerIdRequest`: a producer id without an epoch, or an epoch
    // without a producer id, before anything else.
    if (request.producer_id.0 == -1) != (request.producer_epoch == -1) {
        return fail(ResponseError::InvalidRequest);
    }
    let now_ms = ctx.shared.now_ms();
    let mut state = ctx.shared.state();
    let allocated = match request.transactional_id {
        None => state.producers.allocate(),
        Some(txn_id) if txn_id.0.is_empty() => return fail(ResponseError::InvalidRequest),
        Some(txn_id) => {
            let txn_id = txn_id.0.as_str();
            if !(1..=TRANSACTION_MAX_TIMEOUT_MS).contains(&request.transaction_timeout_ms) {
                return fail(ResponseError::InvalidTransactionTimeout);
            }
            if state.transaction_coordinator(txn_id) != ctx.node_id {
                return fail(ResponseError::NotCoordinator);
            }
            let expected = (request.producer_id.0 != -1).then_some(ProducerIdAndEpoch {
                producer_id: request.producer_id.0,
                producer_epoch: request.producer_epoch,
            });
            let timeout_ms = request.transaction_timeout_ms;
            match state.init_transactional_producer(txn_id, timeout_ms, expected, now_ms) {
                Ok(allocated) => allocated,
                Err(ResponseError::ProducerFenced) if version < 4 => {
                    return fail(ResponseError::InvalidProducerEpoch)
                }
                Err(error) => {
                    drop(state);
                    // An open transaction was aborted: its markers may free read_committed reads.
                    ctx.shared.data_arrived.notify_waiters();
                    return fail(error);
                }
            }
        }
    };
    InitProducerIdResponse::default()
        .with_producer_id(ProducerId(allocated.producer_id))
        .with_producer_epoch(allocated.producer_epoch)
}
