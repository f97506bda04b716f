//! Topic configs: the ones kmock knows with Kafka's defaults, their checks (Kafka's
//! `LogConfig` definitions), and what Produce and retention read of them, parsed once.

use std::collections::BTreeMap;

use super::segments::LogPolicy;
use crate::KafkaVersion;

/// The least `segment.bytes` Kafka 4.0 and later accept (KIP-1030: 1 MiB).
pub const MIN_SEGMENT_BYTES_4_0: i32 = 1024 * 1024;

/// The topic config that, when set, replaces `segment.bytes` as the size at which a segment
/// rolls (Kafka 4.0 and later, `LogConfig.segmentSize()`); described only when set.
pub const INTERNAL_SEGMENT_BYTES: &str = "internal.segment.bytes";

/// Topic configs kmock knows, with Kafka's defaults. Creating a topic with any other config name
/// is refused with INVALID_CONFIG, as Kafka refuses unknown topic configs.
pub const TOPIC_CONFIG_DEFAULTS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete"),
    ("compression.type", "producer"),
    ("max.message.bytes", "1048588"),
    // One hour: Kafka 4.4 describes this default (source DEFAULT_CONFIG); 3.x had Long.MAX_VALUE
    // (conformance case `describe_configs_every_topic_config`).
    ("message.timestamp.after.max.ms", "3600000"),
    ("message.timestamp.before.max.ms", "9223372036854775807"),
    ("message.timestamp.type", "CreateTime"),
    ("min.insync.replicas", "1"),
    ("retention.bytes", "-1"),
    ("retention.ms", "604800000"),
    ("segment.bytes", "1073741824"),
    ("segment.ms", "604800000"),
];

/// Checks topic configs given at creation or by the config APIs: known names, values of the
/// right type and range (Kafka's `LogConfig` definitions) as release `kafka_version` checks
/// them (`segment.bytes`: at least 14 before Kafka 4.0, at least 1 MiB from 4.0, KIP-1030;
/// [`INTERNAL_SEGMENT_BYTES`] from 4.0 only).
///
/// # Errors
/// A sentence naming the unknown config or bad value (answered as INVALID_CONFIG).
pub fn validate_configs(
    configs: &BTreeMap<String, String>,
    kafka_version: KafkaVersion,
) -> Result<(), String> {
    let segment_bytes_min = if kafka_version >= KafkaVersion::V4_0 {
        MIN_SEGMENT_BYTES_4_0
    } else {
        14
    };
    for (name, value) in configs {
        let at_least = |min: i64| -> Result<(), String> {
            match value.trim().parse::<i64>() {
                Ok(n) if n >= min => Ok(()),
                _ => Err(format!(
                    "{name} must be an integer of at least {min}, not {value:?}"
                )),
            }
        };
        let one_of = |allowed: &[&str]| -> Result<(), String> {
            if allowed.contains(&value.as_str()) {
                Ok(())
            } else {
                Err(format!("{name} must be one of {allowed:?}, not {value:?}"))
            }
        };
        match name.as_str() {
            // A list of `delete` and `compact` (Kafka's `ValidList`): the whole value may be
            // empty, an item may not (`delete,`, `,delete` and `delete,,compact` are refused,
            // as Kafka 4.4.0 refuses them: its LIST parse keeps trailing empty items).
            "cleanup.policy" if value.trim().is_empty() => Ok(()),
            "cleanup.policy" => match value
                .split(',')
                .map(str::trim)
                .find(|p| !matches!(*p, "delete" | "compact"))
            {
                None => Ok(()),
                Some(p) => Err(format!(
                    "{name} is a list of \"delete\" and \"compact\", not {p:?}"
                )),
            },
            "compression.type" => {
                one_of(&["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
            }
            "message.timestamp.type" => one_of(&["CreateTime", "LogAppendTime"]),
            "max.message.bytes" => at_least(0),
            "message.timestamp.after.max.ms" | "message.timestamp.before.max.ms" => at_least(0),
            "min.insync.replicas" => at_least(1),
            // Kafka's `retention.bytes` has no validator: any long, below -1 included.
            "retention.bytes" => at_least(i64::MIN),
            "retention.ms" => at_least(-1),
            // An INT in Kafka: at least 14 (`LegacyRecord.RECORD_OVERHEAD_V0`) before 4.0, 1 MiB
            // from 4.0 (KIP-1030; case `segment_bytes_at_and_below_one_mebibyte`).
            "segment.bytes" => match value.trim().parse::<i32>() {
                Ok(n) if n >= segment_bytes_min => Ok(()),
                _ => Err(format!(
                    "{name} must be an integer of at least {segment_bytes_min} and at most {}, \
                     not {value:?}",
                    i32::MAX
                )),
            },
            "segment.ms" => at_least(1),
            // Kafka 4.x's `LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG` (KIP-1030's way to small
            // segments below `segment.bytes`' 1 MiB): an INT with no range, 0 and negatives
            // included, accepted by CreateTopics and both config APIs (case
            // `internal_segment_bytes`); no such config before 4.0.
            INTERNAL_SEGMENT_BYTES if kafka_version >= KafkaVersion::V4_0 => {
                match value.trim().parse::<i32>() {
                    Ok(_) => Ok(()),
                    Err(_) => Err(format!("{name} must be an integer, not {value:?}")),
                }
            }
            _ => Err(format!("unknown topic config {name:?}")),
        }?;
    }
    Ok(())
}

/// The configs every Produce reads, parsed from their strings once, when the topic's configs
/// are set (at creation and by the config APIs), instead of on every request.
#[derive(Debug, Clone, Copy)]
pub(super) struct ParsedConfigs {
    pub(super) max_message_bytes: usize,
    pub(super) min_insync_replicas: i64,
    pub(super) compacted: bool,
    pub(super) deletes: bool,
    pub(super) log_append_time: bool,
    /// `message.timestamp.before.max.ms` and `message.timestamp.after.max.ms`, `i64::MAX`
    /// when unbounded.
    pub(super) timestamp_bounds_ms: (i64, i64),
    pub(super) log_policy: LogPolicy,
}

impl ParsedConfigs {
    /// Parses the effective values: each override, else Kafka's default. Values were checked
    /// by [`validate_configs`] before the topic was created.
    pub(super) fn parse(configs: &BTreeMap<String, String>) -> Self {
        let config = |name: &str| effective(configs, name);
        let number = |name: &str| {
            config(name)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(0)
        };
        let bound = |name: &str| {
            config(name)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(i64::MAX)
        };
        Self {
            max_message_bytes: usize::try_from(number("max.message.bytes")).unwrap_or(0),
            min_insync_replicas: number("min.insync.replicas"),
            compacted: config("cleanup.policy")
                .is_some_and(|p| p.split(',').any(|x| x.trim() == "compact")),
            deletes: config("cleanup.policy")
                .is_some_and(|p| p.split(',').any(|x| x.trim() == "delete")),
            log_append_time: config("message.timestamp.type") == Some("LogAppendTime"),
            timestamp_bounds_ms: (
                bound("message.timestamp.before.max.ms"),
                bound("message.timestamp.after.max.ms"),
            ),
            log_policy: LogPolicy {
                // `internal.segment.bytes` when set, as Kafka's `LogConfig.segmentSize()`.
                segment_bytes: match configs.get(INTERNAL_SEGMENT_BYTES) {
                    Some(v) => v.trim().parse::<i64>().unwrap_or(0),
                    None => number("segment.bytes"),
                },
                segment_ms: number("segment.ms"),
                retention_bytes: number("retention.bytes"),
                retention_ms: number("retention.ms"),
                delete: config("cleanup.policy")
                    .is_some_and(|p| p.split(',').any(|x| x.trim() == "delete")),
            },
        }
    }
}

/// The effective value of config `name` among `configs`: the override, else Kafka's default.
pub(super) fn effective<'a>(configs: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    configs.get(name).map(String::as_str).or_else(|| {
        TOPIC_CONFIG_DEFAULTS
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    })
}
