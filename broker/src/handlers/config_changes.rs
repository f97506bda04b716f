//! What AlterConfigs and IncrementalAlterConfigs share: Kafka's checks of a request's
//! resources (`ConfigAdminManager.preprocess` on the broker, then the controller's
//! `ConfigurationControlManager`), and applying a resource's new configs.
//!
//! In Kafka's order, per resource: a resource (type and name) named twice is INVALID_REQUEST
//! for each entry ("Each resource must appear at most once."); a config key named twice in one
//! resource, or a null value (but for IncrementalAlterConfigs' DELETE), INVALID_REQUEST; a
//! resource type other than topic (2) and broker (4) INVALID_REQUEST. A broker resource names
//! this broker's node id or is empty (the cluster-wide default), else INVALID_REQUEST. For a
//! topic: an empty name INVALID_REQUEST, an illegal one INVALID_TOPIC_EXCEPTION; the resulting
//! configs are validated as a whole (an unknown name or a bad value INVALID_CONFIG) before the
//! topic's existence is checked (UNKNOWN_TOPIC_OR_PARTITION).

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::topics::{validate_configs, validate_name, TOPIC_CONFIG_DEFAULTS};
use crate::state::ClusterState;

/// Resource type TOPIC.
pub const RESOURCE_TOPIC: i8 = 2;
/// Resource type BROKER.
pub const RESOURCE_BROKER: i8 = 4;

/// Broker configs Kafka refuses to change at run time (`DynamicBrokerConfig`: not dynamic),
/// among those kmock describes.
const STATIC_BROKER_CONFIGS: &[&str] = &[
    "auto.create.topics.enable",
    "default.replication.factor",
    "offsets.topic.num.partitions",
    "socket.request.max.bytes",
    "transaction.max.timeout.ms",
];

/// A refusal: the error and its message.
pub type Refusal = (ResponseError, String);

/// One change to a config, as IncrementalAlterConfigs' operations (AlterConfigs sets each
/// given config and deletes the others).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// SET (0): the value.
    Set(String),
    /// DELETE (1): back to the default.
    Delete,
    /// APPEND (2) to a list config, each comma-separated item not already there.
    Append(String),
    /// SUBTRACT (3) from a list config, each comma-separated item.
    Subtract(String),
}

/// Which entries of a request name a resource (type, name) that another entry names too.
pub fn named_twice<'a>(resources: impl Iterator<Item = (i8, &'a str)>) -> Vec<bool> {
    let all: Vec<(i8, &str)> = resources.collect();
    let mut seen = HashSet::new();
    let twice: HashSet<(i8, &str)> = all.iter().filter(|r| !seen.insert(**r)).copied().collect();
    all.iter().map(|r| twice.contains(r)).collect()
}

/// Checks a resource's config keys (none twice) and type, and a broker resource's name, as
/// Kafka's `ConfigAdminManager.preprocess`.
///
/// # Errors
/// INVALID_REQUEST, with Kafka's message.
pub fn preprocess<'a>(
    ctx: &Ctx<'_>,
    resource_type: i8,
    name: &str,
    mut keys: impl Iterator<Item = &'a str>,
    null_values: Vec<&str>,
) -> Result<(), Refusal> {
    let mut seen = HashSet::new();
    if !keys.all(|k| seen.insert(k)) {
        return Err(invalid("Error due to duplicate config keys"));
    }
    if !null_values.is_empty() {
        return Err(invalid(&format!(
            "Null value not supported for : {}",
            null_values.join(", ")
        )));
    }
    match resource_type {
        RESOURCE_TOPIC => Ok(()),
        RESOURCE_BROKER if name.is_empty() => Ok(()),
        RESOURCE_BROKER => match name.parse::<i32>() {
            Ok(id) if id == ctx.node_id => Ok(()),
            Ok(_) => Err(invalid(&format!(
                "Unexpected broker id, expected {}, but received {name}",
                ctx.node_id
            ))),
            Err(_) => Err(invalid(&format!(
                "Node id must be an integer, but it is: {name}"
            ))),
        },
        other => Err(invalid(&format!("Unknown resource type {other}"))),
    }
}

/// Applies `ops` to a resource's configs (`replace`: AlterConfigs, every config not named goes
/// back to its default), validating the result as Kafka's controller does; nothing changes when
/// `validate_only` or on a refusal. The resource passed [`preprocess`].
///
/// # Errors
/// What Kafka answers: see the module's documentation.
pub fn alter(
    state: &mut ClusterState,
    resource_type: i8,
    name: &str,
    ops: &[(String, Op)],
    replace: bool,
    validate_only: bool,
) -> Result<(), Refusal> {
    if resource_type == RESOURCE_BROKER {
        let refused: Vec<&str> = ops
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| STATIC_BROKER_CONFIGS.contains(k))
            .collect();
        if !refused.is_empty() {
            return Err(invalid(&format!(
                "Cannot update these configs dynamically: Set({})",
                refused.join(", ")
            )));
        }
        let current = state.broker_configs.get(name).cloned().unwrap_or_default();
        let configs = changed(current, ops, replace, |_| false)?;
        if !validate_only {
            state.broker_configs.insert(name.to_owned(), configs);
        }
        return Ok(());
    }
    if name.is_empty() {
        return Err(invalid("Default topic resources are not allowed."));
    }
    validate_name(name).map_err(|m| (ResponseError::InvalidTopicException, m))?;
    let current = state
        .topics
        .get(name)
        .map(|t| t.configs().clone())
        .unwrap_or_default();
    let configs = changed(current, ops, replace, |k| k == "cleanup.policy")?;
    validate_configs(&configs).map_err(|m| (ResponseError::InvalidConfig, m))?;
    let topic = state.topics.get_mut(name).ok_or_else(|| {
        (
            ResponseError::UnknownTopicOrPartition,
            format!("Topic {name} does not exist."),
        )
    })?;
    if !validate_only {
        tracing::debug!(topic = name, ?configs, "topic configs altered");
        topic.set_configs(configs);
    }
    Ok(())
}

/// `current` with `ops` applied, as Kafka's `ConfigurationControlManager
/// .incrementalAlterConfigResource` (APPEND and SUBTRACT only on a list config, `is_list`).
fn changed(
    mut configs: BTreeMap<String, String>,
    ops: &[(String, Op)],
    replace: bool,
    is_list: impl Fn(&str) -> bool,
) -> Result<BTreeMap<String, String>, Refusal> {
    if replace {
        configs.clear();
    }
    for (key, op) in ops {
        match op {
            Op::Set(value) => {
                configs.insert(key.clone(), value.clone());
            }
            Op::Delete => {
                configs.remove(key);
            }
            Op::Append(items) | Op::Subtract(items) => {
                if !is_list(key) {
                    let what = if matches!(op, Op::Append(_)) {
                        "APPEND"
                    } else {
                        "SUBTRACT"
                    };
                    return Err((
                        ResponseError::InvalidConfig,
                        format!("Can't {what} to key {key} because its type is not LIST."),
                    ));
                }
                // Unset: the default's items (Kafka's `getParts`).
                let default = TOPIC_CONFIG_DEFAULTS
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| *v);
                let mut list: Vec<String> = configs
                    .get(key)
                    .map(String::as_str)
                    .or(default)
                    .map(|v| {
                        v.split(',')
                            .filter(|x| !x.is_empty())
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                for item in items.split(',') {
                    if matches!(op, Op::Append(_)) {
                        if !list.iter().any(|x| x == item) {
                            list.push(item.to_owned());
                        }
                    } else if let Some(at) = list.iter().position(|x| x == item) {
                        list.remove(at);
                    }
                }
                configs.insert(key.clone(), list.join(","));
            }
        }
    }
    Ok(configs)
}

fn invalid(message: &str) -> Refusal {
    (ResponseError::InvalidRequest, message.to_owned())
}
