//! AlterConfigs (API key 33), versions 0–2.
//!
//! Replaces a topic's or broker's configs with those given: each is set, every other goes back
//! to its default (Kafka's legacy semantics). Checks and errors as Kafka's `ConfigAdminManager`
//! and controller ([`super::config_changes`]), a null value refused with INVALID_REQUEST;
//! `validate_only` checks and changes nothing. What takes effect is as for
//! IncrementalAlterConfigs ([`super::incremental_alter_configs`]).
//!
//! Deviations from Apache Kafka: those of IncrementalAlterConfigs. A request naming one
//! resource twice gets INVALID_REQUEST for both entries ("Each resource must appear at most
//! once.", what Kafka's `ConfigAdminManager.preprocess` decides), where Kafka 4.4.0 never
//! answers it: building the answer throws `IllegalStateException: Duplicate key` (a map of
//! the resources' errors by resource), and so does the error answer `KafkaApis.handleError`
//! tries next, so the request stays unanswered on an open connection. Nothing is applied in
//! either; no conformance case, as "no answer" cannot be recorded without a time bound.

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};

use super::config_changes::{change_each, Change, Op};
use super::Ctx;

/// Versions implemented.
pub const VERSIONS: VersionRange = AlterConfigsRequest::VERSIONS;

/// Replaces (or, `validate_only`, checks) each resource's configs.
pub fn handle(ctx: &Ctx<'_>, request: AlterConfigsRequest, _version: i16) -> AlterConfigsResponse {
    let changes = request
        .resources
        .iter()
        .map(|r| Change {
            resource_type: r.resource_type,
            name: r.resource_name.as_str(),
            keys: r.configs.iter().map(|c| c.name.as_str()).collect(),
            nulls: r
                .configs
                .iter()
                .filter(|c| c.value.is_none())
                .map(|c| c.name.as_str())
                .collect(),
            ops: Ok(r
                .configs
                .iter()
                .map(|c| {
                    let value = c.value.as_deref().unwrap_or_default().to_owned();
                    (c.name.to_string(), Op::Set(value))
                })
                .collect()),
        })
        .collect();
    let outcomes = change_each(ctx, changes, true, request.validate_only);
    let responses = request
        .resources
        .iter()
        .zip(outcomes)
        .map(|(r, outcome)| {
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            match outcome {
                Ok(()) => response,
                Err((error, message)) => response
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}
