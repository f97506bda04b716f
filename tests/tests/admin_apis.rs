//! The admin APIs on a running kmock cluster, over real sockets: CreateTopics, DeleteTopics,
//! CreatePartitions, DescribeConfigs, DescribeCluster, InitProducerId, OffsetForLeaderEpoch;
//! and DeleteRecords' journal summary.

mod common;

use anyhow::Result;
use common::{code_is, err, name, same, start, text};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError::*;
use kmock::Cluster;
use kmock_client::{record, Client};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

fn new_topic(topic: &str, partitions: i32, replication_factor: i16) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
}

fn config(key: &str, value: &str) -> CreatableTopicConfig {
    CreatableTopicConfig::default()
        .with_name(text(key))
        .with_value(Some(text(value)))
}

/// CreateTopics at `v`; the answer's `(topic, error)` pairs sorted by topic.
async fn create(
    client: &Client,
    v: i16,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> Result<(Vec<(String, String)>, CreateTopicsResponse)> {
    let request = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_validate_only(validate_only);
    let response = client.send(request, v).await?;
    let errors = response.topics.iter();
    let mut errors: Vec<_> = errors
        .map(|t| (t.name.to_string(), err(t.error_code)))
        .collect();
    errors.sort();
    Ok((errors, response))
}

async fn metadata_of(client: &Client, topic: &str) -> Result<MetadataResponseTopic> {
    let mut metadata = client.metadata(Some(&[topic])).await?;
    Ok(metadata.topics.remove(0))
}

async fn delete(client: &Client, v: i16, topic: &str) -> Result<String> {
    let request = if v >= 6 {
        let state = DeleteTopicState::default().with_name(Some(name(topic)));
        DeleteTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![state])
    } else {
        DeleteTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topic_names(vec![name(topic)])
    };
    Ok(err(client.send(request, v).await?.responses[0].error_code))
}

async fn grow(client: &Client, v: i16, topic: &str, count: i32) -> Result<String> {
    let topic = CreatePartitionsTopic::default()
        .with_name(name(topic))
        .with_count(count)
        .with_assignments(None);
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![topic]);
    Ok(err(client.send(request, v).await?.results[0].error_code))
}

async fn describe(
    client: &Client,
    v: i16,
    (kind, resource): (i8, &str),
    keys: Option<&[&str]>,
) -> Result<DescribeConfigsResult> {
    let resource = DescribeConfigsResource::default()
        .with_resource_type(kind)
        .with_resource_name(text(resource))
        .with_configuration_keys(keys.map(|keys| keys.iter().map(|k| text(k)).collect()));
    let request = DescribeConfigsRequest::default().with_resources(vec![resource]);
    Ok(client.send(request, v).await?.results.remove(0))
}

/// `(name, value)` of every config in a DescribeConfigs result, sorted by name.
fn configs(result: &DescribeConfigsResult) -> Vec<(String, Option<String>)> {
    let configs = result.configs.iter();
    let mut configs: Vec<_> = configs
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
        .collect();
    configs.sort();
    configs
}

/// InitProducerId at `v`: `(error, producer id, epoch)`.
async fn init_pid(
    c: &Client,
    v: i16,
    txn: Option<&str>,
    timeout_ms: i32,
) -> Result<(String, i64, i16)> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(txn.map(|t| TransactionalId(text(t))))
        .with_transaction_timeout_ms(timeout_ms);
    let r = c.send(request, v).await?;
    Ok((err(r.error_code), r.producer_id.0, r.producer_epoch))
}

async fn clients(cluster: &Cluster) -> Result<Vec<Client>> {
    let mut clients = Vec::new();
    for broker in cluster.brokers() {
        clients.push(Client::connect(broker.addr).await?);
    }
    Ok(clients)
}

#[tokio::test]
async fn create_topics_creates_a_topic_that_metadata_lists_with_round_robin_leaders() -> Result<()>
{
    let (_cluster, client) = start(3, &[], 1).await?;
    for v in [2, 7] {
        let topic = format!("created-v{v}");
        let (errors, response) = create(&client, v, vec![new_topic(&topic, 5, 1)], false).await?;
        let created = vec![(topic.clone(), err(0))];
        same(&format!("CreateTopics v{v}"), errors, created)?;
        let listed = metadata_of(&client, &topic).await?;
        code_is(&format!("Metadata of {topic}"), listed.error_code, None)?;
        let mut partitions = listed.partitions.clone();
        partitions.sort_by_key(|p| p.partition_index);
        let leaders: Vec<i32> = partitions.iter().map(|p| p.leader_id.0).collect();
        let mut first_three = leaders[..3.min(leaders.len())].to_vec();
        first_three.sort();
        first_three.dedup();
        let cycle = leaders.len() == 5 && (0..5).all(|p| leaders[p] == leaders[p % 3]);
        let what = format!("leaders {leaders:?} of 5 partitions round-robin over 3 brokers");
        same(&what, cycle && first_three.len() == 3, true)?;
        if v >= 7 {
            let created = &response.topics[0];
            let what = "v7 (topic id, id is nil, partitions, replication factor)";
            let id = created.topic_id;
            let got = (
                id,
                id.is_nil(),
                created.num_partitions,
                created.replication_factor,
            );
            same(what, got, (listed.topic_id, false, 5, 1))?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn create_topics_refuses_what_kafka_refuses_and_validate_only_creates_nothing() -> Result<()>
{
    let (_cluster, client) = start(3, &["taken"], 1).await?;
    for v in [2, 7] {
        let topics = vec![
            new_topic("taken", 1, 1),
            new_topic("bad name!", 1, 1),
            new_topic(&format!("zero-v{v}"), 0, 1),
            new_topic(&format!("rf4-v{v}"), 1, 4),
            new_topic(&format!("odd-v{v}"), 1, 1).with_configs(vec![config("no.such.config", "1")]),
            // segment.bytes is an INT in Kafka: one past i32::MAX is refused.
            new_topic(&format!("seg-v{v}"), 1, 1)
                .with_configs(vec![config("segment.bytes", "2147483648")]),
        ];
        let (errors, _) = create(&client, v, topics, false).await?;
        let mut expected = vec![
            ("taken".to_owned(), err(TopicAlreadyExists.code())),
            ("bad name!".to_owned(), err(InvalidTopicException.code())),
            (format!("zero-v{v}"), err(InvalidPartitions.code())),
            (format!("rf4-v{v}"), err(InvalidReplicationFactor.code())),
            (format!("odd-v{v}"), err(InvalidConfig.code())),
            (format!("seg-v{v}"), err(InvalidConfig.code())),
        ];
        expected.sort();
        same(
            &format!("CreateTopics v{v} (topic, error)"),
            errors,
            expected,
        )?;
        let checked = format!("checked-v{v}");
        let (errors, _) = create(&client, v, vec![new_topic(&checked, 3, 1)], true).await?;
        let expected = vec![(checked, err(0))];
        same(&format!("v{v} validate_only"), errors, expected)?;
    }
    let all = client.metadata(None).await?.topics;
    let names: Vec<_> = all.iter().map(|t| t.name.clone().unwrap().0).collect();
    same(
        "topics after refused and validate_only creates",
        names,
        vec![text("taken")],
    )
}

#[tokio::test]
async fn delete_topics_removes_a_topic_and_a_recreated_name_gets_a_new_id() -> Result<()> {
    let (_cluster, client) = start(1, &["gone-v1", "gone-v6"], 1).await?;
    for v in [1, 6] {
        let topic = format!("gone-v{v}");
        let old_id = metadata_of(&client, &topic).await?.topic_id;
        let first = delete(&client, v, &topic).await?;
        let listed = err(metadata_of(&client, &topic).await?.error_code);
        let second = delete(&client, v, &topic).await?;
        let unknown = err(UnknownTopicOrPartition.code());
        let what = format!("DeleteTopics v{v}: (first delete, Metadata then, second delete)");
        let expected = (err(0), unknown.clone(), unknown);
        same(&what, (first, listed, second), expected)?;
        let (errors, _) = create(&client, 7, vec![new_topic(&topic, 1, 1)], false).await?;
        same("re-creating it", errors, vec![(topic.clone(), err(0))])?;
        let new_id = metadata_of(&client, &topic).await?.topic_id;
        let what = format!("re-created id {new_id} equal to the deleted {old_id}");
        same(&what, new_id == old_id, false)?;
    }
    Ok(())
}

#[tokio::test]
async fn create_partitions_grows_a_topic_and_refuses_not_growing_and_unknown_topics() -> Result<()>
{
    let (_cluster, client) = start(3, &["grow-v0", "grow-v3"], 2).await?;
    for v in [0, 3] {
        let topic = format!("grow-v{v}");
        let grown = grow(&client, v, &topic, 5).await?;
        let count = metadata_of(&client, &topic).await?.partitions.len();
        let again = grow(&client, v, &topic, 5).await?;
        let fewer = grow(&client, v, &topic, 3).await?;
        let unknown = grow(&client, v, "no-such-topic", 5).await?;
        let what = format!("CreatePartitions v{v}: (2→5, count, 5 again, 3, unknown topic)");
        let (invalid, missing) = (
            err(InvalidPartitions.code()),
            err(UnknownTopicOrPartition.code()),
        );
        let expected = (err(0), 5, invalid.clone(), invalid, missing);
        same(&what, (grown, count, again, fewer, unknown), expected)?;
    }
    Ok(())
}

#[tokio::test]
async fn describe_configs_lists_topic_and_broker_configs_filtered_by_key() -> Result<()> {
    let (_cluster, client) = start(3, &[], 1).await?;
    let stamped = new_topic("stamped", 1, 1)
        .with_configs(vec![config("message.timestamp.type", "LogAppendTime")]);
    let (errors, _) = create(&client, 7, vec![stamped], false).await?;
    same("creating stamped", errors, vec![("stamped".into(), err(0))])?;
    let keys = ["message.timestamp.type", "retention.ms"];
    for v in [1, 4] {
        let all = describe(&client, v, (TOPIC, "stamped"), None).await?;
        code_is(&format!("v{v} topic stamped"), all.error_code, None)?;
        let stamp = configs(&all).into_iter().find(|(k, _)| k == keys[0]);
        let stamp = stamp.and_then(|(_, value)| value);
        let what = format!("v{v}: message.timestamp.type of stamped");
        same(&what, stamp.as_deref(), Some("LogAppendTime"))?;
        let some = describe(&client, v, (TOPIC, "stamped"), Some(&keys)).await?;
        let names: Vec<String> = configs(&some).into_iter().map(|(k, _)| k).collect();
        let what = format!("v{v}: configs described for keys {keys:?}");
        same(&what, names, keys.map(String::from).to_vec())?;
        let unknown = describe(&client, v, (TOPIC, "no-such-topic"), None).await?;
        let what = format!("v{v}: unknown topic");
        code_is(&what, unknown.error_code, Some(UnknownTopicOrPartition))?;
        let broker = describe(&client, v, (BROKER, "1"), None).await?;
        let what = format!("v{v}: broker 1 (error, has configs)");
        let got = (err(broker.error_code), !broker.configs.is_empty());
        same(&what, got, (err(0), true))?;
    }
    Ok(())
}

#[tokio::test]
async fn describe_configs_with_an_empty_key_list_describes_every_config_as_kafka_does() -> Result<()>
{
    // Kafka's ConfigHelper.describeConfigs filters only by a non-empty configuration_keys list.
    let (_cluster, client) = start(1, &["t"], 1).await?;
    let all = configs(&describe(&client, 4, (TOPIC, "t"), None).await?);
    let empty = configs(&describe(&client, 4, (TOPIC, "t"), Some(&[])).await?);
    same("configs described for an empty key list", empty, all)
}

#[tokio::test]
async fn describe_configs_of_another_brokers_resource_gets_invalid_request() -> Result<()> {
    // Kafka's ConfigHelper answers only its own broker id (or "" for cluster defaults).
    let (_cluster, client) = start(3, &[], 1).await?;
    let other = describe(&client, 4, (BROKER, "2"), None).await?;
    code_is(
        "broker resource 2 sent to broker 1",
        other.error_code,
        Some(InvalidRequest),
    )
}

#[tokio::test]
async fn describe_cluster_lists_every_broker_with_its_address_and_the_cluster_id() -> Result<()> {
    let cluster = Cluster::builder()
        .brokers(3)
        .cluster_id("admin-apis")
        .start()
        .await?;
    let client = Client::connect(cluster.brokers()[1].addr).await?;
    let brokers = cluster.brokers().iter();
    let expected: Vec<_> = brokers
        .map(|b| (b.node_id, b.addr.ip().to_string(), i32::from(b.addr.port())))
        .collect();
    for v in [0, 2] {
        let r = client.send(DescribeClusterRequest::default(), v).await?;
        let listed = r.brokers.iter();
        let mut listed: Vec<_> = listed
            .map(|b| (b.broker_id.0, b.host.to_string(), b.port))
            .collect();
        listed.sort();
        let got = (err(r.error_code), r.cluster_id.to_string(), listed);
        let wanted = (err(0), "admin-apis".to_owned(), expected.clone());
        same(&format!("DescribeCluster v{v}"), got, wanted)?;
    }
    Ok(())
}

#[tokio::test]
async fn init_producer_id_without_transactional_id_gives_a_fresh_id_at_epoch_zero() -> Result<()> {
    let (_cluster, client) = start(1, &[], 1).await?;
    let mut answers = Vec::new();
    for v in [0, 0, 5, 5] {
        answers.push(init_pid(&client, v, None, 60_000).await?);
    }
    let mut ids: Vec<i64> = answers.iter().map(|a| a.1).collect();
    ids.sort();
    ids.dedup();
    let shape: Vec<_> = answers.iter().map(|(e, _, epoch)| (e, *epoch)).collect();
    same(
        "(error, epoch) at v0, v0, v5, v5",
        shape,
        vec![(&err(0), 0); 4],
    )?;
    same(&format!("distinct ids among {answers:?}"), ids.len(), 4)
}

#[tokio::test]
async fn init_producer_id_with_a_transactional_id_bumps_the_epoch_at_its_one_coordinator(
) -> Result<()> {
    let (cluster, _) = start(3, &[], 1).await?;
    let clients = clients(&cluster).await?;
    let mut firsts = Vec::new();
    for c in &clients {
        firsts.push(init_pid(c, 4, Some("txn-a"), 60_000).await?);
    }
    let mut errors: Vec<String> = firsts.iter().map(|a| a.0.clone()).collect();
    errors.sort();
    let not_coordinator = err(NotCoordinator.code());
    let expected = vec![err(0), not_coordinator.clone(), not_coordinator];
    same("errors from the 3 brokers", errors, expected)?;
    let coordinator = firsts.iter().position(|a| a.0 == err(0)).unwrap();
    let (_, id, epoch) = firsts[coordinator];
    let second = init_pid(&clients[coordinator], 5, Some("txn-a"), 60_000).await?;
    same(
        "second call at the coordinator",
        second,
        (err(0), id, epoch + 1),
    )?;
    let mut timeouts = Vec::new();
    for timeout in [0, 1_000_000] {
        let answer = init_pid(&clients[coordinator], 5, Some("txn-a"), timeout).await?;
        timeouts.push(answer.0);
    }
    let invalid = err(InvalidTransactionTimeout.code());
    same("timeouts 0 and 1000000 ms", timeouts, vec![invalid; 2])
}

#[tokio::test]
async fn init_producer_id_checks_the_request_before_the_coordinator_as_kafka_does() -> Result<()> {
    // TransactionCoordinator.handleInitProducerId refuses an empty transactional id and a bad
    // timeout before it looks up who owns the transactional id.
    let (cluster, _) = start(3, &[], 1).await?;
    let (mut empty, mut timeouts) = (Vec::new(), Vec::new());
    for c in &clients(&cluster).await? {
        empty.push(init_pid(c, 5, Some(""), 60_000).await?.0);
        timeouts.push(init_pid(c, 5, Some("txn-c"), 0).await?.0);
    }
    let invalid = err(InvalidRequest.code());
    same(
        "empty transactional id at each broker",
        empty,
        vec![invalid; 3],
    )?;
    let invalid = err(InvalidTransactionTimeout.code());
    same("timeout 0 at each broker", timeouts, vec![invalid; 3])
}

#[tokio::test]
async fn offset_for_leader_epoch_answers_end_offsets_and_checks_the_current_epoch() -> Result<()> {
    let (_cluster, client) = start(1, &["epochs"], 1).await?;
    let five: Vec<_> = (0..5).map(|_| record(b"k", b"v")).collect();
    let produced = client.produce("epochs", 0, &five, -1).await?;
    let code = produced.responses[0].partition_responses[0].error_code;
    code_is("producing 5 records", code, None)?;
    for v in [2, 4] {
        // (leader epoch asked, current leader epoch) → (error, epoch, end offset)
        let cases = [
            ((0, -1), (0, 0, 5)),
            ((0, 0), (0, 0, 5)),
            ((7, -1), (0, -1, -1)),
            ((0, 1), (UnknownLeaderEpoch.code(), -1, -1)),
        ];
        for ((epoch, current), (code, found, end)) in cases {
            let partition = OffsetForLeaderPartition::default()
                .with_leader_epoch(epoch)
                .with_current_leader_epoch(current);
            let topic = OffsetForLeaderTopic::default()
                .with_topic(name("epochs"))
                .with_partitions(vec![partition]);
            let request = OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![topic]);
            let a = client.send(request, v).await?.topics[0].partitions[0].clone();
            let what = format!("v{v} epoch {epoch}, current {current}: (error, epoch, end offset)");
            let got = (err(a.error_code), a.leader_epoch, a.end_offset);
            same(&what, got, (err(code), found, end))?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_delete_records_is_journaled_with_each_partitions_offset_and_answer() -> Result<()> {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kmock::journal::summary::DeletedRecords;
    use kmock::journal::RequestSummary;
    let (cluster, client) = start(1, &["t"], 1).await?;
    for _ in 0..3 {
        client.produce("t", 0, &[record(b"k", b"v")], -1).await?;
    }
    let partition = |p: i32, offset: i64| {
        DeleteRecordsPartition::default()
            .with_partition_index(p)
            .with_offset(offset)
    };
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name("t"))
            .with_partitions(vec![partition(0, 2), partition(7, 0)])]);
    let answer = client.send(request, 2).await?;
    same("partitions answered", answer.topics[0].partitions.len(), 2)?;
    common::last_answered(&cluster).await?;
    let journal = cluster.journal();
    let entry = journal
        .api("DeleteRecords")
        .next()
        .ok_or(anyhow::anyhow!("no DeleteRecords entry"))?;
    let Some(RequestSummary::DeleteRecords(s)) = &entry.request else {
        anyhow::bail!("not a DeleteRecords summary: {:?}", entry.request);
    };
    same("timeout", s.timeout_ms, 5_000)?;
    let deleted = |partition, offset, error_code: i16, low_watermark| DeletedRecords {
        topic: "t".to_owned(),
        partition,
        offset,
        error_code: Some(error_code),
        low_watermark,
    };
    same(
        "partitions journaled",
        s.partitions.clone(),
        vec![
            deleted(0, 2, 0, Some(2)),
            deleted(7, 0, UnknownTopicOrPartition.code(), None),
        ],
    )?;
    same(
        "error codes of the entry",
        entry.response.as_ref().map(|r| r.error_codes.clone()),
        Some(vec![UnknownTopicOrPartition.code()]),
    )
}
