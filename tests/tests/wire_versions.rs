//! What ApiVersions advertises is what kmock answers: every API at every advertised version,
//! with a realistic request, gets an answer that decodes at that version.

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use kmock::Cluster;
use kmock_client::{encode_batch, record, Client, Error};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// A request of `api` at `version` about topic `t` (partition 0 led by this broker, partition 1
/// by the other), or `None` for an API this test does not know (which fails the test).
async fn send_sample(
    client: &Client,
    api: ApiKey,
    v: i16,
    t: uuid::Uuid,
) -> Option<Result<(), Error>> {
    let by_id = |topic: &str| {
        if v >= 13 {
            (TopicName::default(), t)
        } else {
            (name(topic), uuid::Uuid::nil())
        }
    };
    Some(match api {
        ApiKey::Produce => {
            let (topic, id) = by_id("t");
            let records = encode_batch(&[record(b"k", b"v")], Compression::None).unwrap();
            let partitions = (0..2)
                .map(|p| {
                    PartitionProduceData::default()
                        .with_index(p)
                        .with_records(Some(records.clone()))
                })
                .collect();
            let data = TopicProduceData::default()
                .with_name(topic)
                .with_topic_id(id)
                .with_partition_data(partitions);
            let request = ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(5000)
                .with_topic_data(vec![data]);
            client.send(request, v).await.map(drop)
        }
        ApiKey::Fetch => {
            let (topic, id) = by_id("t");
            let partitions = (0..2)
                .map(|p| {
                    FetchPartition::default()
                        .with_partition(p)
                        .with_partition_max_bytes(1 << 20)
                })
                .collect();
            let topic = FetchTopic::default()
                .with_topic(topic)
                .with_topic_id(id)
                .with_partitions(partitions);
            client
                .send(
                    FetchRequest::default()
                        .with_max_bytes(1 << 20)
                        .with_topics(vec![topic]),
                    v,
                )
                .await
                .map(drop)
        }
        ApiKey::ListOffsets => {
            let partitions = vec![
                ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1),
                ListOffsetsPartition::default()
                    .with_partition_index(1)
                    .with_timestamp(-2),
            ];
            let topic = ListOffsetsTopic::default()
                .with_name(name("t"))
                .with_partitions(partitions);
            client
                .send(ListOffsetsRequest::default().with_topics(vec![topic]), v)
                .await
                .map(drop)
        }
        ApiKey::Metadata => {
            let topics = vec![MetadataRequestTopic::default().with_name(Some(name("t")))];
            client
                .send(MetadataRequest::default().with_topics(Some(topics)), v)
                .await
                .map(drop)
        }
        ApiKey::ApiVersions => {
            let request = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("kmock-tests"))
                .with_client_software_version(StrBytes::from_static_str("1.0"));
            client.send(request, v).await.map(drop)
        }
        ApiKey::CreateTopics => {
            let topic = CreatableTopic::default()
                .with_name(name(&format!("created-v{v}")))
                .with_num_partitions(1)
                .with_replication_factor(1);
            client
                .send(CreateTopicsRequest::default().with_topics(vec![topic]), v)
                .await
                .map(drop)
        }
        ApiKey::DeleteTopics => {
            let request = if v >= 6 {
                DeleteTopicsRequest::default().with_topics(vec![
                    DeleteTopicState::default().with_name(Some(name("gone")))
                ])
            } else {
                DeleteTopicsRequest::default().with_topic_names(vec![name("gone")])
            };
            client.send(request, v).await.map(drop)
        }
        ApiKey::InitProducerId => client
            .send(InitProducerIdRequest::default(), v)
            .await
            .map(drop),
        ApiKey::OffsetForLeaderEpoch => {
            let partition = OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_leader_epoch(0);
            let topic = OffsetForLeaderTopic::default()
                .with_topic(name("t"))
                .with_partitions(vec![partition]);
            client
                .send(
                    OffsetForLeaderEpochRequest::default().with_topics(vec![topic]),
                    v,
                )
                .await
                .map(drop)
        }
        ApiKey::DescribeConfigs => {
            let resource = DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("t"));
            client
                .send(
                    DescribeConfigsRequest::default().with_resources(vec![resource]),
                    v,
                )
                .await
                .map(drop)
        }
        ApiKey::CreatePartitions => {
            let topic = CreatePartitionsTopic::default()
                .with_name(name("grows"))
                .with_count(10 + i32::from(v));
            client
                .send(
                    CreatePartitionsRequest::default().with_topics(vec![topic]),
                    v,
                )
                .await
                .map(drop)
        }
        ApiKey::DescribeCluster => client
            .send(DescribeClusterRequest::default(), v)
            .await
            .map(drop),
        ApiKey::FindCoordinator => {
            let g = StrBytes::from_static_str("g");
            let request = if v >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![g])
            } else {
                FindCoordinatorRequest::default().with_key(g)
            };
            client.send(request, v).await.map(drop)
        }
        ApiKey::JoinGroup => {
            let protocol = join_group_request::JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(bytes::Bytes::from_static(b"\0\0"));
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(format!("join-v{v}"))))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(if v >= 1 { 10_000 } else { -1 })
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(vec![protocol]);
            client.send(request, v).await.map(drop)
        }
        ApiKey::SyncGroup => {
            let request =
                SyncGroupRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g")));
            client.send(request, v).await.map(drop)
        }
        ApiKey::Heartbeat => {
            let request =
                HeartbeatRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g")));
            client.send(request, v).await.map(drop)
        }
        ApiKey::LeaveGroup => {
            let member = leave_group_request::MemberIdentity::default()
                .with_member_id(StrBytes::from_static_str("m"));
            let request = if v >= 3 {
                LeaveGroupRequest::default().with_members(vec![member])
            } else {
                LeaveGroupRequest::default().with_member_id(StrBytes::from_static_str("m"))
            };
            client
                .send(
                    request.with_group_id(GroupId(StrBytes::from_static_str("g"))),
                    v,
                )
                .await
                .map(drop)
        }
        ApiKey::OffsetCommit => {
            let partition = offset_commit_request::OffsetCommitRequestPartition::default()
                .with_committed_offset(3);
            let topic = offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![partition]);
            let request = OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(format!("commit-v{v}"))))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![topic]);
            client.send(request, v).await.map(drop)
        }
        ApiKey::OffsetFetch => {
            let request = if v >= 8 {
                let group = offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("g")))
                    .with_topics(None);
                OffsetFetchRequest::default().with_groups(vec![group])
            } else {
                let topic = offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(name("t"))
                    .with_partition_indexes(vec![0]);
                OffsetFetchRequest::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("g")))
                    .with_topics(Some(vec![topic]))
            };
            client.send(request, v).await.map(drop)
        }
        ApiKey::DescribeGroups => {
            let request = DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(StrBytes::from_static_str("g"))]);
            client.send(request, v).await.map(drop)
        }
        ApiKey::ListGroups => client.send(ListGroupsRequest::default(), v).await.map(drop),
        ApiKey::DeleteGroups => {
            let request = DeleteGroupsRequest::default()
                .with_groups_names(vec![GroupId(StrBytes::from_static_str("nope"))]);
            client.send(request, v).await.map(drop)
        }
        ApiKey::OffsetDelete => {
            let topic = offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default(),
                ]);
            let request = OffsetDeleteRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_topics(vec![topic]);
            client.send(request, v).await.map(drop)
        }
        _ => return None,
    })
}

#[tokio::test]
async fn every_advertised_api_answers_at_every_advertised_version() {
    let cluster = Cluster::builder()
        .brokers(2)
        .topic("t", 2)
        .topic("grows", 1)
        .start()
        .await
        .unwrap();
    let addr = cluster.brokers()[0].addr;
    let client = Client::connect(addr).await.unwrap();
    let metadata = client.metadata(Some(&["t"])).await.unwrap();
    let topic_id = metadata.topics[0].topic_id;
    let advertised = client.api_versions().await.unwrap().api_keys;
    assert!(
        advertised.len() >= 12,
        "too few APIs advertised: {advertised:?}"
    );
    let mut failures = Vec::new();
    for api in &advertised {
        let key = ApiKey::try_from(api.api_key).expect("a known API key");
        for version in api.min_version..=api.max_version {
            // A fresh connection each time, so one failure cannot hide the next.
            let client = Client::connect(addr).await.unwrap();
            match send_sample(&client, key, version, topic_id).await {
                None => failures.push(format!("{key:?}: advertised but unknown to this test")),
                Some(Err(e)) => failures.push(format!("{key:?} v{version}: {e}")),
                Some(Ok(())) => {}
            }
        }
    }
    assert!(
        failures.is_empty(),
        "requests not answered:\n{}",
        failures.join("\n")
    );
}

#[tokio::test]
async fn api_versions_v3_with_an_invalid_client_software_name_gets_invalid_request() {
    let cluster = Cluster::builder().start().await.unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("bad name!"))
        .with_client_software_version(StrBytes::from_static_str("1.0"));
    let answer = client.send(request, 3).await.unwrap();
    assert_eq!(
        answer.error_code,
        kafka_protocol::ResponseError::InvalidRequest.code()
    );
    assert!(
        answer.api_keys.is_empty(),
        "an INVALID_REQUEST answer lists no APIs, got {:?}",
        answer.api_keys
    );
}
