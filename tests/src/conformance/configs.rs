//! DescribeConfigs: a topic's chosen keys (set and default), keys no broker knows, unknown and
//! invalid resources (topic, broker, resource type), the internal `__consumer_offsets`, and the
//! versions that add synonyms and documentation.

use anyhow::Result;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kmock_client::Client;

use super::{answered, case, err, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(describe_configs_topic_keys_set_and_default),
    case!(describe_configs_unknown_key),
    case!(
        describe_configs_every_topic_config,
        "kmock knows 11 of Kafka 4.4's topic configs (those it acts on or clients read) and \
         lists only those; stricter: CreateTopics refuses the others with INVALID_CONFIG"
    ),
    case!(describe_configs_unknown_and_invalid_topics),
    case!(describe_configs_unknown_resource_type),
    case!(describe_configs_other_broker),
    case!(
        describe_configs_synonyms,
        "kmock fills in no synonyms: a client sees each config's own source only"
    ),
    case!(describe_configs_same_resource_twice),
];

/// Resource types of DescribeConfigs (Kafka's `ConfigResource.Type`).
pub(super) const TOPIC: i8 = 2;
pub(super) const BROKER: i8 = 4;

/// DescribeConfigs at `version` of (type, name, keys) resources: per resource `TYPE NAME:
/// ERROR`, then per config `  key=value source S read-only R sensitive Z`, configs sorted by
/// key (and with synonyms `    synonym key=value source S`).
pub(super) async fn describe(
    cx: &Ctx,
    client: &Client,
    version: i16,
    synonyms: bool,
    resources: &[(i8, &str, Option<&[&str]>)],
) -> Result<Lines> {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(synonyms)
        .with_resources(
            resources
                .iter()
                .map(|(kind, name, keys)| {
                    DescribeConfigsResource::default()
                        .with_resource_type(*kind)
                        .with_resource_name(text(name))
                        .with_configuration_keys(
                            keys.map(|ks| ks.iter().map(|k| text(k)).collect()),
                        )
                })
                .collect(),
        );
    let Some(answer) = answered(client.send(request, version).await)? else {
        return Ok(vec![format!("v{version}: connection closed")]);
    };
    let mut lines = Vec::new();
    for r in &answer.results {
        lines.push(format!(
            "v{version} {} {:?}: {}",
            r.resource_type,
            cx.short(&r.resource_name),
            err(r.error_code)
        ));
        let mut configs: Vec<_> = r.configs.iter().collect();
        configs.sort_by(|a, b| a.name.cmp(&b.name));
        for c in configs {
            lines.push(format!(
                "  {}={} source {} read-only {} sensitive {}",
                c.name.as_str(),
                c.value.as_deref().unwrap_or("null"),
                c.config_source,
                c.read_only,
                c.is_sensitive
            ));
            for s in &c.synonyms {
                lines.push(format!(
                    "    synonym {}={} source {}",
                    s.name.as_str(),
                    s.value.as_deref().unwrap_or("null"),
                    s.source
                ));
            }
        }
    }
    Ok(lines)
}

/// Keys set on the topic and left at their defaults, at every version. (Not
/// `min.insync.replicas`: the launcher sets it in `server.properties`, so Kafka's source is
/// STATIC_BROKER_CONFIG there, a fact of the fixture rather than of Kafka.)
async fn describe_configs_topic_keys_set_and_default(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx
        .create(
            &client,
            "t",
            1,
            &[("retention.ms", "1000"), ("cleanup.policy", "compact")],
        )
        .await?;
    let keys: &[&str] = &[
        "retention.ms",
        "cleanup.policy",
        "max.message.bytes",
        "message.timestamp.type",
        "compression.type",
    ];
    let mut lines = Vec::new();
    for version in 1..=4 {
        lines.extend(describe(&cx, &client, version, false, &[(TOPIC, &full, Some(keys))]).await?);
    }
    Ok(lines)
}

async fn describe_configs_unknown_key(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    describe(
        &cx,
        &client,
        4,
        false,
        &[(TOPIC, &full, Some(&["no.such.config", "retention.ms"]))],
    )
    .await
}

/// An empty key list means every config, as a null one does.
async fn describe_configs_every_topic_config(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    describe(&cx, &client, 4, false, &[(TOPIC, &full, Some(&[]))]).await
}

async fn describe_configs_unknown_and_invalid_topics(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let keys: &[&str] = &["retention.ms"];
    let nobody = cx.topic("nobody");
    let mut lines = Vec::new();
    for topic in [nobody.as_str(), "", "bad/name"] {
        let client = cx.connect().await?;
        lines.extend(describe(&cx, &client, 4, false, &[(TOPIC, topic, Some(keys))]).await?);
    }
    drop(client);
    Ok(lines)
}

async fn describe_configs_unknown_resource_type(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for kind in [0, 1, 3, 99] {
        let client = cx.connect().await?;
        lines.extend(describe(&cx, &client, 4, false, &[(kind, "x", None)]).await?);
    }
    Ok(lines)
}

async fn describe_configs_other_broker(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for broker in ["7", "x", "-1"] {
        let client = cx.connect().await?;
        lines.extend(
            describe(
                &cx,
                &client,
                4,
                false,
                &[(BROKER, broker, Some(&["num.network.threads"]))],
            )
            .await?,
        );
    }
    Ok(lines)
}

async fn describe_configs_synonyms(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx
        .create(&client, "t", 1, &[("retention.ms", "1000")])
        .await?;
    describe(
        &cx,
        &client,
        4,
        true,
        &[(TOPIC, &full, Some(&["retention.ms", "cleanup.policy"]))],
    )
    .await
}

async fn describe_configs_same_resource_twice(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let keys: &[&str] = &["retention.ms"];
    describe(
        &cx,
        &client,
        4,
        false,
        &[(TOPIC, &full, Some(keys)), (TOPIC, &full, Some(keys))],
    )
    .await
}
