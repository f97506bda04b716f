//! DescribeCluster (API key 60), versions 0–2.
//!
//! `endpoint_type` (v1+, KIP-919): 1 (brokers) is answered; 2 (controllers) is
//! MISMATCHED_ENDPOINT_TYPE and any other UNSUPPORTED_ENDPOINT_TYPE, with no brokers, as a
//! Kafka broker's listener answers (controllers are asked on a controller listener, which kmock
//! does not have). The answer's `endpoint_type` is always 1, the listener's own, whatever was
//! asked, as Kafka 4.4.0 answers (conformance case `describe_cluster_endpoint_types`).
//!
//! Deviations from Apache Kafka: no authorized operations are reported.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::{advertised, str_bytes, Ctx};

/// Versions implemented.
pub const VERSIONS: VersionRange = DescribeClusterRequest::VERSIONS;

/// The endpoint type of a broker's listener (KIP-919's `EndpointType.BROKER`).
const BROKER_ENDPOINT: i8 = 1;

/// Lists the live brokers, the cluster id and the controller (the first live broker).
pub fn handle(
    ctx: &Ctx<'_>,
    request: DescribeClusterRequest,
    _version: i16,
) -> DescribeClusterResponse {
    let refused = match request.endpoint_type {
        BROKER_ENDPOINT => None,
        2 => Some((
            ResponseError::MismatchedEndpointType,
            "The request was sent to an endpoint of type broker, but we wanted an endpoint of type controller",
        )),
        _ => Some((
            ResponseError::UnsupportedEndpointType,
            "Unsupported endpoint type",
        )),
    };
    if let Some((error, message)) = refused {
        return DescribeClusterResponse::default()
            .with_endpoint_type(BROKER_ENDPOINT)
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_static_str(message)))
            .with_controller_id(BrokerId(-1))
            .with_cluster_authorized_operations(i32::MIN);
    }
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
        .with_endpoint_type(BROKER_ENDPOINT)
        .with_cluster_id(str_bytes(&ctx.shared.config.cluster_id))
        .with_controller_id(BrokerId(controller))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(i32::MIN)
}
