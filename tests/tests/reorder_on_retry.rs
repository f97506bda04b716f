//! `reorder-on-retry` on the wire, for producers without a producer id: a refused or lost
//! batch resent after a later one was stored is named with the three requests; a resend
//! before anything later, a batch in between not stamped after the refused one, a resend of a
//! batch the broker had stored, and another producer's batch sharing the client id are not. And `inflight-exceeded` for such producers: held to a
//! limit set, not to the idempotent default.

use std::time::Duration;

use kafka_protocol::records::Record;
use kmock::{ApiKey, Checks, Cluster, Report, ResponseError, Rule};
use kmock_client::{record, Client};

const TOPIC: &str = "t";
/// NOT_LEADER_OR_FOLLOWER.
const NOT_LEADER: i16 = 6;
/// A timestamp well inside what Kafka accepts: in the past (`message.timestamp.after.max.ms`
/// refuses more than an hour ahead).
const T0: i64 = 1_700_000_000_000;

/// Records `first..first + n`, record i stamped `T0 + i` ms with value `i`: a resend of the
/// same records carries the same timestamps.
fn records(first: i64, n: i64) -> Vec<Record> {
    (first..first + n)
        .map(|i| Record {
            timestamp: T0 + i,
            ..record(b"k", i.to_string().as_bytes())
        })
        .collect()
}

async fn cluster() -> Cluster {
    Cluster::builder().topic(TOPIC, 1).start().await.unwrap()
}

async fn connect(cluster: &Cluster, client_id: &str) -> Client {
    Client::connect_with_client_id(cluster.brokers()[0].addr, client_id)
        .await
        .unwrap()
}

/// Sends `records` to t-0 with acks=all; the partition's error code.
async fn produce(client: &Client, records: &[Record]) -> i16 {
    let answer = client.produce(TOPIC, 0, records, -1).await.unwrap();
    answer.responses[0].partition_responses[0].error_code
}

fn only(names: &[&str]) -> Checks {
    Checks::only(names).unwrap()
}

fn retries(report: &Report) -> Vec<Vec<u64>> {
    report
        .of_kind("reorder-on-retry")
        .map(|v| v.entries.iter().map(|e| e.seq).collect())
        .collect()
}

/// The seq of each Produce in the journal, in arrival order.
fn produce_seqs(cluster: &Cluster) -> Vec<u64> {
    cluster.journal().api("Produce").map(|e| e.seq).collect()
}

#[tokio::test]
async fn a_refused_batch_resent_after_a_later_one_is_a_reorder_on_retry() {
    let cluster = cluster().await;
    cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .nth(1)
                .error(ResponseError::NotLeaderOrFollower),
        )
        .unwrap();
    let client = connect(&cluster, "p").await;
    assert_eq!(produce(&client, &records(0, 3)).await, NOT_LEADER);
    assert_eq!(produce(&client, &records(3, 2)).await, 0, "later records");
    assert_eq!(produce(&client, &records(0, 3)).await, 0, "the resend");
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    let seqs = produce_seqs(&cluster);
    assert_eq!(retries(&report), std::slice::from_ref(&seqs), "{report}");
    assert_eq!(
        report.count(kmock::check::Severity::Violation),
        1,
        "{report}"
    );
    let v = report.of_kind("reorder-on-retry").next().unwrap();
    assert_eq!(v.key, "client p t-0");
    assert_eq!(
        v.message,
        format!(
            "Produce seq {} (conn 1) of client p to t-0 was refused with NOT_LEADER_OR_FOLLOWER (6); seq {} (conn 1), sent after it, was stored at offset 0 before seq {} (conn 1) stored its records again at offset 2: the partition holds them out of produce order",
            seqs[0], seqs[1], seqs[2]
        )
    );
}

#[tokio::test]
async fn a_refused_batch_resent_before_anything_later_is_in_order() {
    let cluster = cluster().await;
    cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .nth(1)
                .error(ResponseError::NotLeaderOrFollower),
        )
        .unwrap();
    let client = connect(&cluster, "p").await;
    assert_eq!(produce(&client, &records(0, 3)).await, NOT_LEADER);
    // The resend re-batched with the next records, as Sarama does, then more.
    assert_eq!(produce(&client, &records(0, 5)).await, 0);
    assert_eq!(produce(&client, &records(5, 2)).await, 0);
    cluster.settled().await;
    cluster.check(&Checks::default()).assert_clean();
}

#[tokio::test]
async fn a_batch_in_between_not_produced_after_the_refused_one_is_no_verdict() {
    let cluster = cluster().await;
    cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .nth(1)
                .error(ResponseError::NotLeaderOrFollower),
        )
        .unwrap();
    let client = connect(&cluster, "p").await;
    assert_eq!(produce(&client, &records(10, 3)).await, NOT_LEADER);
    // Stamped before the refused records (an application's own event times): the journal
    // cannot tell it was produced later.
    assert_eq!(produce(&client, &records(0, 2)).await, 0);
    assert_eq!(produce(&client, &records(10, 3)).await, 0);
    cluster.settled().await;
    cluster.check(&only(&["reorder-on-retry"])).assert_clean();
}

#[tokio::test]
async fn a_batch_lost_with_its_connection_resent_on_a_new_one_after_later_records_is_named() {
    let cluster = cluster().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).nth(1).disconnect())
        .unwrap();
    let first = connect(&cluster, "p").await;
    assert!(
        first.produce(TOPIC, 0, &records(0, 3), -1).await.is_err(),
        "dropped with its connection before it was applied"
    );
    // The producer reconnects: the same client id on a new connection.
    let second = connect(&cluster, "p").await;
    assert_eq!(produce(&second, &records(3, 2)).await, 0);
    assert_eq!(produce(&second, &records(0, 3)).await, 0);
    cluster.settled().await;
    let report = cluster.check(&only(&["reorder-on-retry"]));
    assert_eq!(retries(&report), [produce_seqs(&cluster)], "{report}");
    let v = report.of_kind("reorder-on-retry").next().unwrap();
    assert!(
        v.message.contains("got no answer (its connection closed)"),
        "{}",
        v.message
    );
}

#[tokio::test]
async fn a_resend_of_a_batch_stored_before_its_answer_was_lost_is_no_reorder() {
    let cluster = cluster().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).nth(1).disconnect_after_apply())
        .unwrap();
    let first = connect(&cluster, "p").await;
    assert!(first.produce(TOPIC, 0, &records(0, 3), -1).await.is_err());
    let second = connect(&cluster, "p").await;
    assert_eq!(produce(&second, &records(3, 2)).await, 0);
    // A duplicate in the log (the records were in place first), not a reorder.
    assert_eq!(produce(&second, &records(0, 3)).await, 0);
    cluster.settled().await;
    cluster.check(&only(&["reorder-on-retry"])).assert_clean();
}

#[tokio::test]
async fn another_producer_with_the_same_client_id_is_not_the_same_producer() {
    let cluster = cluster().await;
    cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .nth(1)
                .error(ResponseError::NotLeaderOrFollower),
        )
        .unwrap();
    let (a, b) = (
        connect(&cluster, "app").await,
        connect(&cluster, "app").await,
    );
    assert_eq!(produce(&a, &records(0, 3)).await, NOT_LEADER);
    // b, a producer of its own, stores records stamped later; a goes on producing on its
    // connection and resends.
    assert_eq!(produce(&b, &records(100, 2)).await, 0);
    assert_eq!(produce(&a, &records(0, 3)).await, 0);
    cluster.settled().await;
    cluster.check(&only(&["reorder-on-retry"])).assert_clean();
}

#[tokio::test]
async fn a_non_idempotent_producer_is_held_to_a_limit_set_not_to_the_default() {
    let cluster = cluster().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).delay(Duration::from_millis(50)))
        .unwrap();
    let client = connect(&cluster, "p").await;
    // Four requests pipelined on one connection, each held 50 ms.
    let batches: Vec<Vec<Record>> = (0..4).map(|i| records(i, 1)).collect();
    let sends = batches.iter().map(|b| client.produce(TOPIC, 0, b, -1));
    for answer in futures::future::join_all(sends).await {
        assert_eq!(
            answer.unwrap().responses[0].partition_responses[0].error_code,
            0
        );
    }
    // No limit set: Kafka sets none without idempotence.
    cluster.settled().await;
    cluster.check(&Checks::default()).assert_clean();
    // The client's limit, 2: the third and the fourth went over it.
    cluster.settled().await;
    let report = cluster.check(&only(&["inflight-exceeded"]).max_in_flight(2));
    let over: Vec<usize> = report
        .of_kind("inflight-exceeded")
        .map(|v| v.entries.len())
        .collect();
    assert_eq!(
        over,
        [3, 4],
        "two then three outstanding, plus the new one:\n{report}"
    );
    cluster
        .check(&only(&["inflight-exceeded"]).max_in_flight(4))
        .assert_clean();
}
