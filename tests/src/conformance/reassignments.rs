//! AlterPartitionReassignments and ListPartitionReassignments on the one-node broker: a move to
//! the replicas a partition has, every refusal (empty list, a broker twice, an unknown broker,
//! an unknown topic and partition, a cancel with nothing in progress) at each version, and the
//! list of reassignments in progress (none: a move to the same replicas completes at once).

use anyhow::Result;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ListPartitionReassignmentsRequest,
};
use kmock_client::Client;

use super::{case, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[case!(partition_reassignments_on_one_node)];

/// One partition's move: (topic full name, partition, new replicas or null to cancel).
pub(super) type Move<'a> = (&'a str, i32, Option<&'a [i32]>);

/// AlterPartitionReassignments at `version` of `moves`, one topic entry each: the top-level
/// answer, then `  NAME/P: ERROR` per partition.
pub(super) async fn alter(
    cx: &Ctx,
    client: &Client,
    version: i16,
    allow_change: bool,
    moves: &[Move<'_>],
) -> Result<Lines> {
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_allow_replication_factor_change(allow_change)
        .with_topics(
            moves
                .iter()
                .map(|(t, p, replicas)| {
                    ReassignableTopic::default()
                        .with_name(name(t))
                        .with_partitions(vec![ReassignablePartition::default()
                            .with_partition_index(*p)
                            .with_replicas(
                                replicas.map(|r| r.iter().map(|b| BrokerId(*b)).collect()),
                            )])
                })
                .collect(),
        );
    let answer = client.send(request, version).await?;
    let mut lines = vec![format!(
        "alter v{version} allow {allow_change}: {} allow {}",
        err(answer.error_code),
        answer.allow_replication_factor_change
    )];
    for t in &answer.responses {
        for p in &t.partitions {
            lines.push(format!(
                "  {}/{}: {}",
                cx.short(&t.name.0),
                p.partition_index,
                err(p.error_code)
            ));
        }
    }
    Ok(lines)
}

/// ListPartitionReassignments of `asked` (or all): the top-level error and the reassignments of
/// this case's topics.
pub(super) async fn list(
    cx: &Ctx,
    client: &Client,
    asked: Option<&[(&str, &[i32])]>,
) -> Result<Lines> {
    let request = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(asked.map(|topics| {
            topics
                .iter()
                .map(|(t, ps)| {
                    ListPartitionReassignmentsTopics::default()
                        .with_name(name(t))
                        .with_partition_indexes(ps.to_vec())
                })
                .collect()
        }));
    let answer = client.send(request, 0).await?;
    let mut lines = vec![format!(
        "list {}: {}",
        if asked.is_some() { "named" } else { "all" },
        err(answer.error_code)
    )];
    for t in answer
        .topics
        .iter()
        .filter(|t| cx.short(&t.name.0) != t.name.0.as_str())
    {
        lines.push(format!(
            "  {}: {} partitions",
            cx.short(&t.name.0),
            t.partitions.len()
        ));
    }
    Ok(lines)
}

async fn partition_reassignments_on_one_node(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let t = cx.create(&client, "t", 2, &[]).await?;
    let t = t.as_str();
    let unknown = cx.topic("unknown");
    let mut lines = Vec::new();
    for version in 0..=1 {
        let moves: &[Move] = &[
            (t, 0, Some(&[1])),
            (t, 1, Some(&[])),
            (t, 1, Some(&[1, 1])),
            (t, 1, Some(&[7])),
            (t, 5, Some(&[1])),
            (&unknown, 0, Some(&[1])),
            (t, 1, None),
        ];
        // v0 has no `allow_replication_factor_change`: its default, true, is what v0 means.
        lines.extend(alter(&cx, &client, version, version == 0, moves).await?);
    }
    lines.extend(alter(&cx, &client, 1, false, &[(t, 0, Some(&[1]))]).await?);
    lines.extend(list(&cx, &client, None).await?);
    lines.extend(list(&cx, &client, Some(&[(t, &[0, 1, 5]), (&unknown, &[0])])).await?);
    Ok(lines)
}
