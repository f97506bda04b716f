//! The produce-sequence checks judge outcomes as Kafka does: a batch is a retry only when it
//! repeats one of the last five batches stored (Kafka's `ProducerStateEntry.findDuplicateBatch`),
//! and an anomaly kmock refused with OUT_OF_ORDER_SEQUENCE_NUMBER is a warning when the
//! producer recovered afterwards (a new epoch, or a new producer id of the same client), a
//! violation when it did not.

mod common;

use common::idempotent::idempotent_batch;
use kmock::check::Severity;
use kmock::{Checks, Cluster, Report};
use kmock_client::Client;

/// OUT_OF_ORDER_SEQUENCE_NUMBER.
const OUT_OF_ORDER: i16 = 45;

/// `(producer id, epoch, first sequence, record count)` of a batch to t-0.
type Batch = (i64, i16, i32, usize);

async fn setup() -> (Cluster, Client) {
    let cluster = Cluster::builder()
        .topic("t", 1)
        .topic("u", 1)
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    (cluster, client)
}

/// Sends each batch in turn; the error code kmock answered for each.
async fn send(client: &Client, batches: &[Batch]) -> Vec<i16> {
    let mut answers = Vec::new();
    for &(producer_id, epoch, first, count) in batches {
        let request = idempotent_batch("t", producer_id, epoch, first, count);
        let answer = client.send(request, 9).await.unwrap();
        answers.push(answer.responses[0].partition_responses[0].error_code);
    }
    answers
}

/// `(kind, severity)` of every finding, in report order.
fn findings(report: &Report) -> Vec<(&str, Severity)> {
    report
        .violations
        .iter()
        .map(|v| (v.kind.as_str(), v.severity))
        .collect()
}

/// Six two-record batches of producer 7, epoch 0: sequences 0..12.
const SIX_BATCHES: [Batch; 6] = [
    (7, 0, 0, 2),
    (7, 0, 2, 2),
    (7, 0, 4, 2),
    (7, 0, 6, 2),
    (7, 0, 8, 2),
    (7, 0, 10, 2),
];

#[tokio::test]
async fn a_sequence_restarted_at_0_after_five_batches_is_no_retry_but_a_reorder() {
    let (cluster, client) = setup().await;
    send(&client, &SIX_BATCHES).await;
    // The first batch again: five others were stored since, so Kafka no longer remembers it.
    assert_eq!(send(&client, &[(7, 0, 0, 2)]).await, [OUT_OF_ORDER]);
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    assert_eq!(
        findings(&report),
        [("sequence-reorder", Severity::Violation)],
        "{report}"
    );
    let message = &report.violations[0].message;
    assert!(
        message.contains("restarted its sequence at 0 without a new epoch")
            && message.contains("never recovered"),
        "{message}"
    );
}

#[tokio::test]
async fn a_retry_of_one_of_the_last_five_batches_is_answered_none_and_clean() {
    let (cluster, client) = setup().await;
    send(&client, &SIX_BATCHES).await;
    // The second batch is the oldest of the five remembered: a duplicate, not stored again.
    let retry = idempotent_batch("t", 7, 0, 2, 2);
    let answer = client.send(retry, 9).await.unwrap();
    let partition = &answer.responses[0].partition_responses[0];
    assert_eq!((partition.error_code, partition.base_offset), (0, 2));
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    assert_eq!(findings(&report), [], "{report}");
}

#[tokio::test]
async fn an_anomaly_refused_then_a_new_epoch_from_0_is_a_warning() {
    // (what the producer sent, what kmock answered, the finding)
    let cases: [(&[Batch], &[i16], &str); 3] = [
        // A gap, then the epoch bumped as librdkafka >= 1.9 does (KIP-360).
        (
            &[(7, 0, 0, 2), (7, 0, 5, 1), (7, 1, 0, 1)],
            &[0, OUT_OF_ORDER, 0],
            "sequence-gap",
        ),
        // A re-batched retry, then a new epoch.
        (
            &[(7, 0, 0, 4), (7, 0, 2, 4), (7, 1, 0, 4)],
            &[0, OUT_OF_ORDER, 0],
            "sequence-overlap",
        ),
        // A new epoch not from 0, then a further one from 0.
        (
            &[(7, 0, 0, 2), (7, 1, 3, 1), (7, 2, 0, 1)],
            &[0, OUT_OF_ORDER, 0],
            "epoch-not-reset",
        ),
    ];
    for (batches, answers, kind) in cases {
        let (cluster, client) = setup().await;
        assert_eq!(send(&client, batches).await, answers, "{batches:?}");
        cluster.settled().await;
        let report = cluster.check(&Checks::default());
        assert_eq!(
            findings(&report),
            [(kind, Severity::Warning)],
            "{batches:?}:\n{report}"
        );
        assert!(report.is_clean(), "{report}");
        let finding = &report.violations[0];
        assert!(
            finding.message.contains("the producer recovered"),
            "{}",
            finding.message
        );
        let recovery = cluster.journal().api("Produce").last().unwrap().seq;
        assert_eq!(
            finding.entries.last().map(|e| e.seq),
            Some(recovery),
            "{finding:?}"
        );
    }
}

#[tokio::test]
async fn a_gap_refused_then_a_new_producer_id_of_the_same_client_is_a_warning() {
    let (cluster, client) = setup().await;
    let batches = [(7, 0, 0, 2), (7, 0, 5, 1), (8, 0, 0, 1)];
    assert_eq!(send(&client, &batches).await, [0, OUT_OF_ORDER, 0]);
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    assert_eq!(
        findings(&report),
        [("sequence-gap", Severity::Warning)],
        "{report}"
    );
    assert!(
        report.violations[0].message.contains("as producer 8"),
        "{report}"
    );
}

#[tokio::test]
async fn a_new_producer_id_of_another_client_is_no_recovery() {
    let (cluster, client) = setup().await;
    assert_eq!(
        send(&client, &[(7, 0, 0, 2), (7, 0, 5, 1)]).await,
        [0, OUT_OF_ORDER]
    );
    let addr = cluster.brokers()[0].addr;
    let other = Client::connect_with_client_id(addr, "another-app")
        .await
        .unwrap();
    assert_eq!(send(&other, &[(8, 0, 0, 1)]).await, [0]);
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    assert_eq!(
        findings(&report),
        [("sequence-gap", Severity::Violation)],
        "{report}"
    );
}

#[tokio::test]
async fn a_producer_refused_over_and_over_is_one_violation_counting_the_refusals() {
    let (cluster, client) = setup().await;
    // Sarama v1.23.0 after a reconnect: every later batch continues past the gap.
    let batches = [(7, 0, 0, 2), (7, 0, 5, 1), (7, 0, 6, 1), (7, 0, 7, 1)];
    assert_eq!(
        send(&client, &batches).await,
        [0, OUT_OF_ORDER, OUT_OF_ORDER, OUT_OF_ORDER]
    );
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    assert_eq!(
        findings(&report),
        [("sequence-gap", Severity::Violation)],
        "{report}"
    );
    let finding = &report.violations[0];
    assert!(
        finding
            .message
            .contains("and 2 later batches of it the same way")
            && finding.message.contains("never recovered"),
        "{}",
        finding.message
    );
    let produces: Vec<u64> = cluster.journal().api("Produce").map(|e| e.seq).collect();
    let named: Vec<u64> = finding.entries.iter().map(|e| e.seq).collect();
    // The last stored batch, the first refusal and the last.
    assert_eq!(named, [produces[0], produces[1], produces[3]]);
}

#[tokio::test]
async fn a_new_epoch_on_another_partition_is_no_recovery_of_this_one() {
    let (cluster, client) = setup().await;
    assert_eq!(
        send(&client, &[(7, 0, 0, 2), (7, 0, 5, 1)]).await,
        [0, OUT_OF_ORDER]
    );
    // Producer 7 goes on with epoch 1 on u-0 only: t-0 stays refused.
    let elsewhere = idempotent_batch("u", 7, 1, 0, 1);
    let answer = client.send(elsewhere, 9).await.unwrap();
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    assert_eq!(
        findings(&report),
        [("sequence-gap", Severity::Violation)],
        "{report}"
    );
    assert_eq!(report.violations[0].key, "producer 7 t-0");
}
