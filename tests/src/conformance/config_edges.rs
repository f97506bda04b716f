//! The config APIs at their edges: IncrementalAlterConfigs on broker resources (cluster-level
//! defaults of per-broker-only configs, read-only and unknown configs, a resource named twice,
//! broker loggers), APPEND and SUBTRACT where they change nothing, AlterConfigs of a resource
//! named twice and of broker loggers, and DescribeConfigs' documentation, types, broker keys and
//! broker loggers. Every broker change is `validate_only`, so the real broker stays as it is
//! for later cases.

use anyhow::Result;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;

use super::alter_configs::{incremental, legacy, Ops, APPEND, DELETE, SET, SUBTRACT};
use super::configs::{describe, BROKER, TOPIC};
use super::{answered, case, err, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(incremental_alter_configs_per_broker_configs_at_cluster_level),
    case!(incremental_alter_configs_read_only_broker_configs),
    case!(incremental_alter_configs_unknown_broker_configs),
    case!(incremental_alter_configs_dynamic_broker_configs),
    case!(incremental_alter_configs_broker_named_twice),
    case!(incremental_alter_configs_list_items_that_are_empty),
    case!(
        incremental_alter_configs_broker_loggers,
        "kmock has no broker loggers: every change is INVALID_REQUEST, where Kafka answers \
         INVALID_CONFIG for a logger it does not have; as strict"
    ),
    case!(incremental_alter_configs_append_and_subtract_that_change_nothing),
    case!(incremental_alter_configs_empty_lists),
    case!(incremental_alter_configs_topic_values),
    // No case names a topic twice in one AlterConfigs: Kafka 4.4 never answers that request
    // (an IllegalStateException "Duplicate key" building the answer, and again building the
    // error answer: seen for 240 s), and a case cannot tell "no answer" from "slow"; kmock
    // answers INVALID_REQUEST for both (the handler's header).
    case!(alter_configs_broker_resources),
    case!(alter_configs_at_each_version),
    case!(
        describe_configs_documentation_and_types,
        "kmock gives no config types and no documentation, and lists 10 of Kafka's topic \
         configs; not more lenient, it says less"
    ),
    case!(
        describe_configs_broker_keys,
        "kmock describes a few broker configs (not broker.id or log.cleaner.threads), says \
         auto.create.topics.enable is not read-only (it still refuses to change it), and lists \
         its defaults for the cluster level, where Kafka lists only dynamic cluster defaults; \
         not more lenient"
    ),
    case!(
        describe_configs_broker_loggers,
        "kmock has no broker loggers: DescribeConfigs of them is INVALID_REQUEST; stricter"
    ),
];

/// Resource type of the broker loggers (Kafka's `ConfigResource.Type.BROKER_LOGGER`).
const BROKER_LOGGER: i8 = 8;

/// Each (resource name, operations) as its own `validate_only` IncrementalAlterConfigs v1 of a
/// resource of `kind`.
pub(super) async fn each(cx: &Ctx, kind: i8, resources: &[(&str, Ops<'_>)]) -> Result<Lines> {
    let mut lines = Vec::new();
    for (resource, ops) in resources {
        let client = cx.connect().await?;
        lines.extend(incremental(cx, &client, 1, true, &[(kind, resource, ops)]).await?);
    }
    Ok(lines)
}

/// Configs only a broker's own resource may set, at the cluster level (`""`) and on broker 1.
async fn incremental_alter_configs_per_broker_configs_at_cluster_level(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for key in [
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "ssl.keystore.location",
        "listener.name.plaintext.ssl.keystore.location",
    ] {
        let ops: Ops = &[(key, SET, Some("x"))];
        lines.push(format!("{key}:"));
        lines.extend(each(&cx, BROKER, &[("", ops), ("1", ops)]).await?);
    }
    Ok(lines)
}

async fn incremental_alter_configs_read_only_broker_configs(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for (key, value) in [
        ("broker.id", "2"),
        ("node.id", "2"),
        ("log.dirs", "/tmp/x"),
        ("process.roles", "broker"),
        ("auto.create.topics.enable", "false"),
    ] {
        let ops: Ops = &[(key, SET, Some(value))];
        lines.push(format!("{key}:"));
        lines.extend(each(&cx, BROKER, &[("1", ops), ("", ops)]).await?);
    }
    Ok(lines)
}

async fn incremental_alter_configs_unknown_broker_configs(cx: Ctx) -> Result<Lines> {
    let set: Ops = &[("no.such.config", SET, Some("1"))];
    let delete: Ops = &[("no.such.config", DELETE, None)];
    each(
        &cx,
        BROKER,
        &[("1", set), ("", set), ("1", delete), ("", delete)],
    )
    .await
}

/// Dynamic broker configs, per broker and cluster-wide, with good and bad values.
async fn incremental_alter_configs_dynamic_broker_configs(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for (key, value) in [
        ("log.cleaner.threads", "2"),
        ("log.cleaner.threads", "many"),
        ("message.max.bytes", "2000000"),
        ("message.max.bytes", "-1"),
        ("log.retention.ms", "1000"),
        ("num.io.threads", "4"),
    ] {
        let ops: Ops = &[(key, SET, Some(value))];
        lines.push(format!("{key}={value}:"));
        lines.extend(each(&cx, BROKER, &[("1", ops), ("", ops)]).await?);
    }
    Ok(lines)
}

/// A list config set, appended to and subtracted from with empty items (before, between and
/// after commas), each change applied, then the value DescribeConfigs shows.
async fn incremental_alter_configs_list_items_that_are_empty(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let t = full.as_str();
    let keys: &[&str] = &["cleanup.policy"];
    let mut lines = Vec::new();
    for (op, value) in [
        (SET, "delete,"),
        (SET, "delete,,compact"),
        (SET, ",delete"),
        (SET, "delete"),
        (APPEND, "compact,"),
        (APPEND, ","),
        (APPEND, ",delete"),
        (SUBTRACT, "compact,"),
        (SUBTRACT, ","),
        (SUBTRACT, ""),
    ] {
        lines.push(format!("op {op} {value:?}:"));
        let ops: Ops = &[("cleanup.policy", op, Some(value))];
        lines.extend(incremental(&cx, &client, 1, false, &[(TOPIC, t, ops)]).await?);
        lines.extend(describe(&cx, &client, 4, false, &[(TOPIC, t, Some(keys))]).await?);
    }
    Ok(lines)
}

/// Broker 1 and the cluster level, each named twice in one request.
async fn incremental_alter_configs_broker_named_twice(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let ops: Ops = &[("log.cleaner.threads", SET, Some("2"))];
    let mut lines = incremental(
        &cx,
        &client,
        1,
        true,
        &[(BROKER, "1", ops), (BROKER, "1", ops)],
    )
    .await?;
    let client = cx.connect().await?;
    lines.extend(
        incremental(
            &cx,
            &client,
            1,
            true,
            &[(BROKER, "", ops), (BROKER, "", ops)],
        )
        .await?,
    );
    Ok(lines)
}

/// Broker loggers: a level set and deleted, an unknown level, APPEND, another broker, a name
/// that is not a broker id.
async fn incremental_alter_configs_broker_loggers(cx: Ctx) -> Result<Lines> {
    let logger = "kafka.server.KafkaApis";
    each(
        &cx,
        BROKER_LOGGER,
        &[
            ("1", &[(logger, SET, Some("DEBUG"))]),
            ("1", &[(logger, SET, Some("LOUD"))]),
            ("1", &[(logger, DELETE, None)]),
            ("1", &[(logger, APPEND, Some("DEBUG"))]),
            ("1", &[("root", DELETE, None)]),
            ("7", &[(logger, SET, Some("DEBUG"))]),
            ("x", &[(logger, SET, Some("DEBUG"))]),
            ("", &[(logger, SET, Some("DEBUG"))]),
        ],
    )
    .await
}

/// APPEND of a value the list has, SUBTRACT of one it has not, SUBTRACT on a config that is not
/// a list, APPEND with a null value, and what DescribeConfigs shows after.
async fn incremental_alter_configs_append_and_subtract_that_change_nothing(
    cx: Ctx,
) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let t = full.as_str();
    let mut lines = Vec::new();
    for ops in [
        &[("cleanup.policy", APPEND, Some("delete"))][..],
        &[("cleanup.policy", SUBTRACT, Some("compact"))][..],
        &[("retention.ms", SUBTRACT, Some("1"))][..],
        &[("cleanup.policy", APPEND, None)][..],
        &[("cleanup.policy", SUBTRACT, None)][..],
        &[("cleanup.policy", APPEND, Some(""))][..],
    ] {
        lines.extend(incremental(&cx, &client, 1, false, &[(TOPIC, t, ops)]).await?);
    }
    let keys: &[&str] = &["cleanup.policy"];
    lines.extend(describe(&cx, &client, 4, false, &[(TOPIC, t, Some(keys))]).await?);
    Ok(lines)
}

/// Values of topic configs, each alone, `validate_only`: in range, out of range, of the wrong
/// type, and configs Kafka 4.x added.
async fn incremental_alter_configs_topic_values(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for (key, value) in [
        ("min.insync.replicas", "2"),
        ("retention.bytes", "-2"),
        ("retention.ms", "-1"),
        ("segment.ms", "0"),
        ("message.timestamp.before.max.ms", "-1"),
        ("message.timestamp.after.max.ms", "1000"),
        ("message.timestamp.type", "logappendtime"),
        ("compression.type", "ZSTD"),
        ("unclean.leader.election.enable", "yes"),
        ("min.cleanable.dirty.ratio", "1.5"),
    ] {
        let ops: Ops = &[(key, SET, Some(value))];
        lines.push(format!("{key}={value}:"));
        lines.extend(incremental(&cx, &client, 1, true, &[(TOPIC, &full, ops)]).await?);
    }
    Ok(lines)
}

/// No resources at all, and a topic resource with no configs.
async fn incremental_alter_configs_empty_lists(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = incremental(&cx, &client, 1, false, &[]).await?;
    lines.extend(incremental(&cx, &client, 1, false, &[(TOPIC, &full, &[])]).await?);
    lines.extend(incremental(&cx, &client, 0, true, &[(BROKER, "1", &[])]).await?);
    Ok(lines)
}

/// AlterConfigs (validate only) of broker 1, the cluster level, and broker loggers. (The
/// cluster level's other configs: `alter_configs_cluster_level_min_insync_replicas`.)
async fn alter_configs_broker_resources(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for (kind, resource, configs) in [
        (BROKER, "1", &[("log.cleaner.threads", Some("2"))][..]),
        (BROKER, "1", &[("listeners", Some("x"))][..]),
        (BROKER, "", &[("listeners", Some("x"))][..]),
        (BROKER, "1", &[("no.such.config", Some("1"))][..]),
        (BROKER, "1", &[][..]),
        (
            BROKER_LOGGER,
            "1",
            &[("kafka.server.KafkaApis", Some("DEBUG"))][..],
        ),
    ] {
        let client = cx.connect().await?;
        lines.extend(legacy(&cx, &client, 2, true, (kind, resource, configs)).await?);
    }
    Ok(lines)
}

/// AlterConfigs of a topic at v0, v1 and v2, then the value DescribeConfigs shows.
async fn alter_configs_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for version in 0..=2 {
        let value = format!("{}000", version + 1);
        let configs: &[(&str, Option<&str>)] = &[("retention.ms", Some(&value))];
        lines.extend(legacy(&cx, &client, version, true, (TOPIC, &full, configs)).await?);
    }
    let keys: &[&str] = &["retention.ms"];
    lines.extend(describe(&cx, &client, 4, false, &[(TOPIC, &full, Some(keys))]).await?);
    Ok(lines)
}

/// DescribeConfigs v3 and v4 with `include_documentation` and without: whether each config
/// has documentation, and its type.
async fn describe_configs_documentation_and_types(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let keys = [
        "retention.ms",
        "cleanup.policy",
        "max.message.bytes",
        "message.timestamp.type",
        "unclean.leader.election.enable",
        "min.cleanable.dirty.ratio",
    ];
    let mut lines = Vec::new();
    for (version, documentation) in [(3, true), (4, false), (4, true)] {
        let request = DescribeConfigsRequest::default()
            .with_include_documentation(documentation)
            .with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(TOPIC)
                .with_resource_name(text(&full))
                .with_configuration_keys(Some(keys.iter().map(|k| text(k)).collect()))]);
        let answer = client.send(request, version).await?;
        lines.push(format!("v{version} documentation {documentation}:"));
        for r in &answer.results {
            let mut configs: Vec<_> = r.configs.iter().collect();
            configs.sort_by(|a, b| a.name.cmp(&b.name));
            lines.push(format!("  {}", err(r.error_code)));
            lines.extend(configs.iter().map(|c| {
                format!(
                    "  {}: type {} documentation {}",
                    c.name.as_str(),
                    c.config_type,
                    if c.documentation.as_deref().is_some_and(|d| !d.is_empty()) {
                        "yes"
                    } else {
                        "no"
                    }
                )
            }));
        }
    }
    Ok(lines)
}

/// Broker 1's keys (not their values or sources, which are the fixture's): read-only and
/// sensitive flags, and the cluster level's error.
async fn describe_configs_broker_keys(cx: Ctx) -> Result<Lines> {
    let keys = [
        "broker.id",
        "log.cleaner.threads",
        "message.max.bytes",
        "auto.create.topics.enable",
        "no.such.config",
    ];
    let mut lines = Vec::new();
    for resource in ["1", ""] {
        let client = cx.connect().await?;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(BROKER)
                .with_resource_name(text(resource))
                .with_configuration_keys(Some(keys.iter().map(|k| text(k)).collect())),
        ]);
        let Some(answer) = answered(client.send(request, 4).await)? else {
            lines.push(format!("broker {resource:?}: connection closed"));
            continue;
        };
        for r in &answer.results {
            lines.push(format!("broker {resource:?}: {}", err(r.error_code)));
            let mut configs: Vec<_> = r.configs.iter().collect();
            configs.sort_by(|a, b| a.name.cmp(&b.name));
            lines.extend(configs.iter().map(|c| {
                format!(
                    "  {} read-only {} sensitive {}",
                    c.name.as_str(),
                    c.read_only,
                    c.is_sensitive
                )
            }));
        }
    }
    Ok(lines)
}

/// Broker loggers of broker 1 (one logger asked), of another broker and of a name that is not
/// a broker id: the error, and whether the logger is listed.
async fn describe_configs_broker_loggers(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for resource in ["1", "7", "x"] {
        let client = cx.connect().await?;
        let keys: &[&str] = &["root"];
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(BROKER_LOGGER)
                .with_resource_name(text(resource))
                .with_configuration_keys(Some(keys.iter().map(|k| text(k)).collect())),
        ]);
        let Some(answer) = answered(client.send(request, 4).await)? else {
            lines.push(format!("logger {resource:?}: connection closed"));
            continue;
        };
        for r in &answer.results {
            lines.push(format!(
                "logger {resource:?}: {} {} configs",
                err(r.error_code),
                r.configs.len()
            ));
        }
    }
    Ok(lines)
}
