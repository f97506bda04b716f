//! Config rules that changed between Kafka releases, on a cluster emulating each release:
//! `segment.bytes`' 1 MiB floor from 4.0 (KIP-1030) and its escape hatch
//! `internal.segment.bytes` (the segments it cuts: `retention.rs`); from 4.1, Eligible Leader Replicas (KIP-966, on in a new cluster):
//! the feature finalized in ApiVersions, the cluster-level `min.insync.replicas` stored
//! (described as DYNAMIC_DEFAULT_BROKER_CONFIG) and the config APIs' refusals to remove it or
//! to touch a broker-level one. Kafka 4.4.0's answers: the conformance cases of
//! `tests/src/conformance/config_rules.rs`.

mod common;

use anyhow::Result;
use common::{code_is, emulating, name, same, text};
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request as incremental;
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiVersionsRequest, CreateTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
};
use kafka_protocol::ResponseError;
use kmock::Cluster;
use kmock_client::Client;

/// Resource types TOPIC and BROKER.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// IncrementalAlterConfigs' operations SET and DELETE.
const SET: i8 = 0;
const DELETE: i8 = 1;
/// Config sources DYNAMIC_DEFAULT_BROKER_CONFIG and STATIC_BROKER_CONFIG.
const DYNAMIC_DEFAULT_BROKER: i8 = 3;
const STATIC_BROKER: i8 = 4;

/// CreateTopics (`validate_only`) of a topic with config `key` of `value`: its error.
async fn create_with(client: &Client, key: &str, value: &str) -> Result<i16> {
    let request = CreateTopicsRequest::default()
        .with_validate_only(true)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name("segments"))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(text(key))
                .with_value(Some(text(value)))])]);
    Ok(client.send(request, 7).await?.topics[0].error_code)
}

/// AlterConfigs v2 (`validate_only`) of one resource: its error.
async fn legacy_alter(
    client: &Client,
    kind: i8,
    resource: &str,
    configs: &[(&str, &str)],
) -> Result<i16> {
    let request = AlterConfigsRequest::default()
        .with_validate_only(true)
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(text(resource))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        AlterableConfig::default()
                            .with_name(text(k))
                            .with_value(Some(text(v)))
                    })
                    .collect(),
            )]);
    Ok(client.send(request, 2).await?.responses[0].error_code)
}

/// IncrementalAlterConfigs v1 (`validate_only`) of one config of one resource: its error.
async fn incremental_alter(
    client: &Client,
    (kind, resource): (i8, &str),
    key: &str,
    operation: i8,
    value: Option<&str>,
) -> Result<i16> {
    let request = IncrementalAlterConfigsRequest::default()
        .with_validate_only(true)
        .with_resources(vec![incremental::AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(text(resource))
            .with_configs(vec![incremental::AlterableConfig::default()
                .with_name(text(key))
                .with_config_operation(operation)
                .with_value(value.map(text))])]);
    Ok(client.send(request, 1).await?.responses[0].error_code)
}

/// DescribeConfigs v4 of one resource, every config: `(name, value, source)` of each.
async fn describe(client: &Client, kind: i8, resource: &str) -> Result<Vec<(String, String, i8)>> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(text(resource))
            .with_configuration_keys(None)]);
    let answer = client.send(request, 4).await?;
    let result = &answer.results[0];
    code_is(
        &format!("DescribeConfigs {kind} {resource:?}"),
        result.error_code,
        None,
    )?;
    Ok(result
        .configs
        .iter()
        .map(|c| {
            let value = c.value.as_ref().map_or("null", |v| v.as_str());
            (c.name.to_string(), value.to_owned(), c.config_source)
        })
        .collect())
}

/// `segment.bytes` is at least 14 before 4.0 and 1 MiB from 4.0 (KIP-1030), at creation and
/// through AlterConfigs; the conformance case `segment_bytes_at_and_below_one_mebibyte` shows
/// Kafka 4.4's answers.
#[tokio::test]
async fn segment_bytes_is_at_least_14_before_4_0_and_one_mebibyte_from_4_0() -> Result<()> {
    let invalid = Some(ResponseError::InvalidConfig);
    for (version, accepted, refused) in [
        ("3.9", ["14", "1048575"], ["13", "0"]),
        ("4.0", ["1048576", "1073741824"], ["1048575", "14"]),
        ("4.4", ["1048576", "1073741824"], ["1048575", "14"]),
    ] {
        let cluster = Cluster::builder()
            .kafka_version(version.parse()?)
            .topic("t", 1)
            .start()
            .await?;
        let client = Client::connect(cluster.brokers()[0].addr).await?;
        for (values, expected) in [(accepted, None), (refused, invalid)] {
            for value in values {
                let what = format!("{version}: segment.bytes={value}");
                let created = create_with(&client, "segment.bytes", value).await?;
                code_is(&format!("{what} at creation"), created, expected)?;
                let altered =
                    legacy_alter(&client, TOPIC, "t", &[("segment.bytes", value)]).await?;
                code_is(&format!("{what} by AlterConfigs"), altered, expected)?;
            }
        }
    }
    Ok(())
}

/// From 4.1 a new cluster has Eligible Leader Replicas and a cluster-level
/// `min.insync.replicas` that AlterConfigs of the cluster level must name (else
/// INVALID_CONFIG); 4.0 has neither. 4.1 is the first release with the rule.
#[tokio::test]
async fn cluster_level_alter_configs_must_name_min_insync_replicas_from_4_1() -> Result<()> {
    let cleaner = [("log.cleaner.threads", "2")];
    let with_min_isr = [("log.cleaner.threads", "2"), ("min.insync.replicas", "1")];
    let invalid = Some(ResponseError::InvalidConfig);
    for (version, without) in [("4.0", None), ("4.1", invalid), ("4.4", invalid)] {
        let (_cluster, client) = emulating(version).await?;
        let answer = legacy_alter(&client, BROKER, "", &cleaner).await?;
        code_is(
            &format!("{version}: without min.insync.replicas"),
            answer,
            without,
        )?;
        let answer = legacy_alter(&client, BROKER, "", &with_min_isr).await?;
        code_is(
            &format!("{version}: with min.insync.replicas"),
            answer,
            None,
        )?;
    }
    Ok(())
}

/// Emulating 4.1: IncrementalAlterConfigs of broker 1's `min.insync.replicas` (SET, or DELETE
/// of a value it does not have) and the DELETE of the cluster-level one are INVALID_CONFIG,
/// a SET of the cluster-level one is accepted; 4.0 accepts all four (case
/// `alter_configs_cluster_level_min_insync_replicas` for Kafka 4.4.0's answers).
#[tokio::test]
async fn min_insync_replicas_of_a_broker_or_its_removal_is_refused_from_4_1() -> Result<()> {
    let key = "min.insync.replicas";
    let invalid = Some(ResponseError::InvalidConfig);
    for (version, refused) in [("4.0", None), ("4.1", invalid)] {
        let (_cluster, client) = emulating(version).await?;
        for (resource, operation, value, expected) in [
            ("1", SET, Some("1"), refused),
            ("1", DELETE, None, refused),
            ("", DELETE, None, refused),
            ("", SET, Some("2"), None),
        ] {
            let answer =
                incremental_alter(&client, (BROKER, resource), key, operation, value).await?;
            let what = format!("{version}: operation {operation} of {resource:?}'s {key}");
            code_is(&what, answer, expected)?;
        }
    }
    Ok(())
}

/// From 4.1 the cluster-level `min.insync.replicas` is stored: DescribeConfigs of the cluster
/// level and of broker 1 give it with source DYNAMIC_DEFAULT_BROKER_CONFIG, as Kafka 4.4.0
/// does, at start and after a reset; before, the static value (STATIC_BROKER_CONFIG).
#[tokio::test]
async fn min_insync_replicas_is_a_dynamic_cluster_default_from_4_1() -> Result<()> {
    for (version, source) in [
        ("4.0", STATIC_BROKER),
        ("4.1", DYNAMIC_DEFAULT_BROKER),
        ("4.4", DYNAMIC_DEFAULT_BROKER),
    ] {
        let (cluster, client) = emulating(version).await?;
        // Once as started, once after a reset (which starts from a fresh state).
        for (resource, reset) in [("", false), ("1", false), ("", true), ("1", true)] {
            if reset {
                cluster.reset();
            }
            let configs = describe(&client, BROKER, resource).await?;
            let min_isr: Vec<_> = configs
                .into_iter()
                .filter(|(k, _, _)| k == "min.insync.replicas")
                .collect();
            same(
                &format!("{version}: min.insync.replicas of {resource:?}, reset {reset}"),
                min_isr,
                vec![("min.insync.replicas".to_owned(), "1".to_owned(), source)],
            )?;
        }
    }
    Ok(())
}

/// A client that reads the cluster level's dynamic configs and writes them back with
/// AlterConfigs (its replace semantics) is accepted from 4.1: what it read includes the stored
/// `min.insync.replicas`.
#[tokio::test]
async fn cluster_level_configs_read_and_written_back_are_accepted_at_4_1() -> Result<()> {
    let (_cluster, client) = emulating("4.1").await?;
    let configs = describe(&client, BROKER, "").await?;
    let dynamic: Vec<(&str, &str)> = configs
        .iter()
        .filter(|(_, _, source)| *source == DYNAMIC_DEFAULT_BROKER)
        .map(|(k, v, _)| (k.as_str(), v.as_str()))
        .collect();
    same(
        "the cluster level's dynamic configs",
        dynamic.clone(),
        vec![("min.insync.replicas", "1")],
    )?;
    let answer = legacy_alter(&client, BROKER, "", &dynamic).await?;
    code_is("AlterConfigs of what was read", answer, None)
}

/// From 4.1 ApiVersions finalizes `eligible.leader.replicas.version` at 1 and (v4, whose
/// supported features keep those with a lowest level of 0) supports 0..=1, as Kafka 4.4.0;
/// 4.0 lists no such feature.
#[tokio::test]
async fn eligible_leader_replicas_feature_is_finalized_from_4_1() -> Result<()> {
    const ELR: &str = "eligible.leader.replicas.version";
    for (version, v3, v4) in [
        ("4.0", (None, None), (None, None)),
        ("4.1", (Some((1, 1)), None), (Some((1, 1)), Some((0, 1)))),
        ("4.4", (Some((1, 1)), None), (Some((1, 1)), Some((0, 1)))),
    ] {
        let (_cluster, client) = emulating(version).await?;
        for (v, expected) in [(3, v3), (4, v4)] {
            let request = ApiVersionsRequest::default()
                .with_client_software_name(text("kmock-tests"))
                .with_client_software_version(text("1"));
            let answer = client.send(request, v).await?;
            code_is(
                &format!("{version}: ApiVersions v{v}"),
                answer.error_code,
                None,
            )?;
            let finalized = answer
                .finalized_features
                .iter()
                .find(|f| f.name.as_str() == ELR)
                .map(|f| (f.min_version_level, f.max_version_level));
            let supported = answer
                .supported_features
                .iter()
                .find(|f| f.name.as_str() == ELR)
                .map(|f| (f.min_version, f.max_version));
            same(
                &format!("{version}: v{v} {ELR} (finalized, supported)"),
                (finalized, supported),
                expected,
            )?;
        }
    }
    Ok(())
}

/// `internal.segment.bytes` (KIP-1030's way to segments below 1 MiB) is a topic config from
/// 4.0, any INT (0 and negatives included) at creation and through IncrementalAlterConfigs,
/// as Kafka 4.4.0 answers (case `internal_segment_bytes`); 3.9 does not know it.
#[tokio::test]
async fn internal_segment_bytes_is_a_topic_config_from_4_0() -> Result<()> {
    const KEY: &str = "internal.segment.bytes";
    let invalid = Some(ResponseError::InvalidConfig);
    for (version, known) in [("3.9", invalid), ("4.0", None), ("4.4", None)] {
        let cluster = Cluster::builder()
            .kafka_version(version.parse()?)
            .topic("t", 1)
            .start()
            .await?;
        let client = Client::connect(cluster.brokers()[0].addr).await?;
        for (value, expected) in [("1000", known), ("0", known), ("-1", known), ("x", invalid)] {
            let what = format!("{version}: {KEY}={value}");
            let created = create_with(&client, KEY, value).await?;
            code_is(&format!("{what} at creation"), created, expected)?;
            let altered = incremental_alter(&client, (TOPIC, "t"), KEY, SET, Some(value)).await?;
            code_is(
                &format!("{what} by IncrementalAlterConfigs"),
                altered,
                expected,
            )?;
        }
    }
    Ok(())
}
