//! IncrementalAlterConfigs (API key 44), versions 0–1.
//!
//! Changes topic and broker configs by operation: SET (0), DELETE (1), APPEND (2) and SUBTRACT
//! (3), the last two on list configs only (`cleanup.policy`). Checks and errors as Kafka's
//! `ConfigAdminManager` and controller ([`super::config_changes`]); `validate_only` checks and
//! changes nothing. DescribeConfigs shows the change, and the configs kmock acts on take effect
//! from the next request: `max.message.bytes`, `message.timestamp.type` and
//! `message.timestamp.{before,after}.max.ms`, `min.insync.replicas` and `cleanup.policy` on
//! Produce, `cleanup.policy` on DeleteRecords; `retention.ms` and `retention.bytes` are stored.
//!
//! Deviations from Apache Kafka: a topic config kmock does not know (Kafka knows about 40,
//! `TOPIC_CONFIG_DEFAULTS`) is refused with INVALID_CONFIG, where Kafka sets it; broker configs
//! are stored and described but change nothing kmock does (kmock checks the values of a few
//! dynamic ones, and refuses new listeners and keystores for broker 1, see
//! [`super::config_changes`]); group (32), client metrics (16) and broker logger (8) resources
//! are INVALID_REQUEST (Kafka answers INVALID_CONFIG for a logger it does not have, and changes
//! the level of one it has); retention is not enforced on the log.

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::config_changes::{change_each, Change, Op};
use super::Ctx;

/// Versions implemented.
pub const VERSIONS: VersionRange = IncrementalAlterConfigsRequest::VERSIONS;

/// Applies (or, `validate_only`, checks) each resource's operations.
pub fn handle(
    ctx: &Ctx<'_>,
    request: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
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
                .filter(|c| c.config_operation != 1 && c.value.is_none())
                .map(|c| c.name.as_str())
                .collect(),
            ops: r
                .configs
                .iter()
                .map(|c| {
                    let value = || c.value.as_deref().unwrap_or_default().to_owned();
                    let op = match c.config_operation {
                        0 => Op::Set(value()),
                        1 => Op::Delete,
                        2 => Op::Append(value()),
                        3 => Op::Subtract(value()),
                        // Kafka's controller fails on an operation it does not
                        // know (`OpType.forId` is null), answered as this.
                        other => {
                            return Err((
                                ResponseError::UnknownServerError,
                                format!("Unknown operations type {other}"),
                            ))
                        }
                    };
                    Ok((c.name.to_string(), op))
                })
                .collect(),
        })
        .collect();
    let outcomes = change_each(ctx, changes, false, request.validate_only);
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
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
