//! One admin request the size of a hostile client cannot hold the cluster's state for minutes:
//! work linear in the request, not quadratic. An IncrementalAlterConfigs APPEND of a million
//! `cleanup.policy` items, a DeleteRecords and an AlterReplicaLogDirs naming a million
//! partitions, and a ListConfigResources naming the topic type a million times are answered as
//! Kafka answers them, and another connection is served meanwhile. Times are printed, never
//! asserted; only a hang fails (the old code took hours for these sizes).

mod common;

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use common::{code_is, name, same, text};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, DeleteRecordsRequest, IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
};
use kafka_protocol::protocol::Request;
use kafka_protocol::ResponseError;
use kmock::Cluster;
use kmock_client::Client;

/// Only catches a hang; no speed is asserted. A handler stuck under the state lock can block
/// both runtime workers (the bystander waits on the lock), so the old code's hang showed as a
/// test that never ends (killed after 8 minutes), not as this guard firing.
const HANG_GUARD: Duration = Duration::from_secs(180);

/// Items or partitions in one hostile request.
const MILLION: usize = 1_000_000;

/// IncrementalAlterConfigs' APPEND operation.
const APPEND: i8 = 2;

/// Sends `request` from client "big" and, once the journal shows it arrived, a Metadata from
/// another connection; the big answer, after printing how long each took.
async fn with_bystander<R>(cluster: &Cluster, request: R, version: i16) -> Result<R::Response>
where
    R: Request + Send + 'static,
    R::Response: Send + 'static,
{
    let addr = cluster.brokers()[0].addr;
    let big = Client::connect_with_client_id(addr, "big").await?;
    let bystander = Client::connect_with_client_id(addr, "bystander").await?;
    let started = Instant::now();
    let big_answer = tokio::spawn(async move { big.send(request, version).await });
    cluster
        .wait_for(|e| e.client_id.as_deref() == Some("big"), HANG_GUARD)
        .await
        .context("the big request never arrived")?;
    let asked = Instant::now();
    let served = tokio::time::timeout(HANG_GUARD, bystander.metadata(Some(&["t"])))
        .await
        .context("the bystander was not served")??;
    code_is("the bystander's topic", served.topics[0].error_code, None)?;
    println!("bystander served in {:?}", asked.elapsed());
    let answer = tokio::time::timeout(HANG_GUARD, big_answer)
        .await
        .context("the big request was not answered")???;
    println!("big request answered in {:?}", started.elapsed());
    Ok(answer)
}

fn append_cleanup_policy(items: String) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(text("t"))
        .with_configs(vec![AlterableConfig::default()
            .with_name(text("cleanup.policy"))
            .with_config_operation(APPEND)
            .with_value(Some(text(&items)))])])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_of_a_million_list_items_is_answered_as_kafka_and_others_are_served() -> Result<()>
{
    let cluster = Cluster::builder().topic("t", 1).start().await?;
    // A million distinct items none of which `cleanup.policy` allows: INVALID_CONFIG.
    let items: Vec<String> = (0..MILLION).map(|i| format!("x{i}")).collect();
    let answer = with_bystander(&cluster, append_cleanup_policy(items.join(",")), 1).await?;
    same("resources answered", answer.responses.len(), 1)?;
    code_is(
        "the distinct invalid items",
        answer.responses[0].error_code,
        Some(ResponseError::InvalidConfig),
    )?;
    // A million times an allowed item, accepted as Kafka does (the list keeps it once).
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let repeated = vec!["compact"; MILLION].join(",");
    let answer = client.send(append_cleanup_policy(repeated), 1).await?;
    code_is(
        "the repeated allowed item",
        answer.responses[0].error_code,
        None,
    )?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_records_naming_a_million_partitions_is_answered_and_others_are_served(
) -> Result<()> {
    let cluster = Cluster::builder().topic("t", 1).start().await?;
    // A million entries naming each of half a million partitions twice: answered once each.
    let distinct = MILLION / 2;
    let partitions = (0..MILLION)
        .map(|i| {
            DeleteRecordsPartition::default()
                .with_partition_index(i32::try_from(i % distinct).expect("small"))
                .with_offset(0)
        })
        .collect();
    let request = DeleteRecordsRequest::default()
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name("t"))
            .with_partitions(partitions)])
        .with_timeout_ms(30_000);
    let answer = with_bystander(&cluster, request, 2).await?;
    same("topics answered", answer.topics.len(), 1)?;
    let answered = &answer.topics[0].partitions;
    same("partitions answered", answered.len(), distinct)?;
    same(
        "the first partition's index",
        answered[0].partition_index,
        0,
    )?;
    code_is("partition 0", answered[0].error_code, None)?;
    same("partition 0's low watermark", answered[0].low_watermark, 0)?;
    for (i, p) in answered.iter().enumerate().skip(1) {
        same("a partition's index", p.partition_index as usize, i)?;
        code_is(
            &format!("partition {i}"),
            p.error_code,
            Some(ResponseError::UnknownTopicOrPartition),
        )?;
    }
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alter_replica_log_dirs_naming_a_million_partitions_is_answered_and_others_are_served(
) -> Result<()> {
    let cluster = Cluster::builder().topic("t", 1).start().await?;
    // Half a million partitions named in a directory the broker lacks, then each again in its
    // one directory: the last directory wins, so each is answered once, for broker 1's.
    let distinct = i32::try_from(MILLION / 2).expect("small");
    let dir = |path: &str| {
        AlterReplicaLogDir::default()
            .with_path(text(path))
            .with_topics(vec![AlterReplicaLogDirTopic::default()
                .with_name(name("t"))
                .with_partitions((0..distinct).collect())])
    };
    let own = format!("/kmock/broker-{}/data", cluster.brokers()[0].node_id);
    let request =
        AlterReplicaLogDirsRequest::default().with_dirs(vec![dir("/elsewhere"), dir(&own)]);
    let answer = with_bystander(&cluster, request, 2).await?;
    same("topics answered", answer.results.len(), 1)?;
    let answered = &answer.results[0].partitions;
    same("partitions answered", answered.len(), MILLION / 2)?;
    code_is("partition 0", answered[0].error_code, None)?;
    for (i, p) in answered.iter().enumerate() {
        same("a partition's index", p.partition_index as usize, i)?;
        if i > 0 {
            code_is(
                &format!("partition {i}"),
                p.error_code,
                Some(ResponseError::UnknownTopicOrPartition),
            )?;
        }
    }
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_config_resources_naming_a_type_a_million_times_lists_it_once() -> Result<()> {
    const TOPIC: i8 = 2;
    const BROKER: i8 = 4;
    const BROKER_LOGGER: i8 = 8;
    let cluster = Cluster::builder()
        .topic("a", 1)
        .topic("b", 1)
        .topic("t", 1)
        .start()
        .await?;
    let node = cluster.brokers()[0].node_id.to_string();
    let listed = |answer: &kafka_protocol::messages::ListConfigResourcesResponse| {
        let mut listed: Vec<(i8, String)> = answer
            .config_resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.to_string()))
            .collect();
        listed.sort();
        listed
    };
    let repeated = ListConfigResourcesRequest::default().with_resource_types(vec![TOPIC; MILLION]);
    let answer = with_bystander(&cluster, repeated, 1).await?;
    code_is("the repeated type", answer.error_code, None)?;
    same(
        "topics listed",
        listed(&answer),
        ["a", "b", "t"].map(|t| (TOPIC, t.to_owned())).to_vec(),
    )?;
    // Types named twice and out of order: each type once, as Kafka's set of types.
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let mixed = ListConfigResourcesRequest::default().with_resource_types(vec![
        BROKER_LOGGER,
        TOPIC,
        BROKER,
        TOPIC,
        BROKER_LOGGER,
    ]);
    let answer = client.send(mixed, 1).await?;
    code_is("the mixed types", answer.error_code, None)?;
    let mut expected: Vec<(i8, String)> = ["a", "b", "t"].map(|t| (TOPIC, t.to_owned())).to_vec();
    expected.push((BROKER, node.clone()));
    expected.push((BROKER_LOGGER, node));
    same("resources listed", listed(&answer), expected)?;
    cluster.shutdown().await;
    Ok(())
}
