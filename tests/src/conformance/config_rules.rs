//! Config rules that depend on the release or live in Kafka's controller: `segment.bytes`
//! at and below 1 MiB (KIP-1030's minimum from 4.0) through CreateTopics,
//! IncrementalAlterConfigs and AlterConfigs; and the cluster-level `min.insync.replicas` that
//! a 4.1+ cluster with Eligible Leader Replicas stores and the config APIs may not remove,
//! which is why an AlterConfigs of the cluster level is refused unless it names that key,
//! with the Eligible Leader Replicas feature finalized; `internal.segment.bytes`, the topic
//! config that still reaches small segments from 4.0.
//! Broker changes are all `validate_only`, so the real broker stays as it was.

use anyhow::Result;
use kafka_protocol::messages::ApiVersionsRequest;

use super::alter_configs::{incremental, legacy, DELETE, SET};
use super::config_edges::each;
use super::configs::{describe, BROKER, TOPIC};
use super::{case, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(segment_bytes_at_and_below_one_mebibyte),
    case!(alter_configs_cluster_level_min_insync_replicas),
    case!(eligible_leader_replicas_from_4_1),
    case!(internal_segment_bytes),
];

/// The least `segment.bytes` of Kafka 4.x, and one below it.
const AT: &str = "1048576";
const BELOW: &str = "1048575";

/// CreateTopics with `segment.bytes` of 1 MiB, one byte less and 14 (3.x's minimum); then,
/// on a topic, IncrementalAlterConfigs v1 and AlterConfigs v2 (`validate_only`) of each.
async fn segment_bytes_at_and_below_one_mebibyte(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for (topic, value) in [("at", AT), ("below", BELOW), ("fourteen", "14")] {
        let created = cx
            .try_create(&client, topic, 1, &[("segment.bytes", value)])
            .await?;
        lines.push(format!(
            "create segment.bytes={value}: {}",
            created.err().unwrap_or_else(|| "NONE".to_owned())
        ));
    }
    let full = cx.create(&client, "t", 1, &[]).await?;
    for value in [AT, BELOW] {
        lines.push(format!("segment.bytes={value}:"));
        let ops: &[(&str, i8, Option<&str>)] = &[("segment.bytes", SET, Some(value))];
        lines.extend(incremental(&cx, &client, 1, true, &[(TOPIC, &full, ops)]).await?);
        let configs: &[(&str, Option<&str>)] = &[("segment.bytes", Some(value))];
        lines.extend(legacy(&cx, &client, 2, true, (TOPIC, &full, configs)).await?);
    }
    Ok(lines)
}

/// AlterConfigs v2 (`validate_only`) of the cluster level with and without
/// `min.insync.replicas` among its configs, and of broker 1 naming it; IncrementalAlterConfigs
/// v1 (`validate_only`) setting and deleting it at both levels, and `log.cleaner.threads` at
/// the cluster level.
async fn alter_configs_cluster_level_min_insync_replicas(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for (resource, configs) in [
        ("", &[("log.cleaner.threads", Some("2"))][..]),
        ("", &[("message.max.bytes", Some("2000000"))][..]),
        ("", &[][..]),
        (
            "",
            &[
                ("log.cleaner.threads", Some("2")),
                ("min.insync.replicas", Some("1")),
            ][..],
        ),
        ("", &[("min.insync.replicas", Some("1"))][..]),
        ("", &[("log.cleaner.threads", Some("many"))][..]),
        ("1", &[("min.insync.replicas", Some("1"))][..]),
        ("1", &[("log.cleaner.threads", Some("2"))][..]),
    ] {
        let client = cx.connect().await?;
        lines.extend(legacy(&cx, &client, 2, true, (BROKER, resource, configs)).await?);
    }
    let key = "min.insync.replicas";
    for (resource, ops) in [
        ("", &[(key, DELETE, None)][..]),
        ("", &[(key, SET, Some("2"))][..]),
        ("1", &[(key, SET, Some("1"))][..]),
        ("1", &[(key, DELETE, None)][..]),
        ("", &[("log.cleaner.threads", SET, Some("2"))][..]),
    ] {
        lines.extend(each(&cx, BROKER, &[(resource, ops)]).await?);
    }
    Ok(lines)
}

/// ApiVersions v3 and v4: the `eligible.leader.replicas.version` feature finalized and
/// supported; DescribeConfigs v4 of `min.insync.replicas` at the cluster level and of broker 1
/// (the cluster-level value a 4.1+ cluster stores: source DYNAMIC_DEFAULT_BROKER_CONFIG).
async fn eligible_leader_replicas_from_4_1(cx: Ctx) -> Result<Lines> {
    const ELR: &str = "eligible.leader.replicas.version";
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for v in [3, 4] {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(text("kmock-conformance"))
            .with_client_software_version(text("1"));
        let answer = client.send(request, v).await?;
        let finalized = answer
            .finalized_features
            .iter()
            .find(|f| f.name.as_str() == ELR)
            .map_or("none".to_owned(), |f| {
                format!("{}..={}", f.min_version_level, f.max_version_level)
            });
        let supported = answer
            .supported_features
            .iter()
            .find(|f| f.name.as_str() == ELR)
            .map_or("none".to_owned(), |f| {
                format!("{}..={}", f.min_version, f.max_version)
            });
        lines.push(format!(
            "v{v}: {ELR} finalized {finalized}, supported {supported}"
        ));
    }
    let keys: &[&str] = &["min.insync.replicas"];
    let resources = [(BROKER, "", Some(keys)), (BROKER, "1", Some(keys))];
    lines.extend(describe(&cx, &client, 4, false, &resources).await?);
    Ok(lines)
}

/// `internal.segment.bytes` (Kafka 4.x's `LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG`, an INT
/// with no range): CreateTopics with it at 1000, 0, -1, past an INT and not a number;
/// IncrementalAlterConfigs v1 SET and DELETE and AlterConfigs v2 (`validate_only`) of it on a
/// topic; DescribeConfigs v4 of it and `segment.bytes` on a topic created with it and on one
/// without it.
async fn internal_segment_bytes(cx: Ctx) -> Result<Lines> {
    const KEY: &str = "internal.segment.bytes";
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for (topic, value) in [
        ("thousand", "1000"),
        ("zero", "0"),
        ("negative", "-1"),
        ("past-int", "2147483648"),
        ("word", "x"),
    ] {
        let created = cx.try_create(&client, topic, 1, &[(KEY, value)]).await?;
        lines.push(format!(
            "create {KEY}={value}: {}",
            created.err().unwrap_or_else(|| "NONE".to_owned())
        ));
    }
    let full = cx.create(&client, "t", 1, &[]).await?;
    for ops in [
        &[(KEY, SET, Some("2000"))][..],
        &[(KEY, SET, Some("13"))][..],
        &[(KEY, DELETE, None)][..],
    ] {
        lines.extend(incremental(&cx, &client, 1, true, &[(TOPIC, &full, ops)]).await?);
    }
    let configs: &[(&str, Option<&str>)] = &[(KEY, Some("3000"))];
    lines.extend(legacy(&cx, &client, 2, true, (TOPIC, &full, configs)).await?);
    let small = cx.topic("thousand");
    let keys: &[&str] = &[KEY, "segment.bytes"];
    let resources = [
        (TOPIC, small.as_str(), Some(keys)),
        (TOPIC, full.as_str(), Some(keys)),
    ];
    lines.extend(describe(&cx, &client, 4, false, &resources).await?);
    Ok(lines)
}
