//! Kafka's checks of a broker resource's dynamic configs in AlterConfigs and
//! IncrementalAlterConfigs (`DynamicBrokerConfig`, and the `validateReconfiguration` of each
//! reconfigurable part), as Kafka 4.4.0 answers them (the `incremental_alter_configs_*` broker
//! conformance cases): every refusal is INVALID_REQUEST.
//!
//! In Kafka's order: a config that cannot change at run time ([`STATIC_BROKER_CONFIGS`]); a
//! per-broker config at the cluster level ([`PER_BROKER_CONFIGS`], every `listener.name.`
//! config); a value of the wrong type or out of its range, for the configs kmock knows the type
//! of; a thread count outside [current / 2, current × 2] (`DynamicThreadPool`,
//! `SocketServer`'s network threads, `LogCleaner`) and an effective `log.retention.ms` of 0
//! (`KafkaConfig`: -1, any negative value, or at least 1), where "current" is the broker's
//! effective value: its own dynamic value, else the cluster-level one, else the static default.
//! A broker config no Kafka knows is accepted, as Kafka accepts it.
//!
//! Deviation from Apache Kafka: a new `listeners`, `advertised.listeners`,
//! `listener.security.protocol.map`, SSL keystore or truststore, `principal.builder.class` or
//! `ssl.engine.factory.class` for broker 1 is refused with INVALID_REQUEST
//! ([`KMOCK_REFUSED`]: kmock cannot move its listeners, has no TLS and loads no Java class),
//! where Kafka accepts a valid one: stricter. Not checked: `log.retention.minutes` and
//! `log.retention.hours` of 0 (kmock does not derive `log.retention.ms` from them): more
//! lenient there.

use std::collections::BTreeMap;

/// Broker configs Kafka refuses to change at run time (`DynamicBrokerConfig`: not dynamic),
/// among those kmock describes.
const STATIC_BROKER_CONFIGS: &[&str] = &[
    "auto.create.topics.enable",
    "broker.id",
    "controller.listener.names",
    "controller.quorum.bootstrap.servers",
    "default.replication.factor",
    "log.dir",
    "log.dirs",
    "node.id",
    "offsets.topic.num.partitions",
    "process.roles",
    "socket.request.max.bytes",
    "transaction.max.timeout.ms",
];

/// Broker configs only a broker's own resource may set: Kafka's
/// `DynamicBrokerConfig.PerBrokerConfigs` (`SslConfigs.RECONFIGURABLE_CONFIGS` and
/// `DynamicListenerConfig.ReconfigurableConfigs`, but `max.connections`,
/// `max.connection.creation.rate` and `num.network.threads`). Every `listener.name.` config
/// is per-broker too.
const PER_BROKER_CONFIGS: &[&str] = &[
    "advertised.listeners",
    "listener.security.protocol.map",
    "listeners",
    "principal.builder.class",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.mechanism.inter.broker.protocol",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class",
    "ssl.key.password",
    "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.protocol",
    "ssl.provider",
    "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Per-broker configs kmock refuses for broker 1 as well (the module's deviation); not the
/// `listener.name.` ones.
const KMOCK_REFUSED: &[&str] = &[
    "advertised.listeners",
    "listener.security.protocol.map",
    "listeners",
    "principal.builder.class",
    "ssl.engine.factory.class",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// The thread counts Kafka lets change by at most half or double at a time, and their static
/// defaults (Kafka 4.4's, as kmock's fixture broker runs them).
const THREAD_COUNTS: &[(&str, i64)] = &[
    ("background.threads", 10),
    ("log.cleaner.threads", 1),
    ("num.io.threads", 8),
    ("num.network.threads", 3),
    ("num.recovery.threads.per.data.dir", 2),
    ("num.replica.fetchers", 1),
];

/// Why a broker resource (`name`: a node id, or empty for the cluster level) cannot take
/// changes of `keys` at all, or `None`: a static config, a per-broker config at the cluster
/// level, or one kmock refuses.
pub fn key_refusal<'a>(name: &str, keys: impl Iterator<Item = &'a str> + Clone) -> Option<String> {
    let fixed: Vec<&str> = keys
        .clone()
        .filter(|k| STATIC_BROKER_CONFIGS.contains(k))
        .collect();
    if !fixed.is_empty() {
        return Some(format!(
            "Cannot update these configs dynamically: Set({})",
            fixed.join(", ")
        ));
    }
    let per_broker = |k: &&str| PER_BROKER_CONFIGS.contains(k) || k.starts_with("listener.name.");
    let own: Vec<&str> = keys.clone().filter(per_broker).collect();
    if name.is_empty() && !own.is_empty() {
        return Some(format!(
            "Cannot update these configs at default cluster level, broker id must be specified: \
             Set({})",
            own.join(", ")
        ));
    }
    let mut keys = keys;
    keys.find(|k| KMOCK_REFUSED.contains(k))
        .map(|k| format!("kmock cannot change {k}"))
}

/// Why a dynamic broker config's new value is refused by its type or range (Kafka's
/// `KafkaConfig` definitions of those kmock knows the type of), or `None`.
pub fn value_error(key: &str, value: &str) -> Option<String> {
    let min: i64 = match key {
        "message.max.bytes" => 0,
        "log.retention.ms" | "log.retention.bytes" => i64::MIN,
        _ if THREAD_COUNTS.iter().any(|(k, _)| *k == key) => 1,
        _ => return None,
    };
    let int = !key.ends_with(".ms") && !key.ends_with("retention.bytes");
    match value.trim().parse::<i64>() {
        Ok(n) if n >= min && (!int || i32::try_from(n).is_ok()) => None,
        _ => Some(format!("Invalid value {value} for configuration {key}")),
    }
}

/// The dynamic configs stored for one broker and for the cluster level.
#[derive(Debug, Clone, Copy)]
pub struct Levels<'a> {
    /// The broker's own dynamic configs.
    pub broker: Option<&'a BTreeMap<String, String>>,
    /// The cluster-level dynamic configs (resource `""`).
    pub cluster: Option<&'a BTreeMap<String, String>>,
}

impl Levels<'_> {
    /// `key`'s effective value as a number: the broker's dynamic value, else the cluster
    /// level's, else `default` (a stored value is one that passed [`value_error`]).
    fn number(&self, key: &str, default: i64) -> i64 {
        self.broker
            .and_then(|c| c.get(key))
            .or_else(|| self.cluster.and_then(|c| c.get(key)))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default)
    }
}

/// Why the broker's effective configs cannot go from `before` to `after`, or `None`: Kafka's
/// reconfiguration checks of the `keys` changed (thread counts within half and double the
/// current value, `log.retention.ms` not 0). A key whose effective value stays is not checked,
/// as Kafka checks only what changes.
pub fn reconfiguration_error<'a>(
    before: Levels<'_>,
    after: Levels<'_>,
    mut keys: impl Iterator<Item = &'a str>,
) -> Option<String> {
    keys.find_map(|key| {
        if key == "log.retention.ms" {
            // Unset, `log.retention.hours`' 168 hours: never 0.
            return (after.number(key, -1) == 0).then(|| {
                "log.retention.ms must be unlimited (-1) or, greater than or equal to 1".to_owned()
            });
        }
        let &(_, default) = THREAD_COUNTS.iter().find(|(k, _)| *k == key)?;
        let (current, new) = (before.number(key, default), after.number(key, default));
        if new == current {
            None
        } else if new < current / 2 {
            Some(format!(
                "Dynamic thread count update validation failed for {key}={new}, value should be \
                 at least half the current value {current}"
            ))
        } else if new > current * 2 {
            Some(format!(
                "Dynamic thread count update validation failed for {key}={new}, value should \
                 not be greater than double the current value {current}"
            ))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(name: &str, key: &str) -> bool {
        key_refusal(name, [key].into_iter()).is_some()
    }

    #[test]
    fn keys_refused_as_kafka_4_4_refuses_them() {
        for key in [
            "broker.id",
            "log.dirs",
            "process.roles",
            "auto.create.topics.enable",
        ] {
            assert!(refused("1", key), "{key}");
            assert!(refused("", key), "{key}");
        }
        for key in [
            "listeners",
            "listener.name.plaintext.ssl.keystore.location",
            "ssl.cipher.suites",
            "sasl.enabled.mechanisms",
        ] {
            assert!(refused("", key), "{key}");
        }
        for key in [
            "listener.name.plaintext.ssl.keystore.location",
            "ssl.cipher.suites",
            "sasl.enabled.mechanisms",
            "max.connections",
            "no.such.config",
        ] {
            assert!(!refused("1", key), "{key}");
        }
        assert!(!refused("", "max.connections"));
        assert!(refused("1", "listeners"));
    }

    #[test]
    fn values_refused_by_type_and_range() {
        assert!(value_error("log.cleaner.threads", "many").is_some());
        assert!(value_error("message.max.bytes", "-1").is_some());
        assert!(value_error("num.io.threads", "0").is_some());
        assert!(value_error("log.cleaner.threads", "2").is_none());
        assert!(value_error("log.retention.ms", "-2").is_none());
        assert!(value_error("no.such.config", "x").is_none());
    }

    fn reconfigured(stored: &[(&str, &str, &str)], resource: &str, key: &str, new: &str) -> bool {
        let mut levels: BTreeMap<&str, BTreeMap<String, String>> = BTreeMap::new();
        for (level, k, v) in stored {
            levels
                .entry(level)
                .or_default()
                .insert((*k).to_owned(), (*v).to_owned());
        }
        let before = Levels {
            broker: levels.get("1"),
            cluster: levels.get(""),
        };
        let mut changed = levels.get(resource).cloned().unwrap_or_default();
        changed.insert(key.to_owned(), new.to_owned());
        let after = if resource.is_empty() {
            Levels {
                cluster: Some(&changed),
                ..before
            }
        } else {
            Levels {
                broker: Some(&changed),
                ..before
            }
        };
        reconfiguration_error(before, after, [key].into_iter()).is_none()
    }

    #[test]
    fn thread_counts_move_within_half_and_double_of_the_effective_value() {
        assert!(!reconfigured(&[], "1", "num.io.threads", "100"));
        assert!(reconfigured(&[], "1", "num.io.threads", "16"));
        assert!(!reconfigured(&[], "", "num.io.threads", "3"));
        assert!(reconfigured(&[], "", "num.io.threads", "4"));
        assert!(!reconfigured(&[], "1", "num.network.threads", "7"));
        assert!(!reconfigured(&[], "", "log.cleaner.threads", "3"));
        // From a stored value: the broker's own first, then the cluster level's.
        assert!(reconfigured(
            &[("", "num.io.threads", "16")],
            "1",
            "num.io.threads",
            "32"
        ));
        let both = [("", "num.io.threads", "16"), ("1", "num.io.threads", "4")];
        assert!(!reconfigured(&both, "1", "num.io.threads", "32"));
        // The broker's own value stays in force: a cluster-level change does not move it.
        assert!(reconfigured(&both, "", "num.io.threads", "1000"));
    }

    #[test]
    fn log_retention_ms_of_0_is_refused_and_any_negative_value_is_unlimited() {
        assert!(!reconfigured(&[], "1", "log.retention.ms", "0"));
        assert!(!reconfigured(&[], "", "log.retention.ms", "0"));
        assert!(reconfigured(&[], "", "log.retention.ms", "-2"));
        assert!(reconfigured(&[], "1", "log.retention.ms", "1"));
        let own = [("1", "log.retention.ms", "1000")];
        assert!(reconfigured(&own, "", "log.retention.ms", "0"));
    }
}
