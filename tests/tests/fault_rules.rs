//! Fault rules over real sockets: each action does what it says, counts pick the right
//! requests, and every firing is named in the journal.

mod common;

use std::time::Duration;

use kafka_protocol::messages::{GroupId, OffsetCommitRequest};
use kmock::{ApiKey, Cluster, Entry, ResponseError, Rule};
use kmock_client::{record, Client};

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

/// How long to wait for a journal entry that is due at once: catches a hang only.
const HANG_GUARD: Duration = Duration::from_secs(30);

/// The journal entry of the first `api` request, once it was answered.
async fn answered(cluster: &Cluster, api: &str) -> Entry {
    cluster
        .wait_for(|e| e.is(api) && e.response.is_some(), HANG_GUARD)
        .await
        .unwrap()
}

/// µs from the arrival of `entry` to its answer.
fn waited_us(entry: &Entry) -> u64 {
    entry.response.as_ref().expect("answered").at_us - entry.at_us
}

#[tokio::test]
async fn delay_holds_the_request_before_it_is_handled() {
    let (cluster, client) = setup().await;
    let rule = cluster
        .add_rule(Rule::on(ApiKey::Metadata).delay(Duration::from_millis(300)))
        .unwrap();
    client.metadata(Some(&["t"])).await.unwrap();
    assert_eq!(rule.fired(), 1);
    let entry = answered(&cluster, "Metadata").await;
    assert_eq!(entry.faults, ["Metadata#1: delay(300ms)"]);
    assert!(
        waited_us(&entry) >= 300_000,
        "answered {} µs after arrival, within the 300 ms delay",
        waited_us(&entry)
    );
}

#[tokio::test]
async fn delay_response_applies_first_and_holds_only_the_answer() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).delay_response(Duration::from_millis(300)))
        .unwrap();
    let observer = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let records = [record(b"k", b"v")];
    // The observer's Fetch waits (up to 30 s) for the append, and answers when it happens.
    let (produced, seen) = tokio::join!(
        async {
            cluster
                .wait_for(|e| e.is("Fetch"), HANG_GUARD)
                .await
                .unwrap();
            client.produce("t", 0, &records, -1).await
        },
        observer.fetch("t", 0, 0, Duration::from_secs(30))
    );
    produced.unwrap();
    let seen = seen.unwrap().responses[0].partitions[0].records.clone();
    let seen = kmock_client::decode_records(&seen.unwrap_or_default()).unwrap();
    assert_eq!(seen.len(), 1, "the waiting Fetch read the record");
    let (fetch, produce) = (
        answered(&cluster, "Fetch").await,
        answered(&cluster, "Produce").await,
    );
    let (read_at, answered_at) = (
        fetch.response.unwrap().at_us,
        produce.response.as_ref().unwrap().at_us,
    );
    assert!(
        read_at < answered_at,
        "the record was read ({read_at} µs) before the delayed answer was sent \
         ({answered_at} µs): stored first"
    );
    assert!(
        waited_us(&produce) >= 300_000,
        "the Produce was answered {} µs after arrival, within its 300 ms delay",
        waited_us(&produce)
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
    let entry = cluster.journal().api("Produce").next().cloned().unwrap();
    assert_eq!(
        entry.closed.as_deref(),
        Some("fault: disconnect before applying"),
        "the journal says why the connection closed"
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
    assert_eq!(
        entry.closed.as_deref(),
        Some("fault: disconnect after applying"),
        "the journal says why the connection closed"
    );
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
    let records = [record(b"k", b"v")];
    let silenced = client.produce("t", 0, &records, -1);
    tokio::pin!(silenced);
    // Once the Produce has arrived, ApiVersions follows it on the same connection; kmock
    // answers a connection's requests in order, so when ApiVersions is answered the Produce
    // has been handled, and its answer would have come first.
    let versions = tokio::select! {
        biased;
        answer = &mut silenced => panic!("a silenced request got an answer: {answer:?}"),
        versions = async {
            cluster.wait_for(|e| e.is("Produce"), HANG_GUARD).await.unwrap();
            client.api_versions().await
        } => versions.unwrap(),
    };
    assert_eq!(
        versions.error_code, 0,
        "the connection stays open and answers"
    );
    let journal = cluster.journal();
    let produce = journal.api("Produce").next().unwrap();
    let after = journal.api("ApiVersions").last().unwrap();
    assert!(
        produce.seq < after.seq,
        "ApiVersions came after the Produce"
    );
    assert_eq!(produce.response, None, "no answer was written");
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
    let answer = client
        .send(kafka_protocol::messages::MetadataRequest::default(), 1)
        .await
        .unwrap(); // no throttle field in v1
    assert_eq!(answer.brokers.len(), 1);
    let held = answered(&cluster, "Metadata").await;
    assert!(
        waited_us(&held) >= 300_000,
        "the v1 answer was sent {} µs after arrival, within the 300 ms throttle",
        waited_us(&held)
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
    let fired: Vec<usize> = (0..a.len()).filter(|&i| a[i]).collect();
    assert_eq!(
        fired,
        [2, 3, 7, 8, 13, 14, 15, 17, 19, 20, 25, 29, 34, 37],
        "seed 7 fires probability(0.3) on these 14 of 40 requests"
    );
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

/// A commit of offset `offset` of t-0 from outside group management.
fn commit(group: &str, offset: i64) -> OffsetCommitRequest {
    common::requests::offset_commit(group, -1, "", "t", &[(0, offset)])
}

fn fetch_offsets(group: &str) -> kafka_protocol::messages::OffsetFetchRequest {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    kafka_protocol::messages::OffsetFetchRequest::default()
        .with_group_id(GroupId(common::text(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(common::name("t"))
            .with_partition_indexes(vec![0])]))
}
