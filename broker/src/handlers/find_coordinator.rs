//! FindCoordinator (API key 10), versions 0–6.
//!
//! Groups (key type 0) are coordinated by the leader of their `__consumer_offsets` partition,
//! transactional ids (key type 1) by the leader of their `__transaction_state` partition, as
//! Kafka places them ([`crate::state::coordinator`]). v0–3 ask for one key, v4+ for a batch.
//!
//! Deviations from Apache Kafka: share-group keys (type 2) get INVALID_REQUEST.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::{advertised, Ctx};
use crate::state::coordinator::{coordinator_for, TRANSACTION_STATE_PARTITIONS};

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
            let partitions = match request.key_type {
                0 => ctx.shared.config.offsets_topic_partitions,
                1 => TRANSACTION_STATE_PARTITIONS,
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
            let nodes: Vec<i32> = ctx.shared.brokers.iter().map(|b| b.node_id).collect();
            let node = coordinator_for(key.as_str(), partitions, &nodes);
            let broker = ctx
                .shared
                .brokers
                .iter()
                .find(|b| b.node_id == node)
                .expect("a node of the cluster");
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
