//! IncrementalAlterConfigs and AlterConfigs: each operation on a topic's configs and what
//! DescribeConfigs shows after it, `validate_only`, the configs a Produce obeys from the next
//! request, and the errors in the order Kafka checks them. Broker resources only with
//! `validate_only`, so that the real broker's configs stay as they are for later cases.

use anyhow::Result;
use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource, AlterableConfig as LegacyConfig,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource as IncrementalResource, AlterableConfig,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterConfigsRequest, IncrementalAlterConfigsRequest, ProduceRequest,
};
use kmock_client::Client;

use super::batches::{record_at, v2};
use super::configs::{describe, BROKER, TOPIC};
use super::{case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(incremental_alter_configs_operations),
    case!(incremental_alter_configs_errors),
    case!(incremental_alter_configs_take_effect),
    case!(alter_configs_replaces_every_config),
];

pub(super) const SET: i8 = 0;
pub(super) const DELETE: i8 = 1;
pub(super) const APPEND: i8 = 2;
pub(super) const SUBTRACT: i8 = 3;

/// A resource's operations: (key, operation, value).
pub(super) type Ops<'a> = &'a [(&'a str, i8, Option<&'a str>)];

/// A resource of an IncrementalAlterConfigs: (type, name, operations).
pub(super) type Resource<'a> = (i8, &'a str, Ops<'a>);

/// IncrementalAlterConfigs at `version`: one line per resource answer, `  TYPE NAME: ERROR`.
pub(super) async fn incremental(
    cx: &Ctx,
    client: &Client,
    version: i16,
    validate_only: bool,
    resources: &[Resource<'_>],
) -> Result<Lines> {
    let request = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(
            resources
                .iter()
                .map(|(kind, name, configs)| {
                    IncrementalResource::default()
                        .with_resource_type(*kind)
                        .with_resource_name(text(name))
                        .with_configs(
                            configs
                                .iter()
                                .map(|(k, op, v)| {
                                    AlterableConfig::default()
                                        .with_name(text(k))
                                        .with_config_operation(*op)
                                        .with_value(v.map(text))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let answer = client.send(request, version).await?;
    let mut lines = vec![format!(
        "incremental v{version}{}:",
        if validate_only { " validate only" } else { "" }
    )];
    lines.extend(answer.responses.iter().map(|r| {
        format!(
            "  {} {:?}: {}",
            r.resource_type,
            cx.short(&r.resource_name),
            err(r.error_code)
        )
    }));
    Ok(lines)
}

/// AlterConfigs at `version` of one resource: `legacy vV: TYPE NAME: ERROR`.
pub(super) async fn legacy(
    cx: &Ctx,
    client: &Client,
    version: i16,
    validate_only: bool,
    (kind, resource, configs): (i8, &str, &[(&str, Option<&str>)]),
) -> Result<Lines> {
    let request = AlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(text(resource))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        LegacyConfig::default()
                            .with_name(text(k))
                            .with_value(v.map(text))
                    })
                    .collect(),
            )]);
    let answer = client.send(request, version).await?;
    Ok(answer
        .responses
        .iter()
        .map(|r| {
            format!(
                "legacy v{version}{} {} {:?}: {}",
                if validate_only { " validate only" } else { "" },
                r.resource_type,
                cx.short(&r.resource_name),
                err(r.error_code)
            )
        })
        .collect())
}

const KEYS: &[&str] = &["cleanup.policy", "retention.ms", "max.message.bytes"];

/// SET, APPEND and SUBTRACT on the list config `cleanup.policy` (APPEND to an unset one starts
/// from its default), DELETE, a `validate_only` SET that changes nothing, and what
/// DescribeConfigs shows after each.
async fn incremental_alter_configs_operations(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let t = full.as_str();
    let steps: &[(i16, bool, Ops)] = &[
        (0, false, &[("cleanup.policy", APPEND, Some("compact"))]),
        (1, false, &[("cleanup.policy", SUBTRACT, Some("delete"))]),
        (
            1,
            false,
            &[
                ("retention.ms", SET, Some("1000")),
                ("cleanup.policy", SUBTRACT, Some("compact")),
            ],
        ),
        (
            1,
            false,
            &[("cleanup.policy", APPEND, Some("delete,compact"))],
        ),
        (1, true, &[("max.message.bytes", SET, Some("100"))]),
        (
            0,
            false,
            &[
                ("retention.ms", DELETE, None),
                ("cleanup.policy", DELETE, None),
            ],
        ),
        (1, false, &[("no.such.config", DELETE, None)]),
    ];
    // What DescribeConfigs shows after each step: (cleanup.policy, retention.ms).
    let after = [
        ("delete,compact", "604800000"),
        ("compact", "604800000"),
        ("", "1000"),
        ("delete,compact", "1000"),
        ("delete,compact", "1000"),
        ("delete", "604800000"),
        ("delete", "604800000"),
    ];
    let mut lines = Vec::new();
    for ((version, validate_only, configs), (policy, retention)) in steps.iter().zip(after) {
        lines.extend(
            incremental(
                &cx,
                &client,
                *version,
                *validate_only,
                &[(TOPIC, t, configs)],
            )
            .await?,
        );
        let expect = [("cleanup.policy", policy), ("retention.ms", retention)];
        lines.extend(settled(&cx, &client, t, &expect).await?);
    }
    Ok(lines)
}

/// DescribeConfigs of [`KEYS`] of topic `t` ([`describe`]'s lines) once it shows every
/// `expect`ed value (or after 100 tries): a Kafka broker answers DescribeConfigs from its
/// metadata, which the controller's change reaches a moment after the answer to the change.
async fn settled(cx: &Ctx, client: &Client, t: &str, expect: &[(&str, &str)]) -> Result<Lines> {
    let mut lines = describe(cx, client, 4, false, &[(TOPIC, t, Some(KEYS))]).await?;
    for _ in 0..100 {
        let shows = |(k, v): &(&str, &str)| {
            let prefix = format!("  {k}={v} ");
            lines.iter().any(|l| l.starts_with(&prefix))
        };
        if expect.iter().all(shows) {
            break;
        }
        // Waiting for the broker's metadata to catch up; nothing on the wire announces it.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        lines = describe(cx, client, 4, false, &[(TOPIC, t, Some(KEYS))]).await?;
    }
    Ok(lines)
}

/// Every refusal, one resource a request, then two resources in one request (the same resource
/// twice, and a good one beside a bad one).
async fn incremental_alter_configs_errors(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let t = full.as_str();
    let unknown = cx.topic("unknown");
    let resources: &[Resource] = &[
        (TOPIC, &unknown, &[("retention.ms", SET, Some("1000"))]),
        (TOPIC, &unknown, &[("retention.ms", SET, Some("soon"))]),
        (TOPIC, t, &[("no.such.config", SET, Some("1"))]),
        (TOPIC, t, &[("retention.ms", SET, Some("soon"))]),
        (TOPIC, t, &[("min.insync.replicas", SET, Some("0"))]),
        (TOPIC, t, &[("retention.ms", APPEND, Some("1"))]),
        (TOPIC, t, &[("cleanup.policy", SET, Some("sometimes"))]),
        (
            TOPIC,
            t,
            &[
                ("retention.ms", SET, Some("1")),
                ("retention.ms", DELETE, None),
            ],
        ),
        (TOPIC, t, &[("retention.ms", SET, None)]),
        (TOPIC, t, &[("retention.ms", 7, Some("1"))]),
        (TOPIC, "", &[("retention.ms", SET, Some("1"))]),
        (TOPIC, "bad/name", &[("retention.ms", SET, Some("1"))]),
        (99, "x", &[("retention.ms", SET, Some("1"))]),
        (BROKER, "7", &[("log.retention.ms", SET, Some("1000"))]),
        (BROKER, "x", &[("log.retention.ms", SET, Some("1000"))]),
        (
            BROKER,
            "1",
            &[("auto.create.topics.enable", SET, Some("false"))],
        ),
        (
            BROKER,
            "",
            &[("default.replication.factor", SET, Some("1"))],
        ),
        (BROKER, "1", &[("log.retention.ms", SET, Some("1000"))]),
        (BROKER, "", &[("log.retention.ms", SET, Some("1000"))]),
    ];
    let mut lines = Vec::new();
    for resource in resources {
        lines.extend(incremental(&cx, &client, 1, true, &[*resource]).await?);
    }
    let set: &[(&str, i8, Option<&str>)] = &[("retention.ms", SET, Some("1000"))];
    lines.extend(incremental(&cx, &client, 1, false, &[(TOPIC, t, set), (TOPIC, t, set)]).await?);
    lines.extend(
        incremental(
            &cx,
            &client,
            1,
            false,
            &[(TOPIC, t, set), (TOPIC, &unknown, set)],
        )
        .await?,
    );
    lines.extend(settled(&cx, &client, t, &[("retention.ms", "1000")]).await?);
    Ok(lines)
}

/// One Produce of one record of 100 bytes of value: `  produce: ERROR log append time set|-1`.
async fn produce(client: &Client, full: &str) -> Result<String> {
    let batch = v2(&[record_at(b"k", &[7; 100], now_ms())])?;
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(full))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch.into()))])]);
    let answer = client.send(request, 9).await?;
    let p = &answer.responses[0].partition_responses[0];
    Ok(format!(
        "  produce: {} log append time {}",
        err(p.error_code),
        if p.log_append_time_ms == -1 {
            "-1"
        } else {
            "set"
        }
    ))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The configs a Produce obeys change with IncrementalAlterConfigs: `max.message.bytes` below
/// the batch, `message.timestamp.type` LogAppendTime, `min.insync.replicas` above the one
/// replica, `cleanup.policy` compact (a keyed record is still fine), each undone by DELETE.
async fn incremental_alter_configs_take_effect(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let t = full.as_str();
    let mut lines = vec![produce(&client, t).await?];
    // (key, value, the Produce answer once it is set, once it is deleted again).
    for (key, value, set, deleted) in [
        (
            "max.message.bytes",
            "100",
            "MessageTooLarge log append time -1",
            "NONE log append time -1",
        ),
        (
            "message.timestamp.type",
            "LogAppendTime",
            "NONE log append time set",
            "NONE log append time -1",
        ),
        (
            "min.insync.replicas",
            "2",
            "NONE log append time -1",
            "NONE log append time -1",
        ),
        (
            "cleanup.policy",
            "compact",
            "NONE log append time -1",
            "NONE log append time -1",
        ),
    ] {
        let ops: Ops = &[(key, SET, Some(value))];
        lines.extend(incremental(&cx, &client, 1, false, &[(TOPIC, t, ops)]).await?);
        lines.push(produce_until(&client, t, set).await?);
        let ops: Ops = &[(key, DELETE, None)];
        lines.extend(incremental(&cx, &client, 1, false, &[(TOPIC, t, ops)]).await?);
        lines.push(produce_until(&client, t, deleted).await?);
    }
    Ok(lines)
}

/// [`produce`] until its answer is `expected` (or 100 tries): Kafka's brokers apply a topic's
/// changed configs when the controller's record reaches them, a moment after the answer to
/// IncrementalAlterConfigs (kmock at once). Returns the last answer.
async fn produce_until(client: &Client, full: &str, expected: &str) -> Result<String> {
    let mut line = produce(client, full).await?;
    for _ in 0..100 {
        if line.ends_with(expected) {
            break;
        }
        // Waiting for the broker to apply the change; nothing on the wire announces it.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        line = produce(client, full).await?;
    }
    Ok(line)
}

/// AlterConfigs sets the configs given and sends every other back to its default; a
/// `validate_only` one changes nothing; an unknown config, a bad value, a null value, an
/// unknown topic, and a static broker config are refused.
async fn alter_configs_replaces_every_config(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx
        .create(
            &client,
            "t",
            1,
            &[("retention.ms", "1000"), ("cleanup.policy", "compact")],
        )
        .await?;
    let t = full.as_str();
    let unknown = cx.topic("unknown");
    let mut lines = Vec::new();
    lines.extend(
        legacy(
            &cx,
            &client,
            0,
            false,
            (TOPIC, t, &[("max.message.bytes", Some("2000"))]),
        )
        .await?,
    );
    let replaced = [
        ("max.message.bytes", "2000"),
        ("retention.ms", "604800000"),
        ("cleanup.policy", "delete"),
    ];
    lines.extend(settled(&cx, &client, t, &replaced).await?);
    lines.extend(
        legacy(
            &cx,
            &client,
            1,
            true,
            (TOPIC, t, &[("retention.ms", Some("5"))]),
        )
        .await?,
    );
    lines.extend(settled(&cx, &client, t, &replaced).await?);
    lines.extend(legacy(&cx, &client, 2, false, (TOPIC, t, &[])).await?);
    let defaults = [("max.message.bytes", "1048588")];
    lines.extend(settled(&cx, &client, t, &defaults).await?);
    for (kind, resource, configs) in [
        (TOPIC, t, &[("no.such.config", Some("1"))][..]),
        (TOPIC, t, &[("retention.ms", Some("soon"))][..]),
        (TOPIC, t, &[("retention.ms", None)][..]),
        (TOPIC, unknown.as_str(), &[("retention.ms", Some("1"))][..]),
        (
            BROKER,
            "1",
            &[("auto.create.topics.enable", Some("false"))][..],
        ),
        (BROKER, "7", &[("log.retention.ms", Some("1"))][..]),
    ] {
        lines.extend(legacy(&cx, &client, 2, true, (kind, resource, configs)).await?);
    }
    Ok(lines)
}
