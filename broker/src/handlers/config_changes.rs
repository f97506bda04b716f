//! What AlterConfigs and IncrementalAlterConfigs share: Kafka's checks of a request's
//! resources (`ConfigAdminManager.preprocess` on the broker, then the controller's
//! `ConfigurationControlManager`), and applying a resource's new configs.
//!
//! In Kafka's order, per resource: a resource (type and name) named twice is INVALID_REQUEST
//! for each entry ("Each resource must appear at most once."); a config key named twice in one
//! resource, or a null value (but for IncrementalAlterConfigs' DELETE), INVALID_REQUEST; a
//! resource type other than topic (2) and broker (4) INVALID_REQUEST. A broker resource names
//! this broker's node id or is empty (the cluster-wide default), else INVALID_REQUEST; its
//! changes are checked as [`super::broker_configs`] says (INVALID_REQUEST). For a topic: an
//! empty name INVALID_REQUEST, an illegal one INVALID_TOPIC_EXCEPTION; the resulting configs
//! are validated as a whole (an unknown name or a bad value INVALID_CONFIG) before the topic's
//! existence is checked (UNKNOWN_TOPIC_OR_PARTITION). APPEND and SUBTRACT split their value as
//! Java's `String.split(",")` does (`""` is one empty item, trailing empty items are dropped:
//! `"compact,"` is `compact`, `","` nothing), and it is the resulting value that is validated:
//! an empty item appended (`""`, `",delete"`) leaves an empty item in the list, INVALID_CONFIG,
//! as Kafka 4.4.0 answers (the `incremental_alter_configs_list_items_that_are_empty` case).
//! From 4.1, after a broker resource's own checks, its `min.insync.replicas` rules under
//! Eligible Leader Replicas ([`elr_min_isr_check`]): this is why an AlterConfigs of the cluster
//! level is INVALID_CONFIG unless it names `min.insync.replicas`, for any key it sets.
//!
//! Deviations from Apache Kafka: those of [`super::broker_configs`] (stricter for a few
//! per-broker configs of broker 1, more lenient for `log.retention.minutes`/`hours` of 0).

use std::collections::{BTreeMap, HashMap, HashSet};

use kafka_protocol::ResponseError;

use super::broker_configs::{self, Levels};
use super::Ctx;
use crate::state::topics::{validate_configs, validate_name, TOPIC_CONFIG_DEFAULTS};
use crate::state::{ClusterState, MIN_INSYNC_REPLICAS};
use crate::KafkaVersion;

/// Resource type TOPIC.
pub const RESOURCE_TOPIC: i8 = 2;
/// Resource type BROKER.
pub const RESOURCE_BROKER: i8 = 4;

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

/// One resource of an AlterConfigs or IncrementalAlterConfigs request, read for
/// [`change_each`].
#[derive(Debug)]
pub struct Change<'a> {
    /// The resource type: [`RESOURCE_TOPIC`], [`RESOURCE_BROKER`] or another (refused).
    pub resource_type: i8,
    /// The topic name, or the broker's node id (empty for the cluster-wide default).
    pub name: &'a str,
    /// Every config key named, in request order.
    pub keys: Vec<&'a str>,
    /// The keys whose value is null where the operation needs one.
    pub nulls: Vec<&'a str>,
    /// The operations, or why they cannot be read (checked after [`preprocess`]).
    pub ops: Result<Vec<(String, Op)>, Refusal>,
}

/// Checks and applies (or, `validate_only`, only checks) each resource's changes in request
/// order, under one hold of the state lock, in Kafka's order: a resource named twice, then
/// [`preprocess`], then the operations, then [`alter`] (`replace`: AlterConfigs' legacy
/// semantics). Gives each resource's outcome, in request order.
pub fn change_each(
    ctx: &Ctx<'_>,
    changes: Vec<Change<'_>>,
    replace: bool,
    validate_only: bool,
) -> Vec<Result<(), Refusal>> {
    let twice = named_twice(changes.iter().map(|c| (c.resource_type, c.name)));
    let mut state = ctx.shared.state();
    changes
        .into_iter()
        .zip(twice)
        .map(|(c, twice)| {
            if twice {
                return Err(invalid("Each resource must appear at most once."));
            }
            preprocess(ctx, c.resource_type, c.name, c.keys.into_iter(), c.nulls)?;
            let ops = c.ops?;
            alter(
                &mut state,
                ctx.node_id,
                c.resource_type,
                c.name,
                &ops,
                replace,
                validate_only,
            )
        })
        .collect()
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
/// back to its default), validating the result as Kafka's controller does (a broker resource's
/// as broker `node_id` sees it); nothing changes when `validate_only` or on a refusal. The
/// resource passed [`preprocess`].
///
/// # Errors
/// What Kafka answers: see the module's documentation.
pub fn alter(
    state: &mut ClusterState,
    node_id: i32,
    resource_type: i8,
    name: &str,
    ops: &[(String, Op)],
    replace: bool,
    validate_only: bool,
) -> Result<(), Refusal> {
    if resource_type == RESOURCE_BROKER {
        let current = state.broker_configs.get(name).cloned().unwrap_or_default();
        let configs = broker_changed(state, node_id, name, current, ops, replace)?;
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
    validate_configs(&configs, state.kafka_version)
        .map_err(|m| (ResponseError::InvalidConfig, m))?;
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

/// A broker resource's (`name`) stored dynamic configs `current` with `ops` applied, checked as
/// [`broker_configs`] says for broker `node_id` (every refusal INVALID_REQUEST).
fn broker_changed(
    state: &ClusterState,
    node_id: i32,
    name: &str,
    current: BTreeMap<String, String>,
    ops: &[(String, Op)],
    replace: bool,
) -> Result<BTreeMap<String, String>, Refusal> {
    let keys = ops.iter().map(|(k, _)| k.as_str());
    if let Some(message) = broker_configs::key_refusal(name, keys.clone()) {
        return Err(invalid(&message));
    }
    let bad_value = ops.iter().find_map(|(k, op)| match op {
        Op::Set(v) => broker_configs::value_error(k, v),
        _ => None,
    });
    if let Some(message) = bad_value {
        return Err(invalid(&message));
    }
    let configs = changed(current, ops, replace, |_| false)?;
    let node = node_id.to_string();
    let before = Levels {
        broker: state.broker_configs.get(&node),
        cluster: state.broker_configs.get(""),
    };
    let after = if name.is_empty() {
        Levels {
            cluster: Some(&configs),
            ..before
        }
    } else {
        Levels {
            broker: Some(&configs),
            ..before
        }
    };
    // AlterConfigs' `replace` also changes every stored config not named.
    let stored = before.broker.into_iter().chain(before.cluster);
    let all = keys.chain(stored.flat_map(|c| c.keys().map(String::as_str)));
    if let Some(message) = broker_configs::reconfiguration_error(before, after, all) {
        return Err(invalid(&message));
    }
    if state.kafka_version >= KafkaVersion::V4_1 {
        let removed = name.is_empty()
            && before
                .cluster
                .is_some_and(|c| c.contains_key(MIN_INSYNC_REPLICAS))
            && !configs.contains_key(MIN_INSYNC_REPLICAS);
        elr_min_isr_check(name, ops, removed)?;
    }
    Ok(configs)
}

/// Kafka's controller with Eligible Leader Replicas enabled (KIP-966, on by default in a
/// cluster made by 4.1 or later, which then stores a cluster-level `min.insync.replicas`, as
/// kmock's state does from 4.1): any operation on `min.insync.replicas` of one broker's
/// resource (a DELETE of a value it does not have included, as Kafka 4.4.0 answers) is
/// INVALID_CONFIG, and so is removing the stored cluster-level one (`removed`: stored before,
/// not after): by its DELETE, or by an AlterConfigs of the cluster level that does not name
/// it, whatever else it sets (`ConfigurationControlManager.validateAlterConfig`; case
/// `alter_configs_cluster_level_min_insync_replicas`).
///
/// # Errors
/// INVALID_CONFIG with Kafka's message.
fn elr_min_isr_check(name: &str, ops: &[(String, Op)], removed: bool) -> Result<(), Refusal> {
    if !name.is_empty() && ops.iter().any(|(k, _)| k == MIN_INSYNC_REPLICAS) {
        return Err((
            ResponseError::InvalidConfig,
            "Broker-level min.insync.replicas cannot be altered while ELR is enabled.".into(),
        ));
    }
    if removed {
        return Err((
            ResponseError::InvalidConfig,
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.".into(),
        ));
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
                let mut list: Vec<&str> = configs
                    .get(key)
                    .map(String::as_str)
                    .or(default)
                    .map(|v| v.split(',').filter(|x| !x.is_empty()).collect())
                    .unwrap_or_default();
                let items = java_split(items);
                // Sets, so that a request of n items costs n steps, not n² under the lock.
                if matches!(op, Op::Append(_)) {
                    // Kafka: each item not yet in the list is added at its end (an empty one
                    // too: the caller's validation of the result refuses it).
                    let mut present: HashSet<&str> = list.iter().copied().collect();
                    for item in items {
                        if present.insert(item) {
                            list.push(item);
                        }
                    }
                } else {
                    // Kafka's `List.remove` for each item: its first occurrence still there
                    // goes, so an item named k times takes its first k occurrences.
                    let mut gone: HashMap<&str, usize> = HashMap::new();
                    for item in items {
                        *gone.entry(item).or_default() += 1;
                    }
                    list.retain(|x| match gone.get_mut(x) {
                        Some(k) if *k > 0 => {
                            *k -= 1;
                            false
                        }
                        _ => true,
                    });
                }
                let joined = list.join(",");
                configs.insert(key.clone(), joined);
            }
        }
    }
    Ok(configs)
}

/// `value`'s comma-separated items as Java's `value.split(",")` gives them: `""` is one empty
/// item, and trailing empty items are dropped (`"a,"` is `a`, `","` none).
fn java_split(value: &str) -> Vec<&str> {
    let mut items: Vec<&str> = value.split(',').collect();
    if !value.is_empty() {
        while items.last() == Some(&"") {
            items.pop();
        }
    }
    items
}

fn invalid(message: &str) -> Refusal {
    (ResponseError::InvalidRequest, message.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_after(current: &str, op: Op) -> String {
        let configs = BTreeMap::from([("cleanup.policy".to_owned(), current.to_owned())]);
        let ops = [("cleanup.policy".to_owned(), op)];
        let after = changed(configs, &ops, false, |k| k == "cleanup.policy").expect("a list");
        after["cleanup.policy"].clone()
    }

    #[test]
    fn append_adds_each_item_not_yet_there_in_order() {
        let after = policy_after("delete", Op::Append("compact,delete,compact,x".into()));
        assert_eq!(after, "delete,compact,x");
    }

    #[test]
    fn subtract_takes_an_items_first_occurrence_per_mention_as_kafkas_list_remove() {
        let current = "delete,compact,delete,delete";
        assert_eq!(
            policy_after(current, Op::Subtract("delete".into())),
            "compact,delete,delete"
        );
        assert_eq!(
            policy_after(current, Op::Subtract("delete,x,delete".into())),
            "compact,delete"
        );
    }

    #[test]
    fn items_split_as_javas_string_split() {
        assert_eq!(java_split(""), [""]);
        assert_eq!(java_split(","), Vec::<&str>::new());
        assert_eq!(java_split("compact,"), ["compact"]);
        assert_eq!(java_split(",delete,,"), ["", "delete"]);
        assert_eq!(java_split("delete,,compact"), ["delete", "", "compact"]);
    }

    #[test]
    fn an_empty_item_appended_stays_in_the_list_for_validation_to_refuse() {
        assert_eq!(
            policy_after("delete", Op::Append("compact,".into())),
            "delete,compact"
        );
        assert_eq!(policy_after("delete", Op::Append(",".into())), "delete");
        assert_eq!(policy_after("delete", Op::Append(String::new())), "delete,");
        assert_eq!(
            policy_after("delete", Op::Append(",compact".into())),
            "delete,,compact"
        );
        assert_eq!(
            policy_after("delete,compact", Op::Subtract("compact,".into())),
            "delete"
        );
    }

    #[test]
    fn a_million_items_take_linear_work() {
        // Hang guard only: quadratic work on these sizes took hours.
        let items: Vec<String> = (0..1_000_000).map(|i| format!("x{i}")).collect();
        let appended = policy_after("delete", Op::Append(items.join(",")));
        assert_eq!(appended.split(',').count(), 1_000_001);
        let subtracted = policy_after(&appended, Op::Subtract(items.join(",")));
        assert_eq!(subtracted, "delete");
    }
}
