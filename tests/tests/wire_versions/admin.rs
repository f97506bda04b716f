//! The admin APIs of `wire_versions` that change or describe logs, configs and partitions:
//! DeleteRecords moves `t`-0's log start offset one further at each version (the partition led
//! elsewhere is refused); AlterConfigs and IncrementalAlterConfigs set `t`'s `retention.ms` to
//! a value of their own at each version, which DescribeConfigs then shows;
//! DescribeTopicPartitions pages through every topic one partition at a time; ElectLeaders
//! moves `t`-1's leader back to its preferred replica after the test moved it away, and
//! DescribeLogDirs lists broker 1's replicas of `t`; AlterPartitionReassignments swaps the order
//! of `t`-1's replicas and back (its leader stays), which Metadata shows, and
//! ListPartitionReassignments lists nothing in progress.

use anyhow::{anyhow, Result};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    alter_configs_request, incremental_alter_configs_request, AlterConfigsRequest,
    AlterPartitionReassignmentsRequest, ApiKey, BrokerId, DeleteRecordsRequest,
    DescribeConfigsRequest, DescribeLogDirsRequest, DescribeTopicPartitionsRequest,
    ElectLeadersRequest, IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest,
};

use super::{partition_codes, Fixture, LED_ELSEWHERE, LED_HERE};
use crate::common::{code_is, name, same, text};

/// The APIs [`check`] knows.
pub const APIS: &[ApiKey] = &[
    ApiKey::DeleteRecords,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeTopicPartitions,
    ApiKey::ElectLeaders,
    ApiKey::DescribeLogDirs,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
];

/// Checks the answer of `api` at `v`.
pub async fn check(f: &Fixture, api: ApiKey, v: i16) -> Result<()> {
    match api {
        ApiKey::DeleteRecords => {
            // Version v deletes before offset v + 1 of the records every Produce version wrote.
            let offset = i64::from(v) + 1;
            let request = DeleteRecordsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(vec![DeleteRecordsTopic::default()
                    .with_name(name("t"))
                    .with_partitions(
                        [LED_HERE, LED_ELSEWHERE]
                            .map(|p| {
                                DeleteRecordsPartition::default()
                                    .with_partition_index(p)
                                    .with_offset(offset)
                            })
                            .to_vec(),
                    )]);
            let answer = f.broker().await?.send(request, v).await?;
            let partitions = &answer.topics[0].partitions;
            partition_codes(
                "DeleteRecords",
                partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code))
                    .collect(),
            )?;
            let low: Vec<i64> = partitions.iter().map(|p| p.low_watermark).collect();
            same("low watermarks", low, vec![offset, -1])?;
        }
        ApiKey::AlterConfigs => {
            let value = format!("{}", 1000 + i32::from(v));
            let request = AlterConfigsRequest::default().with_resources(vec![
                alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(text("t"))
                    .with_configs(vec![alter_configs_request::AlterableConfig::default()
                        .with_name(text("retention.ms"))
                        .with_value(Some(text(&value)))]),
            ]);
            let answer = f.broker().await?.send(request, v).await?;
            code_is("AlterConfigs", answer.responses[0].error_code, None)?;
            same("retention.ms", retention_ms(f).await?, value)?;
        }
        ApiKey::IncrementalAlterConfigs => {
            let value = format!("{}", 2000 + i32::from(v));
            let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(text("t"))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(text("retention.ms"))
                            .with_config_operation(0)
                            .with_value(Some(text(&value))),
                    ]),
            ]);
            let answer = f.broker().await?.send(request, v).await?;
            code_is(
                "IncrementalAlterConfigs",
                answer.responses[0].error_code,
                None,
            )?;
            same("retention.ms", retention_ms(f).await?, value)?;
        }
        ApiKey::DescribeTopicPartitions => {
            // Every topic, one partition a page: each partition once, in name order.
            let client = f.broker().await?;
            let mut cursor: Option<Cursor> = None;
            let mut seen = Vec::new();
            loop {
                let request = DescribeTopicPartitionsRequest::default()
                    .with_response_partition_limit(1)
                    .with_cursor(cursor.take());
                let answer = client.send(request, v).await?;
                for t in &answer.topics {
                    code_is("DescribeTopicPartitions", t.error_code, None)?;
                    let topic = t.name.as_ref().map_or("", |n| n.0.as_str()).to_owned();
                    seen.extend(
                        t.partitions
                            .iter()
                            .map(|p| (topic.clone(), p.partition_index)),
                    );
                }
                match answer.next_cursor {
                    Some(next) => {
                        cursor = Some(
                            Cursor::default()
                                .with_topic_name(next.topic_name)
                                .with_partition_index(next.partition_index),
                        )
                    }
                    None => break,
                }
                if seen.len() > 100 {
                    return Err(anyhow!("paging does not end: {seen:?}"));
                }
            }
            let mut expected = seen.clone();
            expected.sort();
            expected.dedup();
            same("partitions paged through", seen.clone(), expected)?;
            same(
                "t's partitions",
                seen.iter().filter(|(t, _)| t == "t").count(),
                2,
            )?;
            let named = client
                .send(
                    DescribeTopicPartitionsRequest::default()
                        .with_topics(vec![TopicRequest::default().with_name(name("t"))])
                        .with_response_partition_limit(10),
                    v,
                )
                .await?;
            let leaders: Vec<i32> = named.topics[0]
                .partitions
                .iter()
                .map(|p| p.leader_id.0)
                .collect();
            same("t's leaders", leaders, vec![1, 2])?;
        }
        ApiKey::ElectLeaders => {
            f.cluster.move_leader("t", LED_ELSEWHERE, 1)?;
            let request = ElectLeadersRequest::default()
                .with_timeout_ms(30_000)
                .with_topic_partitions(Some(vec![TopicPartitions::default()
                    .with_topic(name("t"))
                    .with_partitions(vec![LED_HERE, LED_ELSEWHERE])]));
            let answer = f.broker().await?.send(request, v).await?;
            code_is("ElectLeaders", answer.error_code, None)?;
            let codes: Vec<(i32, i16)> = answer.replica_election_results[0]
                .partition_result
                .iter()
                .map(|p| (p.partition_id, p.error_code))
                .collect();
            same(
                "elections",
                codes,
                vec![
                    (
                        LED_HERE,
                        kafka_protocol::ResponseError::ElectionNotNeeded.code(),
                    ),
                    (LED_ELSEWHERE, 0),
                ],
            )?;
            same(
                "t-1's leader",
                f.cluster.leader("t", LED_ELSEWHERE),
                Some(2),
            )?;
        }
        ApiKey::DescribeLogDirs => {
            let request = DescribeLogDirsRequest::default().with_topics(Some(vec![
                DescribableLogDirTopic::default()
                    .with_topic(name("t"))
                    .with_partitions(vec![LED_HERE, LED_ELSEWHERE]),
            ]));
            let answer = f.broker().await?.send(request, v).await?;
            code_is("DescribeLogDirs", answer.error_code, None)?;
            same("log dirs", answer.results.len(), 1)?;
            let t = &answer.results[0].topics;
            same("topics", t.len(), 1)?;
            let sizes: Vec<(i32, bool)> = t[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.partition_size > 0))
                .collect();
            // t-0 holds every Produce version's record; t-1 nothing.
            same(
                "replicas and sizes",
                sizes,
                vec![(LED_HERE, true), (LED_ELSEWHERE, false)],
            )?;
        }
        ApiKey::AlterPartitionReassignments => {
            let client = f.broker().await?;
            for order in [[1, 2], [2, 1]] {
                let request = AlterPartitionReassignmentsRequest::default()
                    .with_timeout_ms(30_000)
                    .with_topics(vec![ReassignableTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            ReassignablePartition::default()
                                .with_partition_index(LED_ELSEWHERE)
                                .with_replicas(Some(order.map(BrokerId).to_vec())),
                            ReassignablePartition::default()
                                .with_partition_index(5)
                                .with_replicas(Some(vec![BrokerId(1)])),
                        ])]);
                let answer = client.send(request, v).await?;
                code_is("AlterPartitionReassignments", answer.error_code, None)?;
                let codes: Vec<(i32, i16)> = answer.responses[0]
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code))
                    .collect();
                same(
                    "reassignments",
                    codes,
                    vec![
                        (LED_ELSEWHERE, 0),
                        (
                            5,
                            kafka_protocol::ResponseError::UnknownTopicOrPartition.code(),
                        ),
                    ],
                )?;
                let metadata = client.metadata(Some(&["t"])).await?;
                let p = &metadata.topics[0].partitions[LED_ELSEWHERE as usize];
                let replicas: Vec<i32> = p.replica_nodes.iter().map(|b| b.0).collect();
                same("t-1's replicas", replicas, order.to_vec())?;
                same("t-1's leader", p.leader_id.0, 2)?;
            }
        }
        ApiKey::ListPartitionReassignments => {
            let answer = f
                .broker()
                .await?
                .send(ListPartitionReassignmentsRequest::default(), v)
                .await?;
            code_is("ListPartitionReassignments", answer.error_code, None)?;
            same("reassignments in progress", answer.topics.len(), 0)?;
        }
        _ => return Err(anyhow!("advertised but unknown to this test")),
    }
    Ok(())
}

/// `t`'s `retention.ms`, as DescribeConfigs answers it.
async fn retention_ms(f: &Fixture) -> Result<String> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("t"))
            .with_configuration_keys(Some(vec![text("retention.ms")]))]);
    let answer = f.broker().await?.send(request, 4).await?;
    let config = answer.results[0]
        .configs
        .first()
        .ok_or(anyhow!("no retention.ms described"))?;
    Ok(config.value.as_deref().unwrap_or("null").to_owned())
}
