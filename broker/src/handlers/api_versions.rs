//! ApiVersions (API key 18), versions 0–5.
//!
//! Answers from [`super::REGISTRY`], within what the broker of the emulated Kafka release
//! advertised ([`super::advertised_versions`], [`crate::KafkaVersion`]): emulating 2.8, kmock
//! lists the APIs it implements at the versions Kafka 2.8 listed them. Before 4.0 no feature is
//! listed and the finalized features' epoch is -1, as a ZooKeeper broker answers (a 3.x KRaft
//! broker lists `metadata.version`, which no client acts on). A version kmock cannot parse gets
//! the v0 answer with
//! UNSUPPORTED_VERSION listing ApiVersions alone (see [`crate::codec`]), as Kafka's
//! `ApiVersionsRequest` handling does (KIP-511).
//! From v3, a client software name or version that is not `[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?`
//! gets INVALID_REQUEST with no API list, as Kafka's `ApiVersionsRequest.isValid`.
//! From v5 (KIP-1242) the client may name the cluster and node it means to reach: naming one
//! without the other (a null `cluster_id` with a `node_id` other than -1, or the reverse) is
//! INVALID_REQUEST; naming both where either is not this cluster's id or this broker's node id
//! is REBOOTSTRAP_REQUIRED, with no API list; as Kafka 4.4.0 answers (both seen on the wire:
//! the `api_versions_v5_*` conformance cases).
//!
//! From v3, the `transaction.version` feature finalized at the cluster's
//! [`crate::TransactionVersion`] (min and max level both 1 or 2), and from v4 supported 0–2 (a
//! supported feature whose lowest level is 0 is left out of v3 answers, KAFKA-17011), as the
//! Kafka 4.4.0 broker of `fixtures/kafka/kafka.sh` advertises it (finalized 2 there); clients
//! choose transaction version 2 (KIP-890 part 2) from the finalized level. From 4.1, likewise
//! `eligible.leader.replicas.version` finalized 1 (supported 0–1), as a new 4.1+ cluster
//! enables Eligible Leader Replicas (case `eligible_leader_replicas_from_4_1`).
//!
//! Deviations from Apache Kafka: `transaction.version` and, from 4.1,
//! `eligible.leader.replicas.version` are the only features advertised (Kafka 4.x also lists
//! `metadata.version`, `kraft.version`, `group.version` and others); the finalized features'
//! epoch is always 1, where Kafka gives the metadata offset they were read at.
//!
//! Differences the conformance cases show against Kafka 4.4.0 (`kmock_tests::conformance`,
//! recordings in `fixtures/conformance/`): Produce is advertised from v3, where Kafka 4.4 advertises
//! v0 and closes the connection of a v0–v2 request; ListOffsets, OffsetCommit, OffsetFetch,
//! DeleteGroups, TxnOffsetCommit and DescribeLogDirs stop one version below Kafka
//! 4.4 (`api_versions_implemented_apis`). Kafka 4.4 without a client telemetry plugin does not
//! advertise GetTelemetrySubscriptions and PushTelemetry (`api_versions_every_api`); neither
//! does kmock.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, ResponseKind};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::{Ctx, REGISTRY};
use crate::KafkaVersion;

/// Versions implemented.
pub const VERSIONS: VersionRange = ApiVersionsRequest::VERSIONS;

/// Lists every implemented API with its version range.
pub fn handle(ctx: &Ctx<'_>, request: ApiVersionsRequest, version: i16) -> ApiVersionsResponse {
    let valid = version < 3
        || (is_valid_software_field(request.client_software_name.as_str())
            && is_valid_software_field(request.client_software_version.as_str()));
    if !valid {
        return ApiVersionsResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code());
    }
    let config = &ctx.shared.config;
    if let Some(error) = target_error(&config.cluster_id, ctx.node_id, &request, version) {
        return ApiVersionsResponse::default().with_error_code(error.code());
    }
    let kafka_version = ctx.shared.config.kafka_version;
    let answer = ApiVersionsResponse::default().with_api_keys(api_keys(kafka_version));
    if kafka_version < KafkaVersion::V4_0 {
        // No feature Kafka 2.x-3.x finalizes that clients act on: a ZooKeeper broker answers
        // none, with the epoch unknown (`UNKNOWN_FINALIZED_FEATURES_EPOCH`).
        return answer.with_finalized_features_epoch(-1);
    }
    let level = ctx.shared.config.transaction_version.level();
    // (name, supported max level, finalized level): the supported min is 0 for each.
    let mut features = vec![(TRANSACTION_VERSION, 2, level)];
    if kafka_version >= KafkaVersion::V4_1 {
        features.push((ELIGIBLE_LEADER_REPLICAS_VERSION, 1, 1));
    }
    let supported = features.iter().map(|(name, max, _)| {
        SupportedFeatureKey::default()
            .with_name(super::str_bytes(name))
            .with_min_version(0)
            .with_max_version(*max)
    });
    let finalized = features.iter().map(|(name, _, level)| {
        FinalizedFeatureKey::default()
            .with_name(super::str_bytes(name))
            .with_max_version_level(*level)
            .with_min_version_level(*level)
    });
    answer
        .with_supported_features(if version >= 4 {
            supported.collect()
        } else {
            Vec::new()
        })
        .with_finalized_features_epoch(1)
        .with_finalized_features(finalized.collect())
}

/// Kafka's name of the transaction protocol feature (`TransactionVersion.FEATURE_NAME`).
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// Kafka's name of the Eligible Leader Replicas feature (KIP-966,
/// `EligibleLeaderReplicasVersion.FEATURE_NAME`): supported 0–1, finalized 1 in a cluster made
/// by Kafka 4.1 or later.
pub const ELIGIBLE_LEADER_REPLICAS_VERSION: &str = "eligible.leader.replicas.version";

/// The v5 check of the cluster and node the client means to reach (KIP-1242), on the broker
/// `node_id` of the cluster `cluster_id`: `None` when it names neither or names this broker of
/// this cluster.
fn target_error(
    cluster_id: &str,
    node_id: i32,
    request: &ApiVersionsRequest,
    version: i16,
) -> Option<ResponseError> {
    if version < 5 {
        return None;
    }
    match (&request.cluster_id, request.node_id) {
        (None, -1) => None,
        (None, _) | (Some(_), -1) => Some(ResponseError::InvalidRequest),
        (Some(cluster), node) => (cluster.as_str() != cluster_id || node != node_id)
            .then_some(ResponseError::RebootstrapRequired),
    }
}

fn is_valid_software_field(s: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    s.starts_with(alphanumeric)
        && s.ends_with(alphanumeric)
        && s.chars().all(|c| alphanumeric(c) || c == '.' || c == '-')
}

/// The v0 answer to an ApiVersions request at a version kmock cannot parse: UNSUPPORTED_VERSION
/// listing ApiVersions alone with its range, so that the client retries at a version both
/// know (KIP-511, Kafka's `ApiVersionsResponse.unsupportedVersionResponse`).
pub fn unsupported_version_answer(kafka_version: KafkaVersion) -> ResponseKind {
    let own = api_keys(kafka_version)
        .into_iter()
        .filter(|k| k.api_key == ApiKey::ApiVersions as i16)
        .collect();
    ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(own),
    )
}

/// Every API a cluster emulating `kafka_version` serves, with its versions
/// ([`super::advertised_versions`]), by key.
fn api_keys(kafka_version: KafkaVersion) -> Vec<ApiVersion> {
    let mut keys: Vec<ApiVersion> = REGISTRY
        .iter()
        .filter_map(|(key, _)| {
            let range = super::advertised_versions(kafka_version, *key)?;
            Some(
                ApiVersion::default()
                    .with_api_key(*key as i16)
                    .with_min_version(range.min)
                    .with_max_version(range.max),
            )
        })
        .collect();
    keys.sort_by_key(|k| k.api_key);
    keys
}

#[cfg(test)]
mod tests {
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    fn asking(cluster: Option<&'static str>, node: i32) -> ApiVersionsRequest {
        ApiVersionsRequest::default()
            .with_cluster_id(cluster.map(StrBytes::from_static_str))
            .with_node_id(node)
    }

    /// As Kafka 4.4.0 answered each on the wire (`api_versions_v5_*` conformance cases).
    #[test]
    fn v5_checks_the_cluster_and_node_named_both_or_neither() {
        let check = |cluster, node| target_error("abc", 1, &asking(cluster, node), 5);
        assert_eq!(check(None, -1), None);
        assert_eq!(check(Some("abc"), 1), None);
        assert_eq!(check(None, 1), Some(ResponseError::InvalidRequest));
        assert_eq!(check(None, -2), Some(ResponseError::InvalidRequest));
        assert_eq!(check(Some("abc"), -1), Some(ResponseError::InvalidRequest));
        assert_eq!(
            check(Some("abc"), 7),
            Some(ResponseError::RebootstrapRequired)
        );
        assert_eq!(
            check(Some("abc"), -2),
            Some(ResponseError::RebootstrapRequired)
        );
        assert_eq!(
            check(Some("xyz"), 1),
            Some(ResponseError::RebootstrapRequired)
        );
        assert_eq!(check(Some(""), 1), Some(ResponseError::RebootstrapRequired));
    }

    #[test]
    fn before_v5_the_fields_do_not_exist() {
        assert_eq!(target_error("abc", 1, &asking(Some("xyz"), 7), 4), None);
    }
}
