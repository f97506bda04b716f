//! DescribeCluster (API key 60), versions 0–2.
//!
//! Deviations from Apache Kafka: `endpoint_type` 2 (controllers, KIP-919) is answered with the
//! brokers, since kmock has no separate controllers; no authorized operations are reported.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::{Message, VersionRange};

use super::{advertised, str_bytes, Ctx};

/// Versions implemented.
pub const VERSIONS: VersionRange = DescribeClusterRequest::VERSIONS;

/// Lists the live brokers, the cluster id and the controller (the first live broker).
pub fn handle(
    ctx: &Ctx<'_>,
    request: DescribeClusterRequest,
    _version: i16,
) -> DescribeClusterResponse {
    let down = ctx.shared.state().down.clone();
    let live = ctx
        .shared
        .brokers
        .iter()
        .filter(|b| !down.contains(&b.node_id));
    let controller = live.clone().next().map_or(-1, |b| b.node_id);
    let brokers = live
        .map(|b| {
            let (host, port) = advertised(b);
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.node_id))
                .with_host(host)
                .with_port(port)
        })
        .collect();
    DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_id(str_bytes(&ctx.shared.config.cluster_id))
        .with_controller_id(BrokerId(controller))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(i32::MIN)
}
