//! DescribeConfigs (API key 32), versions 1–4.
//!
//! Topic resources (type 2): a name no topic may have is INVALID_TOPIC_EXCEPTION, an unknown
//! topic UNKNOWN_TOPIC_OR_PARTITION; every topic config kmock knows, with the topic's overrides
//! (source TOPIC_CONFIG) or Kafka's defaults (source DEFAULT_CONFIG), and
//! `internal.segment.bytes` when the topic sets it (source TOPIC_CONFIG). Broker resources (type 4,
//! name = this broker's node id, or empty for the cluster default; another broker's id is
//! INVALID_REQUEST, as Kafka's `ConfigHelper`): the broker defaults clients read, and the
//! dynamic broker configs AlterConfigs and IncrementalAlterConfigs set.
//! `configuration_keys` filters the list; null or empty means every config.
//!
//! Deviations from Apache Kafka: broker configs are a short fixed list, not the whole
//! `KafkaConfig`; topic configs are the ones kmock knows (`TOPIC_CONFIG_DEFAULTS`), not all of
//! Kafka's (conformance case `describe_configs_every_topic_config`); synonyms and
//! documentation are not filled in (`describe_configs_synonyms`).

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::create_topics::{SOURCE_DEFAULT, SOURCE_TOPIC};
use super::{str_bytes, Ctx};
use crate::state::topics::{validate_name, INTERNAL_SEGMENT_BYTES, TOPIC_CONFIG_DEFAULTS};

/// Versions implemented.
pub const VERSIONS: VersionRange = DescribeConfigsRequest::VERSIONS;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Config source STATIC_BROKER_CONFIG.
const SOURCE_STATIC_BROKER: i8 = 4;
/// Config source DYNAMIC_BROKER_CONFIG (set for this broker).
const SOURCE_DYNAMIC_BROKER: i8 = 2;
/// Config source DYNAMIC_DEFAULT_BROKER_CONFIG (set cluster-wide).
const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;

/// Broker configs reported, with kmock's values.
const BROKER_CONFIGS: &[(&str, &str)] = &[
    ("auto.create.topics.enable", "true"),
    ("default.replication.factor", "1"),
    ("message.max.bytes", "1048588"),
    ("min.insync.replicas", "1"),
    ("num.partitions", "1"),
    ("offsets.topic.num.partitions", "50"),
    ("socket.request.max.bytes", "104857600"),
    ("transaction.max.timeout.ms", "900000"),
];

/// A config as answered: name, value, source.
type Config = (String, String, i8);

/// Describes each resource.
pub fn handle(
    ctx: &Ctx<'_>,
    request: DescribeConfigsRequest,
    _version: i16,
) -> DescribeConfigsResponse {
    let results = request.resources.iter().map(|r| describe(ctx, r)).collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn describe(ctx: &Ctx<'_>, resource: &DescribeConfigsResource) -> DescribeConfigsResult {
    let name = resource.resource_name.as_str();
    let result = DescribeConfigsResult::default()
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone());
    let configs: Result<Vec<Config>, (ResponseError, String)> = match resource.resource_type {
        // A name no topic may have is INVALID_TOPIC_EXCEPTION, as Kafka's `ConfigHelper`
        // (`Topic.validate`) before any lookup.
        RESOURCE_TOPIC => match validate_name(name).map(|()| ctx.shared.state()) {
            Err(message) => Err((ResponseError::InvalidTopicException, message)),
            Ok(state) => match state.topics.get(name) {
                Some(topic) => {
                    let mut configs: Vec<Config> = TOPIC_CONFIG_DEFAULTS
                        .iter()
                        .map(|(k, default)| match topic.configs().get(*k) {
                            Some(v) => ((*k).to_owned(), v.clone(), SOURCE_TOPIC),
                            None => ((*k).to_owned(), (*default).to_owned(), SOURCE_DEFAULT),
                        })
                        .collect();
                    // An internal config: described when the topic sets it, as Kafka 4.4.0.
                    if let Some(v) = topic.configs().get(INTERNAL_SEGMENT_BYTES) {
                        configs.push((INTERNAL_SEGMENT_BYTES.to_owned(), v.clone(), SOURCE_TOPIC));
                    }
                    Ok(configs)
                }
                None => Err((
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic {name:?} does not exist"),
                )),
            },
        },
        RESOURCE_BROKER => {
            if name.is_empty() || name == ctx.node_id.to_string() {
                Ok(broker_configs(ctx))
            } else {
                Err((
                    ResponseError::InvalidRequest,
                    format!(
                        "Unexpected broker id, expected {} or empty string, but received {name}",
                        ctx.node_id
                    ),
                ))
            }
        }
        other => Err((
            ResponseError::InvalidRequest,
            format!("resource type {other} is not supported by kmock"),
        )),
    };
    match configs {
        Ok(configs) => result.with_configs(
            configs
                .into_iter()
                .filter(|(k, _, _)| {
                    resource
                        .configuration_keys
                        .as_ref()
                        .filter(|keys| !keys.is_empty())
                        .is_none_or(|keys| keys.iter().any(|key| key.as_str() == k))
                })
                .map(|(k, v, source)| {
                    DescribeConfigsResourceResult::default()
                        .with_name(str_bytes(&k))
                        .with_value(Some(str_bytes(&v)))
                        .with_config_source(source)
                })
                .collect(),
        ),
        Err((error, message)) => result
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message))),
    }
}

/// The broker configs described: kmock's static values, overridden by the dynamic configs set
/// for this broker (source DYNAMIC_BROKER_CONFIG) or cluster-wide (DYNAMIC_DEFAULT_BROKER_CONFIG),
/// and the dynamic configs kmock does not describe otherwise.
fn broker_configs(ctx: &Ctx<'_>) -> Vec<Config> {
    let state = ctx.shared.state();
    let dynamic = |k: &str| {
        let here = state
            .broker_configs
            .get(&ctx.node_id.to_string())
            .and_then(|c| c.get(k));
        here.map(|v| (v.clone(), SOURCE_DYNAMIC_BROKER))
            .or_else(|| {
                state
                    .broker_configs
                    .get("")
                    .and_then(|c| c.get(k))
                    .map(|v| (v.clone(), SOURCE_DYNAMIC_DEFAULT_BROKER))
            })
    };
    let mut configs = static_broker_configs(ctx);
    for (k, value, source) in &mut configs {
        if let Some((v, s)) = dynamic(k) {
            (*value, *source) = (v, s);
        }
    }
    let mut extra: Vec<&String> = state
        .broker_configs
        .iter()
        .filter(|(name, _)| name.is_empty() || **name == ctx.node_id.to_string())
        .flat_map(|(_, c)| c.keys())
        .filter(|k| !BROKER_CONFIGS.iter().any(|(b, _)| b == k))
        .collect();
    extra.sort();
    extra.dedup();
    for k in extra {
        if let Some((v, s)) = dynamic(k) {
            configs.push((k.clone(), v, s));
        }
    }
    configs
}

fn static_broker_configs(ctx: &Ctx<'_>) -> Vec<Config> {
    let config = &ctx.shared.config;
    BROKER_CONFIGS
        .iter()
        .map(|(k, v)| {
            let value = match *k {
                "auto.create.topics.enable" => config.auto_create_topics.to_string(),
                "num.partitions" => config.default_partitions.to_string(),
                "default.replication.factor" => config.replication_factor().to_string(),
                "offsets.topic.num.partitions" => config.offsets_topic_partitions.to_string(),
                "socket.request.max.bytes" => config.max_frame_bytes.to_string(),
                _ => (*v).to_owned(),
            };
            ((*k).to_owned(), value, SOURCE_STATIC_BROKER)
        })
        .collect()
}
