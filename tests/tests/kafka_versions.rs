//! `kafka_version`: a cluster emulating an older Kafka advertises the versions that release's
//! broker advertised (the tables `fixtures/kafka/api-versions/derive.sh` takes from each
//! release's kafka-clients jar), closes the connection of a request past them as that broker
//! does, and keeps the behaviours of that release that clients depend on (the config checks
//! that changed between releases: `config_by_release.rs`).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{ensure, Result};
use bytes::Buf;
use common::{code_is, emulating, name, same, text};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest, GroupId, ListOffsetsRequest, MetadataRequest,
};
use kafka_protocol::protocol::Decodable;
use kafka_protocol::ResponseError;
use kmock::{Cluster, KafkaVersion, TransactionVersion};
use kmock_client::{record, Client};

/// Generous: only catches a connection kmock failed to close.
const HANG_GUARD: Duration = Duration::from_secs(30);

/// ApiVersions v3's list as `api key -> (min, max)`.
async fn advertised(client: &Client) -> Result<BTreeMap<i16, (i16, i16)>> {
    let answer = client.api_versions().await?;
    code_is("ApiVersions", answer.error_code, None)?;
    Ok(answer
        .api_keys
        .iter()
        .map(|k| (k.api_key, (k.min_version, k.max_version)))
        .collect())
}

/// `(api, lowest, highest)` of each API checked.
type Ranges = &'static [(ApiKey, i16, i16)];

#[tokio::test]
async fn each_release_advertises_its_own_highest_versions() -> Result<()> {
    // (release, [(api, min, max)]): values read off each release's own ApiVersions list
    // (broker/src/versions/tables.rs), within what kmock implements (Produce from v3, Fetch
    // from v4, ListOffsets from v0 before 4.0, OffsetCommit and CreateTopics from v2, ...).
    use ApiKey::*;
    let expected: &[(&str, Ranges)] = &[
        (
            "2.8",
            &[
                (Produce, 3, 9),
                (Fetch, 4, 12),
                (ListOffsets, 0, 6),
                (Metadata, 0, 11),
                (OffsetCommit, 2, 8),
                (OffsetFetch, 1, 7),
                (FindCoordinator, 0, 3),
                (JoinGroup, 0, 7),
                (ApiVersions, 0, 3),
                (InitProducerId, 0, 4),
                (EndTxn, 0, 3),
                (DescribeCluster, 0, 0),
            ],
        ),
        (
            "3.0",
            &[(Produce, 3, 9), (ListOffsets, 0, 7), (Metadata, 0, 11)],
        ),
        (
            "3.6",
            &[(Fetch, 4, 15), (ListOffsets, 0, 8), (OffsetFetch, 1, 8)],
        ),
        (
            "3.9",
            &[
                (Produce, 3, 11),
                (Fetch, 4, 17),
                (ListOffsets, 0, 9),
                (ApiVersions, 0, 4),
                (ConsumerGroupHeartbeat, 0, 0),
                (ConsumerGroupDescribe, 0, 0),
            ],
        ),
        (
            "4.0",
            &[
                (Produce, 3, 12),
                (ListOffsets, 1, 10),
                (EndTxn, 0, 5),
                (ConsumerGroupHeartbeat, 0, 1),
            ],
        ),
    ];
    for (version, apis) in expected {
        let (_cluster, client) = emulating(version).await?;
        let listed = advertised(&client).await?;
        for (api, min, max) in *apis {
            same(
                &format!("Kafka {version}: {api:?}"),
                listed.get(&(*api as i16)).copied(),
                Some((*min, *max)),
            )?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn apis_a_release_did_not_have_are_not_advertised() -> Result<()> {
    use ApiKey::*;
    for (version, absent) in [
        (
            "2.4",
            &[DescribeCluster, DescribeProducers, DescribeTransactions][..],
        ),
        (
            "2.8",
            &[
                DescribeTransactions,
                ListTransactions,
                ConsumerGroupHeartbeat,
            ],
        ),
        ("3.6", &[ConsumerGroupHeartbeat, ConsumerGroupDescribe]),
    ] {
        let (_cluster, client) = emulating(version).await?;
        let listed = advertised(&client).await?;
        for api in absent {
            ensure!(
                !listed.contains_key(&(*api as i16)),
                "Kafka {version} did not have {api:?}, yet it is listed: {:?}",
                listed.get(&(*api as i16))
            );
        }
    }
    // The default, 4.4, lists all of them.
    let (_cluster, client) = emulating("4.4").await?;
    let listed = advertised(&client).await?;
    for api in [
        DescribeCluster,
        DescribeTransactions,
        ConsumerGroupHeartbeat,
    ] {
        ensure!(listed.contains_key(&(api as i16)), "4.4 lacks {api:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_version_past_the_release_closes_the_connection_and_is_journaled() -> Result<()> {
    let (cluster, client) = emulating("2.8").await?;
    // Metadata v11 is 2.8's highest: answered.
    let answer = client.send(MetadataRequest::default(), 11).await?;
    same("brokers at v11", answer.brokers.len(), 1)?;
    // v12 came with 3.0: Kafka 2.8's SocketServer closes the connection.
    let refused = client.send(MetadataRequest::default(), 12).await;
    ensure!(
        refused.is_err(),
        "Metadata v12 answered by a Kafka 2.8: {refused:?}"
    );
    ensure!(
        client.wait_closed(HANG_GUARD).await,
        "connection still open"
    );
    let reason = cluster
        .journal()
        .entries()
        .iter()
        .find_map(|e| e.bad_request.clone())
        .unwrap_or_default();
    ensure!(
        reason.contains("Metadata v12 is not supported") && reason.contains("v0..=v11"),
        "journaled reason: {reason:?}"
    );
    Ok(())
}

#[tokio::test]
async fn api_versions_past_the_release_gets_the_v0_answer_with_its_own_range() -> Result<()> {
    // ApiVersions v4 came with 3.9 (KIP-1089's supported features at level 0); a 2.8 broker
    // answers v0, UNSUPPORTED_VERSION, listing ApiVersions 0-3 alone (KIP-511).
    let (_cluster, client) = emulating("2.8").await?;
    let mut body = client.send_raw(ApiVersionsRequest::default(), 4).await?;
    let answer = ApiVersionsResponse::decode(&mut body, 0)?;
    ensure!(!body.has_remaining(), "bytes left after the v0 answer");
    code_is(
        "ApiVersions v4",
        answer.error_code,
        Some(ResponseError::UnsupportedVersion),
    )?;
    let listed: Vec<_> = answer
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    same("listed", listed, vec![(ApiKey::ApiVersions as i16, 0, 3)])
}

#[tokio::test]
async fn before_4_0_no_feature_is_finalized_and_transactions_are_version_1() -> Result<()> {
    let (_cluster, client) = emulating("3.9").await?;
    let answer = client.api_versions().await?;
    code_is("3.9's ApiVersions", answer.error_code, None)?;
    same("finalized features", answer.finalized_features.len(), 0)?;
    same("epoch", answer.finalized_features_epoch, -1)?;
    let (_cluster, client) = emulating("4.0").await?;
    let answer = client.api_versions().await?;
    let finalized: Vec<_> = answer
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect();
    same(
        "4.0's finalized features",
        finalized,
        vec![("transaction.version".to_owned(), 2)],
    )?;
    let refused = Cluster::builder()
        .kafka_version("3.9".parse()?)
        .transaction_version(TransactionVersion::V2)
        .start()
        .await;
    ensure!(
        matches!(&refused, Err(kmock::Error::Config(m)) if m.contains("Kafka 4.0")),
        "transaction version 2 on a 3.9: {:?}",
        refused.map(|_| ())
    );
    Ok(())
}

#[tokio::test]
async fn a_version_older_than_2_4_does_not_start() -> Result<()> {
    let refused = Cluster::builder()
        .kafka_version(KafkaVersion::new(2, 3))
        .start()
        .await;
    ensure!(
        matches!(&refused, Err(kmock::Error::Config(m)) if m.contains("2.4 and later")),
        "{:?}",
        refused.map(|_| ())
    );
    let scenario = kmock::Scenario::parse("kafka_version: \"1.1\"\n");
    ensure!(scenario.is_err(), "a scenario with Kafka 1.1 validated");
    Ok(())
}

#[tokio::test]
async fn kip_848_is_answered_unsupported_version_before_4_0() -> Result<()> {
    // 3.9 lists ConsumerGroupHeartbeat v0 and answers it UNSUPPORTED_VERSION while the
    // consumer protocol is off, its default.
    let (_cluster, client) = emulating("3.9").await?;
    let heartbeat = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text("g")))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(5000)
        .with_subscribed_topic_names(Some(vec![name("t")]));
    let answer = client.send(heartbeat, 0).await?;
    code_is(
        "3.9 heartbeat",
        answer.error_code,
        Some(ResponseError::UnsupportedVersion),
    )?;
    let describe = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text("g"))]);
    let answer = client.send(describe, 0).await?;
    let codes: Vec<_> = answer
        .groups
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.error_code))
        .collect();
    same(
        "3.9 describe",
        codes,
        vec![("g".to_owned(), ResponseError::UnsupportedVersion.code())],
    )?;
    // 3.6 does not list it: the connection closes.
    let (_cluster, client) = emulating("3.6").await?;
    let heartbeat = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text("g")))
        .with_rebalance_timeout_ms(5000)
        .with_subscribed_topic_names(Some(vec![name("t")]));
    ensure!(
        client.send(heartbeat, 0).await.is_err(),
        "3.6 answered a heartbeat"
    );
    Ok(())
}

/// ListOffsets v0 for `t`'s partitions `(partition, timestamp, max_num_offsets)`, answered as
/// `(partition, error code, old-style offsets)`.
async fn list_offsets_v0(
    client: &Client,
    asks: &[(i32, i64, i32)],
) -> Result<Vec<(i32, i16, Vec<i64>)>> {
    let partitions = asks
        .iter()
        .map(|(p, timestamp, max)| {
            ListOffsetsPartition::default()
                .with_partition_index(*p)
                .with_timestamp(*timestamp)
                .with_max_num_offsets(*max)
        })
        .collect();
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("t"))
            .with_partitions(partitions)]);
    let answer = client.send(request, 0).await?;
    Ok(answer
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.partition_index, p.error_code, p.old_style_offsets.clone()))
        .collect())
}

#[tokio::test]
async fn list_offsets_v0_answers_old_style_offsets_before_4_0_and_closes_after() -> Result<()> {
    let cluster = Cluster::builder()
        .kafka_version("2.8".parse()?)
        .topic("t", 1)
        .start()
        .await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let records = [record(b"k", b"1"), record(b"k", b"2"), record(b"k", b"3")];
    let produced = client.produce("t", 0, &records, -1).await?;
    code_is(
        "produce",
        produced.responses[0].partition_responses[0].error_code,
        None,
    )?;
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    same(
        "ListOffsets v0",
        list_offsets_v0(
            &client,
            &[(0, -1, 1), (0, -1, 5), (0, -2, 1), (0, -2, 0), (7, -1, 1)],
        )
        .await?,
        vec![
            (0, 0, vec![3]),
            (0, 0, vec![3, 0]),
            (0, 0, vec![0]),
            (0, 0, vec![]),
            (7, unknown, vec![]),
        ],
    )?;
    // Kafka 4.0 removed v0 (KIP-896): the 4.4 default closes the connection.
    let cluster = Cluster::builder().topic("t", 1).start().await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    ensure!(
        list_offsets_v0(&client, &[(0, -1, 1)]).await.is_err(),
        "Kafka 4.4 answered ListOffsets v0"
    );
    Ok(())
}
