//! Cluster-wide admin APIs on one node: ListConfigResources (formerly
//! ListClientMetricsResources) at v0 and with each resource type filter at v1;
//! AlterReplicaLogDirs to the broker's own log directory, to one it does not have, and for
//! unknown and over-long topics; UpdateFeatures that change nothing, that are validated only,
//! and that Kafka refuses.
//!
//! The real broker holds other runs' topics and groups: resources named with another run's id
//! are left out of the lines.

use anyhow::{anyhow, Result};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, DescribeLogDirsRequest, FindCoordinatorRequest, GroupId,
    ListConfigResourcesRequest, OffsetCommitRequest, UpdateFeaturesRequest,
};
use kmock_client::Client;

use super::{case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(list_config_resources_by_type),
    case!(alter_replica_log_dirs_on_one_node),
    case!(update_features_without_a_change),
];

/// Whether a resource or topic name belongs to this case, or is one every run sees alike (a
/// broker id). Other runs' topics are not, nor the internal ones: whether `__consumer_offsets`
/// and `__transaction_state` are there depends on what ran before (kmock lists neither, as its
/// handler's header says).
fn ours(cx: &Ctx, full: &str) -> bool {
    cx.short(full) != full || (!full.is_empty() && full.chars().all(|c| c.is_ascii_digit()))
}

/// Partitions to move: (topic, partitions).
type Moves = Vec<(String, Vec<i32>)>;

/// A group with a committed offset (a simple group, committed from outside any generation).
async fn group_with_an_offset(cx: &Ctx, client: &Client, topic: &str, group: &str) -> Result<()> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(0)])]);
    client
        .send(
            FindCoordinatorRequest::default().with_coordinator_keys(vec![text(group)]),
            4,
        )
        .await?;
    for _ in 0..600 {
        let answer = client.send(request.clone(), 8).await?;
        let code = answer.topics[0].partitions[0].error_code;
        match code {
            0 => return Ok(()),
            // Kafka's coordinator may still be loading `__consumer_offsets`.
            14..=16 => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            _ => return Err(anyhow!("committing for {}: {}", cx.short(group), err(code))),
        }
    }
    Err(anyhow!("no coordinator for {}", cx.short(group)))
}

/// ListConfigResources at v0, and at v1 with no type (the default types) and each type alone
/// and two together: `TYPE NAME` per resource, sorted.
async fn list_config_resources_by_type(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let group = cx.topic("g");
    let coordinator = cx.connect().await?;
    group_with_an_offset(&cx, &coordinator, &topic, &group).await?;
    let mut lines = Vec::new();
    let asked: &[(i16, &[i8])] = &[
        (0, &[]),
        (1, &[]),
        (1, &[2]),
        (1, &[4]),
        (1, &[8]),
        (1, &[16]),
        (1, &[32]),
        (1, &[2, 32]),
        (1, &[0]),
        (1, &[99]),
    ];
    for (version, types) in asked {
        let request = ListConfigResourcesRequest::default().with_resource_types(types.to_vec());
        let answer = client.send(request, *version).await?;
        lines.push(format!("v{version} {types:?}: {}", err(answer.error_code)));
        let mut found: Lines = answer
            .config_resources
            .iter()
            .filter(|r| ours(&cx, r.resource_name.as_str()))
            .map(|r| {
                format!(
                    "  {} {}",
                    r.resource_type,
                    cx.short(r.resource_name.as_str())
                )
            })
            .collect();
        found.sort();
        lines.extend(found);
    }
    Ok(lines)
}

/// AlterReplicaLogDirs v1 and v2: the broker's own log directory (as DescribeLogDirs names
/// it) for a partition it holds, one it does not have and an unknown topic in that directory,
/// a directory the broker does not have, a topic name too long for a future log's directory.
async fn alter_replica_log_dirs_on_one_node(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 2, &[]).await?;
    let dirs = client
        .send(DescribeLogDirsRequest::default().with_topics(None), 4)
        .await?;
    let dir = dirs
        .results
        .first()
        .map(|d| d.log_dir.to_string())
        .ok_or(anyhow!("no log directory described"))?;
    // A 240-character name: its future log's directory name (`<topic>-0.<32 hex>-future`) is
    // past 255 characters.
    let around = cx.topic("").len();
    let long = cx
        .create(&client, &"l".repeat(240 - around), 1, &[])
        .await?;
    let mut lines = Vec::new();
    let asked: Vec<(i16, String, Moves)> = vec![
        (1, dir.clone(), vec![(topic.clone(), vec![0, 1, 2])]),
        (2, dir.clone(), vec![(cx.topic("unknown"), vec![0])]),
        (2, "/no/such/dir".to_owned(), vec![(topic.clone(), vec![0])]),
        (2, "/no/such/dir".to_owned(), vec![(long.clone(), vec![0])]),
        (2, dir.clone(), vec![(long.clone(), vec![0])]),
    ];
    for (version, path, topics) in asked {
        let request =
            AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
                .with_path(text(&path))
                .with_topics(
                    topics
                        .iter()
                        .map(|(t, ps)| {
                            AlterReplicaLogDirTopic::default()
                                .with_name(name(t))
                                .with_partitions(ps.clone())
                        })
                        .collect(),
                )]);
        let answer = client.send(request, version).await?;
        lines.push(format!(
            "v{version} {}:",
            if path == dir {
                "the broker's dir"
            } else {
                path.as_str()
            }
        ));
        let mut found: Lines = answer
            .results
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let short = cx.short(t.topic_name.as_str());
                    let short = if short.len() > 20 {
                        "<long name>"
                    } else {
                        short
                    };
                    format!("  {short}/{}: {}", p.partition_index, err(p.error_code))
                })
            })
            .collect();
        found.sort();
        lines.extend(found);
    }
    Ok(lines)
}

/// UpdateFeatures at each version: `transaction.version` set to the level it has (2) and
/// `metadata.version` to an unknown level, validated only; an unknown feature; a downgrade
/// without the downgrade type, validated only; an empty request.
async fn update_features_without_a_change(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let _ = &cx;
    // v0 says a downgrade with `allow_downgrade`, v1+ with `upgrade_type`; the v0 form is
    // made at sending.
    let update = |feature: &str, level: i16, upgrade_type: i8| {
        FeatureUpdateKey::default()
            .with_feature(text(feature))
            .with_max_version_level(level)
            .with_upgrade_type(upgrade_type)
    };
    let asked: Vec<(i16, bool, Vec<FeatureUpdateKey>)> = vec![
        (0, false, vec![update("transaction.version", 2, 1)]),
        (1, true, vec![update("transaction.version", 2, 1)]),
        (2, true, vec![update("transaction.version", 2, 1)]),
        (1, false, vec![update("transaction.version", 2, 1)]),
        (1, true, vec![update("no.such.feature", 1, 1)]),
        (1, true, vec![update("transaction.version", 1, 1)]),
        (1, true, vec![update("transaction.version", 1, 2)]),
        (1, true, vec![update("transaction.version", 9, 1)]),
        (1, true, vec![update("transaction.version", 2, 7)]),
        (
            1,
            true,
            vec![
                update("transaction.version", 2, 1),
                update("transaction.version", 2, 1),
            ],
        ),
        (2, true, vec![update("no.such.feature", 1, 1)]),
        (1, true, vec![]),
    ];
    let mut lines = Vec::new();
    for (version, validate_only, updates) in asked {
        let said: Vec<String> = updates
            .iter()
            .map(|u| {
                format!(
                    "{}={}/{}",
                    u.feature.as_str(),
                    u.max_version_level,
                    u.upgrade_type
                )
            })
            .collect();
        let updates = updates
            .into_iter()
            .map(|u| match version {
                0 => {
                    let downgrade = u.upgrade_type != 1;
                    u.with_upgrade_type(1).with_allow_downgrade(downgrade)
                }
                _ => u,
            })
            .collect();
        let request = UpdateFeaturesRequest::default()
            .with_timeout_ms(30_000)
            .with_validate_only(validate_only && version > 0)
            .with_feature_updates(updates);
        let answer = client.send(request, version).await?;
        lines.push(format!(
            "v{version}{} [{}]: {} {}",
            if validate_only { " validate" } else { "" },
            said.join(" "),
            err(answer.error_code),
            answer.error_message.as_deref().unwrap_or("null")
        ));
        let mut results: Lines = answer
            .results
            .iter()
            .map(|r| {
                format!(
                    "  {}: {} {}",
                    r.feature.as_str(),
                    err(r.error_code),
                    r.error_message.as_deref().unwrap_or("null")
                )
            })
            .collect();
        results.sort();
        lines.extend(results);
    }
    Ok(lines)
}
