//! `stuck-client` over real sockets: a client sending a request again after an error whose
//! recovery step Kafka's protocol defines, without taking it, is named once it has done so
//! more than `stuck_after` times; taking the step before each retry, on any connection of the
//! same client id, is not; nor is a client that takes it late but within `stuck_for` of the
//! error; a reconnect does not reset the count.

mod common;

use std::time::Duration;

use common::{commit_request, idempotent_produce};
use kafka_protocol::messages::{FindCoordinatorRequest, InitProducerIdRequest};
use kafka_protocol::protocol::StrBytes;
use kmock::check::Severity;
use kmock::{ApiKey, Checks, Cluster, Report, ResponseError, Rule};
use kmock_client::{record, Client};

/// Retries of every scripted client below: one more than the default limit (10).
const RETRIES: usize = 11;

/// A cluster whose every OffsetCommit to group `moved` is answered NOT_COORDINATOR, as after
/// its coordinator moved away.
async fn moved_coordinator() -> Cluster {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    cluster
        .add_rule(
            Rule::on(ApiKey::OffsetCommit)
                .group("moved")
                .error(ResponseError::NotCoordinator),
        )
        .unwrap();
    cluster
}

async fn connect(cluster: &Cluster, client_id: &str) -> Client {
    Client::connect_with_client_id(cluster.brokers()[0].addr, client_id)
        .await
        .unwrap()
}

/// Commits to `moved` once, refused NOT_COORDINATOR.
async fn refused_commit(client: &Client, offset: i64) {
    let answer = client
        .send(commit_request("moved", "t", offset), 8)
        .await
        .unwrap();
    assert_eq!(
        answer.topics[0].partitions[0].error_code, 16,
        "NOT_COORDINATOR"
    );
}

async fn find_coordinator(client: &Client) {
    let request = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("moved"));
    let answer = client.send(request, 3).await.unwrap();
    assert_eq!(answer.error_code, 0, "FindCoordinator");
}

fn stuck(report: &Report) -> Vec<&kmock::Violation> {
    report.of_kind("stuck-client").collect()
}

#[tokio::test]
async fn a_commit_refused_not_coordinator_and_sent_again_without_find_coordinator_is_a_stuck_client(
) {
    let cluster = moved_coordinator().await;
    let client = connect(&cluster, "app").await;
    for offset in 0..=RETRIES as i64 {
        refused_commit(&client, offset).await;
    }
    let commits = cluster.journal().offset_commits();
    let (first, last) = (&commits[0].entry, &commits[RETRIES].entry);
    let report = cluster.check(&Checks::default());
    let found = stuck(&report);
    assert_eq!(found.len(), 1, "{report}");
    assert_eq!(found[0].severity, Severity::Violation);
    assert_eq!(found[0].key, "client \"app\" OffsetCommit group moved");
    assert_eq!(
        found[0].entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [first.seq, last.seq]
    );
    assert_eq!(
        found[0].message,
        format!(
            "OffsetCommit seq {} (conn {}, broker 1) from client \"app\" for group moved was answered NOT_COORDINATOR (16); the client sent it {RETRIES} more times (the last seq {}, conn {}) without a FindCoordinator request, the recovery step Kafka's protocol defines",
            first.seq, first.conn, last.seq, last.conn
        )
    );
    // The limit is an option: RETRIES retries are within a limit of RETRIES.
    cluster
        .check(&Checks::default().stuck_after(RETRIES))
        .assert_clean();
}

#[tokio::test]
async fn a_client_that_takes_the_step_late_but_soon_is_not_stuck_unless_the_window_is_shorter() {
    let cluster = moved_coordinator().await;
    let client = connect(&cluster, "app").await;
    for offset in 0..=RETRIES as i64 {
        refused_commit(&client, offset).await;
    }
    find_coordinator(&client).await;
    let entries = cluster.journal();
    let commits = entries.offset_commits();
    let answered = commits[0].entry.response.as_ref().expect("answered").at_us;
    let lookup = entries.entries().last().expect("the FindCoordinator");
    assert!(lookup.is("FindCoordinator"));
    // Recovered within the default window (5 s; this run takes milliseconds): not stuck.
    cluster.check(&Checks::default()).assert_clean();
    // With a window the recovery missed, named with how late the step came.
    let window = Duration::from_micros(lookup.at_us - answered);
    let report = cluster.check(&Checks::default().stuck_for(window));
    let found = stuck(&report);
    assert_eq!(found.len(), 1, "{report}");
    assert!(
        found[0].message.ends_with(&format!(
            "without a FindCoordinator request, the recovery step Kafka's protocol defines; it took the step only {} ms after the error",
            window.as_millis()
        )),
        "{}",
        found[0].message
    );
    // Just past the recovery: clean.
    cluster
        .check(&Checks::default().stuck_for(window + Duration::from_micros(1)))
        .assert_clean();
}

#[tokio::test]
async fn a_client_that_finds_the_coordinator_before_each_retry_is_not_stuck_on_any_connection() {
    let cluster = moved_coordinator().await;
    let client = connect(&cluster, "app").await;
    let lookups = connect(&cluster, "app").await;
    for offset in 0..=RETRIES as i64 {
        refused_commit(&client, offset).await;
        // On the commits' connection, then on another of the same client id.
        find_coordinator(if offset % 2 == 0 { &client } else { &lookups }).await;
    }
    cluster
        .check(&Checks::default().stuck_after(0))
        .assert_clean();
}

#[tokio::test]
async fn another_client_finding_the_coordinator_does_not_unstick_this_one() {
    let cluster = moved_coordinator().await;
    let client = connect(&cluster, "app").await;
    let other = connect(&cluster, "other-app").await;
    for offset in 0..=RETRIES as i64 {
        refused_commit(&client, offset).await;
        find_coordinator(&other).await;
    }
    let report = cluster.check(&Checks::default());
    assert_eq!(stuck(&report).len(), 1, "{report}");
}

#[tokio::test]
async fn retries_on_a_new_connection_of_the_same_client_count_with_the_old_ones() {
    let cluster = moved_coordinator().await;
    let before = connect(&cluster, "app").await;
    for offset in 0..6 {
        refused_commit(&before, offset).await;
    }
    drop(before);
    let after = connect(&cluster, "app").await;
    for offset in 6..=RETRIES as i64 {
        refused_commit(&after, offset).await;
    }
    let report = cluster.check(&Checks::default());
    let found = stuck(&report);
    assert_eq!(found.len(), 1, "{report}");
    assert!(
        found[0]
            .message
            .contains(&format!("sent it {RETRIES} more times")),
        "{}",
        found[0].message
    );
    assert_ne!(found[0].entries[0].conn, found[0].entries[1].conn);
}

#[tokio::test]
async fn a_produce_to_a_moved_leader_sent_again_without_metadata_is_stuck_and_with_it_is_not() {
    let cluster = Cluster::builder()
        .brokers(2)
        .topic("t", 2)
        .start()
        .await
        .unwrap();
    let old = cluster.leader("t", 0).unwrap();
    let new = old % 2 + 1;
    cluster.move_leader("t", 0, new).unwrap();
    let addr = cluster.brokers()[(old - 1) as usize].addr;
    let stuck_producer = Client::connect_with_client_id(addr, "stale").await.unwrap();
    let careful = Client::connect_with_client_id(addr, "careful")
        .await
        .unwrap();
    for _ in 0..4 {
        for client in [&stuck_producer, &careful] {
            let answer = client
                .produce("t", 0, &[record(b"k", b"v")], -1)
                .await
                .unwrap();
            let code = answer.responses[0].partition_responses[0].error_code;
            assert_eq!(code, 6, "NOT_LEADER_OR_FOLLOWER");
        }
        careful.metadata(Some(&["t"])).await.unwrap();
    }
    let report = cluster.check(&Checks::default().stuck_after(2));
    let found = stuck(&report);
    assert_eq!(found.len(), 1, "{report}");
    assert_eq!(found[0].key, "client \"stale\" Produce t-0");
    assert!(
        found[0]
            .message
            .contains("was answered NOT_LEADER_OR_FOLLOWER (6); the client sent it 3 more times")
            && found[0].message.contains("without a Metadata request"),
        "{}",
        found[0].message
    );
}

#[tokio::test]
async fn a_batch_refused_out_of_order_is_stuck_until_a_new_epoch() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let client = connect(&cluster, "producer").await;
    let code = |answer: kafka_protocol::messages::ProduceResponse| {
        answer.responses[0].partition_responses[0].error_code
    };
    let stored = client.send(idempotent_produce("t", 0, 7, 0, 0, 5), 9).await;
    assert_eq!(code(stored.unwrap()), 0);
    // Sequence 10 after 0..4: OUT_OF_ORDER_SEQUENCE_NUMBER, sent three times in all.
    for _ in 0..3 {
        let refused = client
            .send(idempotent_produce("t", 0, 7, 0, 10, 1), 9)
            .await;
        assert_eq!(code(refused.unwrap()), 45);
    }
    let report = cluster.check(&Checks::only(["stuck-client"]).unwrap().stuck_after(1));
    let found = stuck(&report);
    assert_eq!(found.len(), 1, "{report}");
    assert_eq!(
        found[0].key,
        "client \"producer\" Produce producer 7 epoch 0 t-0"
    );
    assert!(
        found[0]
            .message
            .contains("without a new producer epoch or id (InitProducerId)"),
        "{}",
        found[0].message
    );
    // After an InitProducerId (the step, taken), the same refusals start a count of their own.
    let init = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    client.send(init, 4).await.unwrap();
    for _ in 0..2 {
        let refused = client
            .send(idempotent_produce("t", 0, 7, 0, 10, 1), 9)
            .await;
        assert_eq!(code(refused.unwrap()), 45);
    }
    // The step came at once: named only when any recovery counts as late.
    let late = Checks::only(["stuck-client"])
        .unwrap()
        .stuck_after(1)
        .stuck_for(Duration::ZERO);
    let report = cluster.check(&late);
    assert_eq!(
        stuck(&report).len(),
        1,
        "only the count before the step:\n{report}"
    );
    assert!(
        stuck(&report)[0]
            .message
            .contains("; it took the step only "),
        "{report}"
    );
}

#[test]
fn a_scenario_sets_the_limit_beside_its_checks() {
    let scenario =
        kmock::Scenario::parse("checks: [stuck-client]\nstuck_after: 3\nstuck_for: 250ms\n")
            .unwrap();
    let checks = scenario.checks().unwrap().expect("checks named");
    assert_eq!(
        (
            checks.runs("stuck-client"),
            checks.stuck_after,
            checks.stuck_for
        ),
        (true, 3, Duration::from_millis(250))
    );
    let default = kmock::Scenario::parse("checks: [all]\n").unwrap();
    let default = default.checks().unwrap().unwrap();
    assert_eq!(
        (default.stuck_after, default.stuck_for),
        (10, Duration::from_secs(5))
    );
}

#[tokio::test]
async fn an_admin_request_polled_for_a_missing_topic_is_not_judged() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::DescribeConfigsRequest;
    let cluster = Cluster::builder().start().await.unwrap();
    let client = connect(&cluster, "admin").await;
    for _ in 0..=RETRIES {
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("not-yet")),
        ]);
        let answer = client.send(request, 4).await.unwrap();
        assert_eq!(
            answer.results[0].error_code, 3,
            "UNKNOWN_TOPIC_OR_PARTITION"
        );
    }
    cluster
        .check(&Checks::default().stuck_after(0))
        .assert_clean();
}
