//! ListConfigResources (API key 74, ListClientMetricsResources before Kafka 4.1), versions 0–1.
//!
//! As Kafka 4.4 answers it (`list_config_resources_by_type`, recorded from 4.4.0): v0 lists the
//! client metrics resources (kmock has none: it has no client telemetry, and IncrementalAlterConfigs
//! refuses client metrics resources); v1 lists the resource types asked (Kafka reads them as a
//! set: a type named twice is listed once; kmock lists the types in ascending order), or, with
//! none asked, topics (2), brokers (4) and broker loggers (8, each broker again), with `resource_type` set;
//! groups (32) and client metrics (16) are listed when they have configs, which in kmock they
//! never do; any other type asked is UNSUPPORTED_VERSION at the top level, with no resources.
//!
//! Deviations from Apache Kafka: `__consumer_offsets` is not listed as a topic (Kafka lists it
//! once a FindCoordinator has created it; kmock's Metadata does not list it either); internal
//! topics created by CreateTopics are.

use std::collections::BTreeSet;

use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::{str_bytes, Ctx};

/// Versions implemented.
pub const VERSIONS: VersionRange = ListConfigResourcesRequest::VERSIONS;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

/// Lists the config resources of the types asked.
pub fn handle(
    ctx: &Ctx<'_>,
    request: ListConfigResourcesRequest,
    version: i16,
) -> ListConfigResourcesResponse {
    if version == 0 {
        // Client metrics resources only: kmock has none.
        return ListConfigResourcesResponse::default();
    }
    // Kafka reads the types asked as a set: a type named twice is listed once, and a request
    // naming one type a million times costs one listing.
    let types: BTreeSet<i8> = if request.resource_types.is_empty() {
        BTreeSet::from([TOPIC, BROKER, BROKER_LOGGER])
    } else {
        request.resource_types.iter().copied().collect()
    };
    if types
        .iter()
        .any(|t| ![TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP].contains(t))
    {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let state = ctx.shared.state();
    let resource = |kind: i8, name: &str| {
        ConfigResource::default()
            .with_resource_type(kind)
            .with_resource_name(str_bytes(name))
    };
    let mut resources = Vec::new();
    for kind in types {
        match kind {
            TOPIC => resources.extend(state.topics.keys().map(|name| resource(TOPIC, name))),
            BROKER | BROKER_LOGGER => resources.extend(
                ctx.shared
                    .brokers
                    .iter()
                    .map(|b| resource(kind, &b.node_id.to_string())),
            ),
            // Groups and client metrics are listed when they have configs, which kmock never
            // stores.
            _ => {}
        }
    }
    ListConfigResourcesResponse::default().with_config_resources(resources)
}
