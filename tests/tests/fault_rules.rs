//! Fault rules over real sockets: each action does what it says, counts pick the right
//! requests, and every firing is named in the journal.

mod common;

use std::time::Duration;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest};
use kmock::{ApiKey, Cluster, ResponseError, Rule};
use kmock_client::{record, Client};
use tokio::time::Instant;

async fn setup() -> (Cluster, Client) {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    (cluster, client)
}

async fn stored(client: &Client) -> usize {
    let answer = client
        .fetch("t", 0, 0, Duration::from_millis(10))
        .await
        .unwrap();
    let records = answer.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default();
    kmock_client::decode_records(&records).unwrap().len()
}

#[tokio::test]
async fn delay_holds_the_request_before_it_is_handled() {
    let (cluster, client) = setup().await;
    let rule = cluster
        .add_rule(Rule::on(ApiKey::Metadata).delay(Duration::from_millis(300)))
        .unwrap();
    let started = Instant::now();
    client.metadata(Some(&["t"])).await.unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(290) && took < Duration::from_secs(2),
        "answered after {took:?}"
    );
    assert_eq!(rule.fired(), 1);
    let entry = cluster.journal().api("Metadata").last().cloned().unwrap();
    assert_eq!(entry.faults, ["Metadata#1: delay(300ms)"]);
}

#[tokio::test]
async fn delay_response_applies_first_and_holds_only_the_answer() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).delay_response(Duration::from_millis(300)))
        .unwrap();
    let observer = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let records = [record(b"k", b"v")];
    let (produced, seen) = tokio::join!(client.produce("t", 0, &records, -1), async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        stored(&observer).await
    });
    produced.unwrap();
    assert_eq!(
        seen, 1,
        "the record is stored before the delayed answer is sent"
    );
}

#[tokio::test]
async fn disconnect_closes_the_connection_and_leaves_the_log_unchanged() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).first(1).disconnect())
        .unwrap();
    let result = client.produce("t", 0, &[record(b"k", b"lost")], -1).await;
    assert!(
        matches!(result, Err(kmock_client::Error::ConnectionClosed)),
        "got {result:?}"
    );
    let other = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    assert_eq!(
        stored(&other).await,
        0,
        "a request dropped before applying leaves nothing"
    );
}

#[tokio::test]
async fn disconnect_after_apply_stores_the_batch_but_the_answer_is_lost() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).first(1).disconnect_after_apply())
        .unwrap();
    let result = client.produce("t", 0, &[record(b"k", b"kept")], -1).await;
    assert!(
        matches!(result, Err(kmock_client::Error::ConnectionClosed)),
        "got {result:?}"
    );
    let other = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    assert_eq!(
        stored(&other).await,
        1,
        "the batch was appended before the connection closed"
    );
    let entry = cluster.journal().api("Produce").next().cloned().unwrap();
    assert_eq!(entry.response, None, "no answer was written");
}

#[tokio::test]
async fn disconnect_after_apply_on_offset_commit_stores_the_commit() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(
            Rule::on(ApiKey::OffsetCommit)
                .group("g")
                .disconnect_after_apply(),
        )
        .unwrap();
    let result = client.send(commit("g", 7), 8).await;
    assert!(
        matches!(result, Err(kmock_client::Error::ConnectionClosed)),
        "got {result:?}"
    );
    let other = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let fetched = other.send(fetch_offsets("g"), 7).await.unwrap();
    assert_eq!(fetched.topics[0].partitions[0].committed_offset, 7);
}

#[tokio::test]
async fn silence_applies_and_never_answers_while_the_connection_stays_open() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).first(1).silence())
        .unwrap();
    let silenced = tokio::time::timeout(
        Duration::from_millis(500),
        client.produce("t", 0, &[record(b"k", b"v")], -1),
    )
    .await;
    assert!(
        silenced.is_err(),
        "a silenced request must get no answer: {silenced:?}"
    );
    assert_eq!(
        client.api_versions().await.unwrap().error_code,
        0,
        "the connection stays open and answers"
    );
    assert_eq!(stored(&client).await, 1, "the silenced batch was applied");
}

#[tokio::test]
async fn error_on_offset_commit_is_answered_per_partition_and_not_applied() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(
            Rule::on(ApiKey::OffsetCommit)
                .first(1)
                .error(ResponseError::NotCoordinator),
        )
        .unwrap();
    let answer = client.send(commit("g", 5), 8).await.unwrap();
    assert_eq!(
        answer.topics[0].partitions[0].error_code,
        ResponseError::NotCoordinator.code()
    );
    let fetched = client.send(fetch_offsets("g"), 7).await.unwrap();
    assert_eq!(
        fetched.topics[0].partitions[0].committed_offset, -1,
        "the failed commit stored nothing"
    );
    let answer = client.send(commit("g", 5), 8).await.unwrap();
    assert_eq!(
        answer.topics[0].partitions[0].error_code, 0,
        "first(1): the second commit goes through"
    );
}

#[tokio::test]
async fn error_on_metadata_is_answered_per_topic_beside_the_brokers() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Metadata).error(ResponseError::UnknownTopicOrPartition))
        .unwrap();
    let answer = client.metadata(Some(&["t"])).await.unwrap();
    assert_eq!(
        answer.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    // Kafka lists the brokers beside a topic's error; a client must find them there.
    let brokers: Vec<i32> = answer.brokers.iter().map(|b| b.node_id.0).collect();
    assert_eq!((brokers, answer.controller_id.0), (vec![1], 1));
}

#[tokio::test]
async fn throttle_sets_the_throttle_time_of_a_normal_answer() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).throttle(Duration::from_millis(250)))
        .unwrap();
    let answer = client
        .produce("t", 0, &[record(b"k", b"v")], -1)
        .await
        .unwrap();
    assert_eq!(answer.throttle_time_ms, 250);
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
}

#[tokio::test]
async fn throttle_holds_the_answer_at_versions_without_a_throttle_field() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Metadata).throttle(Duration::from_millis(300)))
        .unwrap();
    let started = Instant::now();
    client
        .send(kafka_protocol::messages::MetadataRequest::default(), 1)
        .await
        .unwrap(); // no throttle field in v1
    assert!(
        started.elapsed() >= Duration::from_millis(290),
        "answered after {:?}",
        started.elapsed()
    );
    let answer = client
        .send(kafka_protocol::messages::MetadataRequest::default(), 3)
        .await
        .unwrap();
    assert_eq!(answer.throttle_time_ms, 300, "v3 carries the throttle time");
}

#[tokio::test]
async fn nth_fires_on_the_nth_matching_request_only() {
    let (cluster, client) = setup().await;
    let rule = cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .topic("t")
                .nth(3)
                .error(ResponseError::NotLeaderOrFollower),
        )
        .unwrap();
    let mut codes = Vec::new();
    for _ in 0..5 {
        client.metadata(Some(&["t"])).await.unwrap(); // does not match: not a Produce
        let answer = client
            .produce("t", 0, &[record(b"k", b"v")], -1)
            .await
            .unwrap();
        codes.push(answer.responses[0].partition_responses[0].error_code);
    }
    assert_eq!(codes, [0, 0, 6, 0, 0]);
    assert_eq!((rule.matched(), rule.fired()), (5, 1));
}

/// Which of 40 produce requests a `probability(0.3)` rule fires on, with `seed`.
async fn schedule(seed: u64) -> Vec<bool> {
    let cluster = Cluster::builder()
        .topic("t", 1)
        .seed(seed)
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .probability(0.3)
                .error(ResponseError::RequestTimedOut),
        )
        .unwrap();
    let mut fired = Vec::new();
    for _ in 0..40 {
        let answer = client
            .produce("t", 0, &[record(b"k", b"v")], -1)
            .await
            .unwrap();
        fired.push(answer.responses[0].partition_responses[0].error_code != 0);
    }
    fired
}

#[tokio::test]
async fn the_same_seed_gives_the_same_schedule() {
    let (a, b, other) = (schedule(7).await, schedule(7).await, schedule(8).await);
    assert_eq!(a, b, "same seed, same schedule");
    assert_ne!(a, other, "another seed, another schedule (40 draws)");
    let count = a.iter().filter(|f| **f).count();
    assert!((4..=20).contains(&count), "about 30% of 40 fired: {count}");
}

#[tokio::test]
async fn verify_reports_a_rule_that_fired_outside_its_expectation() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .named("slow-produce")
                .delay(Duration::from_millis(1))
                .expect(2..),
        )
        .unwrap();
    client
        .produce("t", 0, &[record(b"k", b"v")], -1)
        .await
        .unwrap();
    let err = cluster.verify().unwrap_err().to_string();
    assert!(
        err.contains("slow-produce expected to fire 2.. times, fired 1 times"),
        "{err}"
    );
    client
        .produce("t", 0, &[record(b"k", b"v")], -1)
        .await
        .unwrap();
    cluster.verify().unwrap();
}

#[tokio::test]
async fn a_cluster_whose_verify_was_seen_is_not_checked_again_when_dropped() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .delay(Duration::from_millis(1))
                .expect(2..),
        )
        .unwrap();
    client
        .produce("t", 0, &[record(b"k", b"v")], -1)
        .await
        .unwrap();
    assert!(cluster.verify().is_err(), "one firing of an expected 2..");
    drop(cluster); // the test saw the verdict: no second one, as a panic, on drop
}

#[tokio::test]
#[should_panic(expected = "kmock fault expectations not met")]
async fn dropping_a_cluster_with_an_unmet_expectation_panics() {
    let cluster = Cluster::builder().start().await.unwrap();
    cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .named("never")
                .disconnect()
                .expect(1),
        )
        .unwrap();
    drop(cluster);
}

#[tokio::test]
async fn a_rule_without_an_action_is_refused() {
    let cluster = Cluster::builder().start().await.unwrap();
    let err = cluster
        .add_rule(Rule::on(ApiKey::Produce))
        .unwrap_err()
        .to_string();
    assert!(err.contains("no action"), "{err}");
}

fn commit(group: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(common::text(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(common::name("t"))
            .with_partitions(vec![
                OffsetCommitRequestPartition::default().with_committed_offset(offset)
            ])])
}

fn fetch_offsets(group: &str) -> kafka_protocol::messages::OffsetFetchRequest {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    kafka_protocol::messages::OffsetFetchRequest::default()
        .with_group_id(GroupId(common::text(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(common::name("t"))
            .with_partition_indexes(vec![0])]))
}
