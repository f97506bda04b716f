//! FindCoordinator (API key 10), versions 0–6.
//!
//! Groups (key type 0) are coordinated by the leader of their `__consumer_offsets` partition,
//! transactional ids (key type 1) by the leader of their `__transaction_state` partition, as
//! Kafka places them ([`crate::state::coordinator`]); COORDINATOR_NOT_AVAILABLE while that
//! partition has no live replica ([`crate::state::failover`]). v0–3 ask for one key, v4+ for
//! a batch.
//!
//! Deviations from Apache Kafka: share-group keys (type 2) get INVALID_REQUEST.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::{advertised, Ctx};

/// Versions implemented.
pub const VERSIONS: VersionRange = FindCoordinatorRequest::VERSIONS;

/// Names the coordinator of each key.
pub fn handle(
    ctx: &Ctx<'_>,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let keys = if version >= 4 {
        request.coordinator_keys.clone()
    } else {
        vec![request.key.clone()]
    };
    let coordinators: Vec<Coordinator> = keys
        .into_iter()
        .map(|key| {
            let answer = Coordinator::default().with_key(key.clone());
            let state = ctx.shared.state();
            let node = match request.key_type {
                0 => state.group_coordinator(key.as_str()),
                1 => state.transaction_coordinator(key.as_str()),
                other => {
                    return answer
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "key type {other} is not supported"
                        ))))
                }
            };
            drop(state);
            // -1: the coordinator's partition is offline (every replica's broker is down).
            let Some(broker) = ctx.shared.brokers.iter().find(|b| b.node_id == node) else {
                return answer
                    .with_node_id(BrokerId(-1))
                    .with_port(-1)
                    .with_error_code(ResponseError::CoordinatorNotAvailable.code());
            };
            let (host, port) = advertised(broker);
            answer
                .with_node_id(BrokerId(node))
                .with_host(host)
                .with_port(port)
        })
        .collect();
    if version >= 4 {
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let only = coordinators.into_iter().next().unwrap_or_default();
    FindCoordinatorResponse::default()
        .with_error_code(only.error_code)
        .with_error_message(if version >= 1 {
            only.error_message
        } else {
            None
        })
        .with_node_id(only.node_id)
        .with_host(only.host)
        .with_port(only.port)
}
