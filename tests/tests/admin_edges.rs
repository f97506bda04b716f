//! Edges of the admin and log APIs where kmock answers as Kafka 4.4.0 answered the conformance
//! cases (`kmock_tests::conformance`), over real sockets: requests whose timeout has passed
//! change nothing, an election type no version defines, DescribeCluster's endpoint type, an
//! isolation level no version defines, and ApiVersions v5 naming a cluster and a node.

mod common;

use anyhow::Result;
use common::{code_is, same, start, text};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError::*;
use kmock::Cluster;
use kmock_client::Client;

#[tokio::test]
async fn a_timeout_of_zero_or_less_times_out_and_changes_nothing() -> Result<()> {
    let (_cluster, client) = start(1, &["t"], 1).await?;
    for timeout in [0, -1] {
        let create = CreateTopicsRequest::default()
            .with_timeout_ms(timeout)
            .with_topics(vec![CreatableTopic::default()
                .with_name(common::name("new"))
                .with_num_partitions(1)
                .with_replication_factor(1)]);
        let answer = client.send(create, 7).await?;
        code_is(
            "CreateTopics",
            answer.topics[0].error_code,
            Some(RequestTimedOut),
        )?;
        let grow = CreatePartitionsRequest::default()
            .with_timeout_ms(timeout)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(common::name("t"))
                .with_count(2)]);
        let answer = client.send(grow, 3).await?;
        code_is(
            "CreatePartitions",
            answer.results[0].error_code,
            Some(RequestTimedOut),
        )?;
        let delete = DeleteTopicsRequest::default()
            .with_timeout_ms(timeout)
            .with_topics(vec![
                DeleteTopicState::default().with_name(Some(common::name("t")))
            ]);
        let answer = client.send(delete, 6).await?;
        code_is(
            "DeleteTopics",
            answer.responses[0].error_code,
            Some(RequestTimedOut),
        )?;
    }
    let metadata = client.metadata(Some(&["new", "t"])).await?;
    let seen: Vec<(i16, usize)> = metadata
        .topics
        .iter()
        .map(|t| (t.error_code, t.partitions.len()))
        .collect();
    same(
        "topics after",
        seen,
        vec![(UnknownTopicOrPartition.code(), 0), (0, 1)],
    )
}

#[tokio::test]
async fn an_election_type_no_version_defines_is_an_invalid_request() -> Result<()> {
    let (_cluster, client) = start(1, &["t"], 1).await?;
    for (version, kind) in [(1, 2), (2, -1)] {
        let request = ElectLeadersRequest::default()
            .with_election_type(kind)
            .with_timeout_ms(30_000)
            .with_topic_partitions(Some(vec![TopicPartitions::default()
                .with_topic(common::name("t"))
                .with_partitions(vec![0])]));
        let answer = client.send(request, version).await?;
        code_is("top level", answer.error_code, Some(InvalidRequest))?;
        let partition = &answer.replica_election_results[0].partition_result[0];
        code_is("partition 0", partition.error_code, Some(InvalidRequest))?;
    }
    let every = ElectLeadersRequest::default().with_election_type(2);
    let answer = client.send(every, 2).await?;
    code_is("every partition", answer.error_code, Some(InvalidRequest))?;
    same("results", answer.replica_election_results.len(), 0)
}

#[tokio::test]
async fn describe_cluster_answers_the_listeners_endpoint_type_whatever_was_asked() -> Result<()> {
    let (_cluster, client) = start(1, &[], 1).await?;
    for (kind, error) in [
        (1, None),
        (2, Some(MismatchedEndpointType)),
        (3, Some(UnsupportedEndpointType)),
    ] {
        let answer = client
            .send(
                DescribeClusterRequest::default().with_endpoint_type(kind),
                1,
            )
            .await?;
        code_is(&format!("endpoint type {kind}"), answer.error_code, error)?;
        same("endpoint type answered", answer.endpoint_type, 1)?;
    }
    Ok(())
}

#[tokio::test]
async fn an_isolation_level_no_version_defines_is_an_unknown_server_error() -> Result<()> {
    let (_cluster, client) = start(1, &["t"], 1).await?;
    let fetch = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_bytes(1 << 20)
        .with_isolation_level(2)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(common::name("t"))
            .with_partitions(vec![
                FetchPartition::default().with_partition_max_bytes(1 << 20)
            ])]);
    let answer = client.send(fetch, 12).await?;
    code_is("Fetch", answer.error_code, Some(UnknownServerError))?;
    let p = &answer.responses[0].partitions[0];
    code_is("Fetch partition", p.error_code, Some(UnknownServerError))?;
    same("high watermark", p.high_watermark, -1)?;
    let list = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_isolation_level(2)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(common::name("t"))
            .with_partitions(vec![
                ListOffsetsPartition::default().with_timestamp(-1)
            ])]);
    let answer = client.send(list, 9).await?;
    let p = &answer.topics[0].partitions[0];
    code_is(
        "ListOffsets partition",
        p.error_code,
        Some(UnknownServerError),
    )?;
    same("offset", p.offset, -1)
}

#[tokio::test]
async fn api_versions_v5_checks_the_cluster_and_node_it_names() -> Result<()> {
    let cluster = Cluster::builder().cluster_id("edges").start().await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let ask = |cluster: Option<&str>, node: i32| {
        ApiVersionsRequest::default()
            .with_client_software_name(text("kmock-tests"))
            .with_client_software_version(text("1"))
            .with_cluster_id(cluster.map(text))
            .with_node_id(node)
    };
    for (cluster, node, error) in [
        (None, -1, None),
        (Some("edges"), 1, None),
        (Some("edges"), 2, Some(RebootstrapRequired)),
        (Some("other"), 1, Some(RebootstrapRequired)),
        (Some("edges"), -1, Some(InvalidRequest)),
        (None, 1, Some(InvalidRequest)),
    ] {
        let answer = client.send(ask(cluster, node), 5).await?;
        let what = format!("cluster {cluster:?} node {node}");
        code_is(&what, answer.error_code, error)?;
        same(&what, answer.api_keys.is_empty(), error.is_some())?;
    }
    Ok(())
}
