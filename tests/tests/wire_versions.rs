//! What ApiVersions advertises is what kmock answers: every API at every advertised version,
//! with a realistic request, gets an answer that decodes at that version, with the error codes
//! Kafka gives that request and the fields that show the API did its work (the offset a
//! produce got, the records a fetch read, the group a join created, ...).

#[path = "wire_versions/admin.rs"]
mod admin;
#[path = "wire_versions/cluster_admin.rs"]
mod cluster_admin;
mod common;
#[path = "wire_versions/consumer.rs"]
mod consumer;
#[path = "wire_versions/group_fixture.rs"]
mod group_fixture;
#[path = "wire_versions/quotas.rs"]
mod quotas;
#[path = "wire_versions/txn.rs"]
mod txn;

use anyhow::{anyhow, ensure, Result};
use bytes::Bytes;
use common::{code_is, connect_to, name, same, text};
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
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError::{MemberIdRequired, NotLeaderOrFollower, UnknownMemberId};
use kmock::Cluster;
use kmock_client::{decode_records, encode_batch, record, Client};

use group_fixture::{fixture, join, sync};

/// Topic `t` has two partitions: 0 led by broker 1 (where partition requests go), 1 by broker
/// 2, so every partition request also shows that kmock refuses what this broker does not lead.
const LED_HERE: i32 = 0;
const LED_ELSEWHERE: i32 = 1;
/// The assignment the member of group `g` was given.
const ASSIGNMENT: &[u8] = b"assignment";

/// What the requests refer to: set up before the first one.
struct Fixture {
    cluster: Cluster,
    topic_id: uuid::Uuid,
    /// Records in `t`/0 once every Produce version has appended one.
    produced: i64,
    /// How many APIs broker 1 advertises at ApiVersions' highest version.
    apis: usize,
    /// The one member of the stable group `g`, and its generation.
    member_id: StrBytes,
    generation_id: i32,
}

impl Fixture {
    /// A fresh connection to broker 1, so one failure cannot hide the next.
    async fn broker(&self) -> Result<Client> {
        connect_to(&self.cluster, 1).await
    }

    /// A fresh connection to the coordinator of `group`.
    async fn coordinator(&self, group: &str) -> Result<Client> {
        connect_to(&self.cluster, self.cluster.coordinator(group)).await
    }
}

/// The error codes of `t`'s two partitions: none for the one led here, NOT_LEADER_OR_FOLLOWER
/// for the other.
fn partition_codes(what: &str, codes: Vec<(i32, i16)>) -> Result<()> {
    same(
        what,
        codes,
        vec![(LED_HERE, 0), (LED_ELSEWHERE, NotLeaderOrFollower.code())],
    )
}

fn group(id: &str) -> GroupId {
    GroupId(text(id))
}

/// Sends a request of `api` at `v` and checks its answer; an API this test does not know
/// fails.
async fn check(f: &Fixture, api: ApiKey, v: i16) -> Result<()> {
    let by_id = v >= 13; // Produce and Fetch name topics by id from v13 (KIP-516)
    let (topic, id) = if by_id {
        (TopicName::default(), f.topic_id)
    } else {
        (name("t"), uuid::Uuid::nil())
    };
    match api {
        ApiKey::Produce => {
            let records = encode_batch(&[record(b"k", b"v")], Compression::None)?;
            let partitions = [LED_HERE, LED_ELSEWHERE]
                .map(|p| {
                    PartitionProduceData::default()
                        .with_index(p)
                        .with_records(Some(records.clone()))
                })
                .to_vec();
            let data = TopicProduceData::default()
                .with_name(topic)
                .with_topic_id(id)
                .with_partition_data(partitions);
            let request = ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(5000)
                .with_topic_data(vec![data]);
            let answer = f.broker().await?.send(request, v).await?;
            let topic = &answer.responses[0];
            let codes = topic
                .partition_responses
                .iter()
                .map(|p| (p.index, p.error_code));
            partition_codes("partition errors", codes.collect())?;
            let base_offset = topic.partition_responses[0].base_offset;
            ensure!(
                base_offset >= 0,
                "no offset for the stored batch: {base_offset}"
            );
        }
        ApiKey::Fetch => {
            let partitions = [LED_HERE, LED_ELSEWHERE]
                .map(|p| {
                    FetchPartition::default()
                        .with_partition(p)
                        .with_partition_max_bytes(1 << 20)
                })
                .to_vec();
            let topic = FetchTopic::default()
                .with_topic(topic)
                .with_topic_id(id)
                .with_partitions(partitions);
            let request = FetchRequest::default()
                .with_max_bytes(1 << 20)
                .with_topics(vec![topic]);
            let answer = f.broker().await?.send(request, v).await?;
            code_is("top-level error", answer.error_code, None)?;
            let partitions = &answer.responses[0].partitions;
            let codes = partitions.iter().map(|p| (p.partition_index, p.error_code));
            partition_codes("partition errors", codes.collect())?;
            same("high watermark", partitions[0].high_watermark, f.produced)?;
            let records = partitions[0]
                .records
                .as_ref()
                .ok_or(anyhow!("no records"))?;
            same(
                "records read",
                decode_records(records)?.len() as i64,
                f.produced,
            )?;
        }
        ApiKey::ListOffsets => {
            let partitions = vec![
                ListOffsetsPartition::default()
                    .with_partition_index(LED_HERE)
                    .with_timestamp(-1),
                ListOffsetsPartition::default()
                    .with_partition_index(LED_ELSEWHERE)
                    .with_timestamp(-2),
            ];
            let topic = ListOffsetsTopic::default()
                .with_name(name("t"))
                .with_partitions(partitions);
            let request = ListOffsetsRequest::default().with_topics(vec![topic]);
            let answer = f.broker().await?.send(request, v).await?;
            let partitions = &answer.topics[0].partitions;
            let codes = partitions.iter().map(|p| (p.partition_index, p.error_code));
            partition_codes("partition errors", codes.collect())?;
            same("latest offset", partitions[0].offset, f.produced)?;
        }
        ApiKey::Metadata => {
            let topics = vec![MetadataRequestTopic::default().with_name(Some(name("t")))];
            let request = MetadataRequest::default().with_topics(Some(topics));
            let answer = f.broker().await?.send(request, v).await?;
            let topic = &answer.topics[0];
            code_is("topic error", topic.error_code, None)?;
            let leaders: Vec<_> = topic.partitions.iter().map(|p| p.leader_id.0).collect();
            same("leaders", leaders, vec![1, 2])?;
            same("brokers", answer.brokers.len(), 2)?;
        }
        ApiKey::OffsetCommit => {
            // A simple (standalone) commit to a group of its own, read back by OffsetFetch and
            // removed by DeleteGroups and OffsetDelete below.
            let id = format!("commit-v{v}");
            let partition = offset_commit_request::OffsetCommitRequestPartition::default()
                .with_partition_index(LED_HERE)
                .with_committed_offset(3);
            let topic = offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![partition]);
            let request = OffsetCommitRequest::default()
                .with_group_id(group(&id))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![topic]);
            let answer = f.coordinator(&id).await?.send(request, v).await?;
            let code = answer.topics[0].partitions[0].error_code;
            code_is("partition error", code, None)?;
        }
        ApiKey::OffsetFetch => {
            let id = "commit-v2"; // committed 3 by OffsetCommit v2
            let client = f.coordinator(id).await?;
            let partition = if v >= 8 {
                let request = OffsetFetchRequest::default().with_groups(vec![
                    offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(group(id))
                        .with_topics(None),
                ]);
                let answer = client.send(request, v).await?;
                let group = &answer.groups[0];
                code_is("group error", group.error_code, None)?;
                let p = &group.topics.first().ok_or(anyhow!("no topic"))?.partitions[0];
                (p.partition_index, p.error_code, p.committed_offset)
            } else {
                let topic = offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(name("t"))
                    .with_partition_indexes(vec![LED_HERE]);
                let request = OffsetFetchRequest::default()
                    .with_group_id(group(id))
                    .with_topics(Some(vec![topic]));
                let answer = client.send(request, v).await?;
                code_is("top-level error", answer.error_code, None)?;
                let p = &answer.topics[0].partitions[0];
                (p.partition_index, p.error_code, p.committed_offset)
            };
            same(
                "partition, error, committed offset",
                partition,
                (LED_HERE, 0, 3),
            )?;
        }
        ApiKey::FindCoordinator => {
            let request = if v >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![text("g")])
            } else {
                FindCoordinatorRequest::default().with_key(text("g"))
            };
            let answer = f.broker().await?.send(request, v).await?;
            let (code, node) = if v >= 4 {
                let c = answer
                    .coordinators
                    .first()
                    .ok_or(anyhow!("no coordinator"))?;
                (c.error_code, c.node_id.0)
            } else {
                (answer.error_code, answer.node_id.0)
            };
            code_is("error", code, None)?;
            same("coordinator", node, f.cluster.coordinator("g"))?;
        }
        ApiKey::JoinGroup => {
            let id = format!("join-v{v}");
            let answer = f.coordinator(&id).await?.send(join(&id, v, ""), v).await?;
            ensure!(!answer.member_id.is_empty(), "no member id given");
            if v >= 4 {
                // KIP-394: a first join without a member id is given one to rejoin with.
                code_is("error", answer.error_code, Some(MemberIdRequired))?;
            } else {
                code_is("error", answer.error_code, None)?;
                same("generation", answer.generation_id, 1)?;
                same("leader", &answer.leader, &answer.member_id)?;
            }
        }
        ApiKey::Heartbeat => {
            let request = HeartbeatRequest::default()
                .with_group_id(group("g"))
                .with_generation_id(f.generation_id)
                .with_member_id(f.member_id.clone());
            let answer = f.coordinator("g").await?.send(request, v).await?;
            code_is("error", answer.error_code, None)?;
        }
        ApiKey::LeaveGroup => {
            // A member `g` never had: Kafka answers UNKNOWN_MEMBER_ID, for the member from v3
            // (KIP-345) and at the top before, and `g` keeps its member.
            let client = f.coordinator("g").await?;
            if v >= 3 {
                let member =
                    leave_group_request::MemberIdentity::default().with_member_id(text("m"));
                let request = LeaveGroupRequest::default()
                    .with_group_id(group("g"))
                    .with_members(vec![member]);
                let answer = client.send(request, v).await?;
                code_is("top-level error", answer.error_code, None)?;
                let member = answer.members.first().ok_or(anyhow!("no member answer"))?;
                code_is("member error", member.error_code, Some(UnknownMemberId))?;
            } else {
                let request = LeaveGroupRequest::default()
                    .with_group_id(group("g"))
                    .with_member_id(text("m"));
                let answer = client.send(request, v).await?;
                code_is("error", answer.error_code, Some(UnknownMemberId))?;
            }
        }
        ApiKey::SyncGroup => {
            let answer = f.coordinator("g").await?.send(sync(f, v), v).await?;
            code_is("error", answer.error_code, None)?;
            same("assignment", &answer.assignment[..], ASSIGNMENT)?;
        }
        ApiKey::DescribeGroups => {
            let request = DescribeGroupsRequest::default().with_groups(vec![group("g")]);
            let answer = f.coordinator("g").await?.send(request, v).await?;
            let g = &answer.groups[0];
            code_is("error", g.error_code, None)?;
            same("state", g.group_state.as_str(), "Stable")?;
            let members: Vec<_> = g.members.iter().map(|m| m.member_id.clone()).collect();
            same("members", members, vec![f.member_id.clone()])?;
        }
        ApiKey::ListGroups => {
            let answer = f
                .coordinator("g")
                .await?
                .send(ListGroupsRequest::default(), v)
                .await?;
            code_is("error", answer.error_code, None)?;
            ensure!(
                answer.groups.iter().any(|g| g.group_id.as_str() == "g"),
                "group g not listed by its coordinator"
            );
        }
        ApiKey::ApiVersions => {
            let request = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("kmock-tests"))
                .with_client_software_version(StrBytes::from_static_str("1.0"));
            let answer = f.broker().await?.send(request, v).await?;
            code_is("error", answer.error_code, None)?;
            same("APIs listed", answer.api_keys.len(), f.apis)?;
        }
        ApiKey::CreateTopics => {
            let created = format!("created-v{v}");
            let topic = CreatableTopic::default()
                .with_name(name(&created))
                .with_num_partitions(1)
                .with_replication_factor(1);
            let request = CreateTopicsRequest::default().with_topics(vec![topic]);
            let answer = f.broker().await?.send(request, v).await?;
            code_is("topic error", answer.topics[0].error_code, None)?;
            ensure!(
                f.cluster.leader(&created, 0).is_some(),
                "{created} was not created"
            );
        }
        ApiKey::DeleteTopics => {
            let gone = format!("gone-v{v}");
            let request = if v >= 6 {
                DeleteTopicsRequest::default()
                    .with_timeout_ms(30_000)
                    .with_topics(vec![
                        DeleteTopicState::default().with_name(Some(name(&gone)))
                    ])
            } else {
                DeleteTopicsRequest::default()
                    .with_timeout_ms(30_000)
                    .with_topic_names(vec![name(&gone)])
            };
            let answer = f.broker().await?.send(request, v).await?;
            code_is("topic error", answer.responses[0].error_code, None)?;
            ensure!(
                f.cluster.leader(&gone, 0).is_none(),
                "{gone} is still there"
            );
        }
        ApiKey::InitProducerId => {
            let answer = f
                .broker()
                .await?
                .send(
                    InitProducerIdRequest::default().with_transactional_id(None),
                    v,
                )
                .await?;
            code_is("error", answer.error_code, None)?;
            ensure!(
                answer.producer_id.0 >= 0,
                "no producer id: {:?}",
                answer.producer_id
            );
            same("epoch", answer.producer_epoch, 0)?;
        }
        ApiKey::OffsetForLeaderEpoch => {
            let epoch = f.cluster.leader_epoch("t", LED_HERE).unwrap();
            let partition = OffsetForLeaderPartition::default()
                .with_partition(LED_HERE)
                .with_leader_epoch(epoch);
            let topic = OffsetForLeaderTopic::default()
                .with_topic(name("t"))
                .with_partitions(vec![partition]);
            let request = OffsetForLeaderEpochRequest::default().with_topics(vec![topic]);
            let answer = f.broker().await?.send(request, v).await?;
            let p = &answer.topics[0].partitions[0];
            code_is("error", p.error_code, None)?;
            same("end offset of the current epoch", p.end_offset, f.produced)?;
        }
        ApiKey::DescribeConfigs => {
            let resource = DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(text("t"));
            let request = DescribeConfigsRequest::default().with_resources(vec![resource]);
            let answer = f.broker().await?.send(request, v).await?;
            let result = &answer.results[0];
            code_is("error", result.error_code, None)?;
            ensure!(!result.configs.is_empty(), "no configs described");
        }
        ApiKey::CreatePartitions => {
            let count = 10 + i32::from(v);
            let topic = CreatePartitionsTopic::default()
                .with_name(name("grows"))
                .with_count(count)
                .with_assignments(None); // leaders placed by the broker
            let request = CreatePartitionsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(vec![topic]);
            let answer = f.broker().await?.send(request, v).await?;
            code_is("error", answer.results[0].error_code, None)?;
            ensure!(
                f.cluster.leader("grows", count - 1).is_some()
                    && f.cluster.leader("grows", count).is_none(),
                "grows does not have {count} partitions"
            );
        }
        ApiKey::DeleteGroups => {
            // The empty groups left by OffsetCommit v3, v4, v5.
            let id = format!("commit-v{}", 3 + v);
            let request = DeleteGroupsRequest::default().with_groups_names(vec![group(&id)]);
            let answer = f.coordinator(&id).await?.send(request, v).await?;
            let result = answer.results.first().ok_or(anyhow!("no result"))?;
            same("group", result.group_id.as_str(), id.as_str())?;
            code_is("error", result.error_code, None)?;
        }
        ApiKey::OffsetDelete => {
            let id = "commit-v6"; // an empty group with an offset for t/0
            let topic = offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(LED_HERE),
                ]);
            let request = OffsetDeleteRequest::default()
                .with_group_id(group(id))
                .with_topics(vec![topic]);
            let answer = f.coordinator(id).await?.send(request, v).await?;
            code_is("top-level error", answer.error_code, None)?;
            code_is(
                "partition error",
                answer.topics[0].partitions[0].error_code,
                None,
            )?;
        }
        ApiKey::DescribeCluster => {
            let answer = f
                .broker()
                .await?
                .send(DescribeClusterRequest::default(), v)
                .await?;
            code_is("error", answer.error_code, None)?;
            let brokers: Vec<_> = answer.brokers.iter().map(|b| b.broker_id.0).collect();
            same("brokers", brokers, vec![1, 2])?;
        }
        ApiKey::AddPartitionsToTxn
        | ApiKey::AddOffsetsToTxn
        | ApiKey::EndTxn
        | ApiKey::TxnOffsetCommit
        | ApiKey::DescribeTransactions
        | ApiKey::ListTransactions
        | ApiKey::DescribeProducers => txn::check(f, api, v).await?,
        ApiKey::ConsumerGroupHeartbeat | ApiKey::ConsumerGroupDescribe => {
            consumer::check(f, api, v).await?
        }
        api if admin::APIS.contains(&api) => admin::check(f, api, v).await?,
        api if quotas::APIS.contains(&api) => quotas::check(f, api, v).await?,
        api if cluster_admin::APIS.contains(&api) => cluster_admin::check(f, api, v).await?,
        _ => return Err(anyhow!("advertised but unknown to this test")),
    }
    Ok(())
}

#[tokio::test]
async fn every_advertised_api_answers_at_every_advertised_version() {
    let f = fixture().await.unwrap();
    let advertised = f
        .broker()
        .await
        .unwrap()
        .api_versions()
        .await
        .unwrap()
        .api_keys;
    assert!(
        advertised.len() >= 12,
        "too few APIs advertised: {advertised:?}"
    );
    let mut failures = Vec::new();
    // In API key order: Produce before Fetch and ListOffsets (which read what it stored),
    // OffsetCommit before OffsetFetch, DeleteGroups and OffsetDelete (which use its groups).
    for api in &advertised {
        let key = ApiKey::try_from(api.api_key).expect("a known API key");
        for version in api.min_version..=api.max_version {
            if let Err(e) = check(&f, key, version).await {
                failures.push(format!("{key:?} v{version}: {e:#}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "answers not as Kafka gives them:\n{}",
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
