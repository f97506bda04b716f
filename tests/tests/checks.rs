//! The ordering checks name each violation a client really put on the wire, and stay silent
//! for correct traffic.

mod common;

use std::time::Duration;

use common::idempotent::idempotent_batch;
use common::requests::offset_commit;
use kafka_protocol::messages::{OffsetCommitRequest, ProduceRequest};
use kmock::{ApiKey, Checks, Cluster, Report, Rule};
use kmock_client::{record, Client};

async fn setup() -> (Cluster, Client) {
    let cluster = Cluster::builder().topic("t", 2).start().await.unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    (cluster, client)
}

/// A commit from outside group management of `(partition, offset)`s of topic t.
fn commit(offsets: &[(i32, i64)]) -> OffsetCommitRequest {
    offset_commit("billing", -1, "", "t", offsets)
}

/// An idempotent batch of `count` records from producer 7 at `epoch`, from `first`, to t-0.
fn batch(epoch: i16, first: i32, count: usize) -> ProduceRequest {
    idempotent_batch("t", 7, epoch, first, count)
}

fn kinds(report: &Report) -> Vec<&str> {
    report.violations.iter().map(|v| v.kind.as_str()).collect()
}

#[tokio::test]
async fn a_stale_commit_arriving_after_a_newer_one_is_an_offset_commit_regression() {
    let (cluster, a) = setup().await;
    let b = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    // The motivating bug: B's {p0→12, p1→21} arrives, then A's stale {p0→11}.
    b.send(commit(&[(0, 12), (1, 21)]), 8).await.unwrap();
    a.send(commit(&[(0, 11)]), 8).await.unwrap();
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    assert_eq!(kinds(&report), ["offset-commit-regression"], "{report}");
    let v = &report.violations[0];
    assert_eq!(v.key, "billing/t-0");
    let seqs: Vec<u64> = v.entries.iter().map(|e| e.seq).collect();
    let commits = cluster.journal().offset_commits();
    assert_eq!(
        seqs,
        [commits[0].entry.seq, commits[2].entry.seq],
        "names both entries"
    );
    assert!(
        v.message.contains("to 11 after seq") && v.message.contains("had set it to 12"),
        "{}",
        v.message
    );
}

#[tokio::test]
async fn commits_that_only_move_forward_are_clean() {
    let (cluster, client) = setup().await;
    for offset in [3, 5, 5, 9] {
        client
            .send(commit(&[(0, offset), (1, offset * 2)]), 8)
            .await
            .unwrap();
    }
    cluster.settled().await;
    cluster.check(&Checks::default()).assert_clean();
}

#[tokio::test]
async fn an_intentional_reset_can_be_allowed() {
    let (cluster, client) = setup().await;
    client.send(commit(&[(0, 12)]), 8).await.unwrap();
    client.send(commit(&[(0, 0)]), 8).await.unwrap();
    cluster.settled().await;
    assert!(!cluster.check(&Checks::default()).is_clean());
    cluster
        .check(&Checks::default().allow_regression("billing", "t", 0))
        .assert_clean();
}

/// `(producer epoch, first sequence, record count)` of an idempotent batch.
type Batch = (i16, i32, usize);

/// Sends the batches and returns the kinds of violation found.
async fn sequence_kinds(batches: &[Batch]) -> (Report, Vec<String>) {
    let (cluster, client) = setup().await;
    for &(epoch, first, count) in batches {
        client.send(batch(epoch, first, count), 9).await.unwrap();
    }
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    let kinds = kinds(&report).into_iter().map(str::to_owned).collect();
    (report, kinds)
}

#[tokio::test]
async fn each_produce_sequence_violation_is_named() {
    let cases: [(&[Batch], &[&str]); 11] = [
        (&[(0, 0, 5), (0, 5, 5), (0, 0, 5)], &[]), // in order, then a retry of the first batch
        (&[(0, 0, 5), (0, 7, 1)], &["sequence-gap"]),
        (&[(0, 0, 5), (0, 2, 5)], &["sequence-overlap"]),
        // No state: 10.. is taken; then 0.. is behind it (Kafka answers 45, not stored).
        (&[(0, 10, 5), (0, 0, 5)], &["sequence-reorder"]),
        // Its counterpart: 0.. then 10.. is a gap, and the 5.. that fills it is in order, not
        // behind (a refused batch does not count as sent).
        (&[(0, 0, 5), (0, 10, 5), (0, 5, 5)], &["sequence-gap"]),
        // Behind the next expected sequence but a retry of a stored batch: not a reorder.
        (&[(0, 0, 5), (0, 5, 5), (0, 5, 5)], &[]),
        (&[(0, 0, 5), (1, 3, 1)], &["epoch-not-reset"]),
        // Its counterpart: a correct epoch bump starts the new epoch at sequence 0.
        (&[(0, 0, 5), (1, 0, 5), (1, 5, 1)], &[]),
        (&[(1, 0, 5), (0, 5, 1)], &["epoch-regression"]),
        // Its counterparts: the epoch staying, and going up (from 0).
        (&[(1, 0, 5), (1, 5, 1)], &[]),
        (&[(0, 0, 5), (2, 0, 1)], &[]),
    ];
    for (batches, expected) in cases {
        let (report, kinds) = sequence_kinds(batches).await;
        assert_eq!(
            kinds, expected,
            "batches (epoch, first, count) {batches:?}:\n{report}"
        );
    }
}

#[tokio::test]
async fn more_produce_requests_in_flight_than_the_limit_is_inflight_exceeded() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).delay(Duration::from_millis(100)))
        .unwrap();
    // Three idempotent batches pipelined on one connection, each held 100 ms.
    let sends = (0..3).map(|i| client.send(batch(0, i, 1), 9));
    for answer in futures::future::join_all(sends).await {
        assert_eq!(
            answer.unwrap().responses[0].partition_responses[0].error_code,
            0
        );
    }
    cluster.settled().await;
    let report = cluster.check(
        &Checks::only(["inflight-exceeded"])
            .unwrap()
            .max_in_flight(2),
    );
    assert_eq!(kinds(&report), ["inflight-exceeded"], "{report}");
    assert_eq!(
        report.violations[0].entries.len(),
        3,
        "two outstanding, plus the third"
    );
    cluster
        .check(
            &Checks::only(["inflight-exceeded"])
                .unwrap()
                .max_in_flight(3),
        )
        .assert_clean();
}

#[tokio::test]
async fn an_unknown_check_name_is_refused_with_the_list() {
    let err = Checks::only(["offset-commit-regresion"]).unwrap_err();
    assert!(err.contains("offset-commit-regression"), "{err}");
}

#[tokio::test]
#[should_panic(expected = "offset-commit-regression [billing/t-0]")]
async fn assert_clean_panics_listing_the_violations() {
    let (cluster, client) = setup().await;
    client.send(commit(&[(0, 2)]), 8).await.unwrap();
    client.send(commit(&[(0, 1)]), 8).await.unwrap();
    cluster.settled().await;
    cluster.check(&Checks::default()).assert_clean();
}

mod group {
    //! Group traffic scripted over the wire: join and sync (v3) of group "g".
    use bytes::Bytes;
    use kmock_client::Client;

    use super::common::requests::{assignment, join_group, sync_group};

    /// JoinGroup v3 (no MEMBER_ID_REQUIRED): `(generation, member id)`.
    pub async fn join(client: &Client, member_id: &str) -> (i32, String) {
        let request = join_group("g", member_id, Bytes::from_static(&[0, 0, 0, 0, 0, 0]));
        let answer = client.send(request, 3).await.unwrap();
        assert_eq!(answer.error_code, 0, "JoinGroup");
        (answer.generation_id, answer.member_id.as_str().to_owned())
    }

    /// SyncGroup v3 by the leader giving each `(member, partitions of t)` its share.
    pub async fn sync(
        client: &Client,
        generation: i32,
        member_id: &str,
        shares: &[(&str, &[i32])],
    ) {
        let shares: Vec<(&str, Bytes)> = shares
            .iter()
            .map(|&(member, partitions)| (member, assignment("t", partitions)))
            .collect();
        let request = sync_group("g", generation, member_id, &shares);
        assert_eq!(
            client.send(request, 3).await.unwrap().error_code,
            0,
            "SyncGroup"
        );
    }
}

/// A commit of t-`partition` at `offset` by `member` of group g in `generation`.
fn member_commit(
    generation: i32,
    member: &str,
    partition: i32,
    offset: i64,
) -> OffsetCommitRequest {
    offset_commit("g", generation, member, "t", &[(partition, offset)])
}

#[tokio::test]
async fn a_commit_outside_the_members_assignment_and_one_from_an_old_generation_are_named() {
    let (cluster, a) = setup().await;
    let b = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let (generation, member) = group::join(&a, "").await;
    group::sync(&a, generation, &member, &[(&member, &[0])]).await;
    a.send(member_commit(generation, &member, 0, 5), 8)
        .await
        .unwrap(); // assigned: fine
    a.send(member_commit(generation, &member, 1, 5), 8)
        .await
        .unwrap(); // not assigned
                   // A second member joins (and waits); the first rejoins: both land in the next generation.
    let ((next, _), _) = tokio::join!(
        async {
            cluster
                .wait_for(
                    |e| e.is("JoinGroup") && e.response.is_none(),
                    Duration::from_secs(5),
                )
                .await
                .unwrap();
            group::join(&a, &member).await
        },
        group::join(&b, "")
    );
    assert_eq!(next, generation + 1);
    a.send(member_commit(generation, &member, 0, 6), 8)
        .await
        .unwrap(); // stale generation
    cluster.settled().await;
    let report = cluster.check(
        &Checks::only(["commit-for-unassigned-partition", "stale-generation-commit"]).unwrap(),
    );
    assert_eq!(
        kinds(&report),
        ["commit-for-unassigned-partition", "stale-generation-commit"],
        "{report}"
    );
    let unassigned = &report.violations[0];
    assert_eq!(unassigned.key, "g/t-1");
    // The stale commit was refused (ILLEGAL_GENERATION): nothing stored, a warning.
    assert_eq!(
        report.violations[1].severity,
        kmock::check::Severity::Warning,
        "{report}"
    );
}

/// `offset-commit-regression` compares a member's own commits in one generation by default;
/// with `CommitScope::Group` it compares every commit to the group: a member that commits t-0
/// at 10 in generation 1 and, after a rebalance, at 5 in generation 2 regressed the group's
/// offset but not its own generation's.
#[tokio::test]
async fn commit_scope_group_compares_commits_across_generations_and_members() {
    let (cluster, a) = setup().await;
    let b = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let (generation, member) = group::join(&a, "").await;
    group::sync(&a, generation, &member, &[(&member, &[0, 1])]).await;
    let stored = |answer: kafka_protocol::messages::OffsetCommitResponse| {
        assert_eq!(
            answer.topics[0].partitions[0].error_code, 0,
            "commit stored"
        );
    };
    stored(
        a.send(member_commit(generation, &member, 0, 10), 8)
            .await
            .unwrap(),
    );
    // B joins (its JoinGroup waits), A rejoins: both in the next generation; A leads and
    // keeps t-0.
    let ((next, _), (_, b_member)) = tokio::join!(
        async {
            cluster
                .wait_for(
                    |e| e.is("JoinGroup") && e.response.is_none(),
                    Duration::from_secs(5),
                )
                .await
                .unwrap();
            group::join(&a, &member).await
        },
        group::join(&b, "")
    );
    assert_eq!(next, generation + 1);
    let shares: [(&str, &[i32]); 2] = [(&member, &[0]), (&b_member, &[1])];
    tokio::join!(
        group::sync(&a, next, &member, &shares),
        group::sync(&b, next, &b_member, &[])
    );
    stored(a.send(member_commit(next, &member, 0, 5), 8).await.unwrap());
    let regression = || Checks::only(["offset-commit-regression"]).unwrap();
    cluster.settled().await;
    cluster.check(&regression()).assert_clean();
    let report = cluster.check(&regression().commit_scope(kmock::check::CommitScope::Group));
    assert_eq!(kinds(&report), ["offset-commit-regression"], "{report}");
    assert_eq!(report.violations[0].key, "g/t-0");
}

#[tokio::test]
async fn a_member_committing_while_another_joins_is_not_stale() {
    let (cluster, a) = setup().await;
    let b = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let (generation, member) = group::join(&a, "").await;
    group::sync(&a, generation, &member, &[(&member, &[0, 1])]).await;
    // B's JoinGroup waits for A to rejoin; meanwhile A commits with its current generation, as
    // librdkafka does before rejoining, and Kafka accepts it.
    let (_, _) = tokio::join!(group::join(&b, ""), async {
        cluster
            .wait_for(
                |e| e.is("JoinGroup") && e.response.is_none(),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        let answer = a
            .send(member_commit(generation, &member, 0, 5), 8)
            .await
            .unwrap();
        assert_eq!(answer.topics[0].partitions[0].error_code, 0);
        group::join(&a, &member).await
    });
    cluster.settled().await;
    cluster.check(&Checks::default()).assert_clean();
}

#[tokio::test]
async fn a_batch_split_after_message_too_large_is_not_a_re_batched_retry() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .nth(2)
                .error(kmock::ResponseError::MessageTooLarge),
        )
        .unwrap();
    for (first, count) in [(0, 2), (2, 4), (2, 2), (4, 2)] {
        client.send(batch(0, first, count), 9).await.unwrap();
    }
    cluster.settled().await;
    cluster.check(&Checks::default()).assert_clean();
}

#[tokio::test]
async fn a_gap_after_a_batch_lost_with_its_connection_is_named() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).nth(2).disconnect())
        .unwrap();
    client.send(batch(0, 0, 1), 9).await.unwrap();
    assert!(
        client.send(batch(0, 1, 1), 9).await.is_err(),
        "the second batch is dropped with its connection"
    );
    let again = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    again.send(batch(0, 2, 1), 9).await.unwrap(); // skips the lost sequence 1
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    assert_eq!(kinds(&report), ["sequence-gap"], "{report}");
}

#[tokio::test]
async fn a_batch_cut_off_behind_a_dropped_one_and_retried_in_order_is_clean() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).nth(2).disconnect())
        .unwrap();
    client.send(batch(0, 0, 1), 9).await.unwrap();
    // Pipelined: sequence 2 is read behind sequence 1, whose request closes the connection
    // before either is handled; the client retries both, in order.
    let (dropped, cut_off) = tokio::join!(
        client.send(batch(0, 1, 1), 9),
        client.send(batch(0, 2, 1), 9)
    );
    assert!(dropped.is_err() && cut_off.is_err());
    let journal = cluster.journal();
    assert_eq!(
        journal.api("Produce").count(),
        3,
        "the cut-off request reached the journal: {:?}",
        journal.entries()
    );
    let again = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    for first in [1, 2] {
        let answer = again.send(batch(0, first, 1), 9).await.unwrap();
        assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    }
    cluster.settled().await;
    cluster.check(&Checks::default()).assert_clean();
}

#[tokio::test]
async fn sequences_wrapping_past_i32_max_are_in_order() {
    let (cluster, client) = setup().await;
    for (first, count) in [(i32::MAX - 2, 3), (0, 1), (1, 1)] {
        let answer = client.send(batch(0, first, count), 9).await.unwrap();
        assert_eq!(
            answer.responses[0].partition_responses[0].error_code, 0,
            "batch from {first}"
        );
    }
    cluster.settled().await;
    cluster.check(&Checks::default()).assert_clean();
}

#[tokio::test]
async fn a_stale_commit_after_one_applied_but_unanswered_is_a_regression() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(
            Rule::on(ApiKey::OffsetCommit)
                .nth(2)
                .disconnect_after_apply(),
        )
        .unwrap();
    client.send(commit(&[(0, 10)]), 8).await.unwrap();
    assert!(
        client.send(commit(&[(0, 12)]), 8).await.is_err(),
        "applied, answer lost"
    );
    let again = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    again.send(commit(&[(0, 11)]), 8).await.unwrap();
    cluster.settled().await;
    let report = cluster.check(&Checks::default());
    assert_eq!(kinds(&report), ["offset-commit-regression"], "{report}");
}

#[tokio::test]
async fn a_topic_deleted_and_created_again_is_not_a_lost_write() {
    let (cluster, client) = setup().await;
    client
        .produce("t", 0, &[record(b"k", b"v")], -1)
        .await
        .unwrap();
    client
        .send(
            kafka_protocol::messages::DeleteTopicsRequest::default()
                .with_timeout_ms(30_000)
                .with_topic_names(vec![common::name("t")]),
            5,
        )
        .await
        .unwrap();
    cluster.settled().await;
    cluster.check(&Checks::default()).assert_clean();
    // Offset 0 of the new t holds another producer's batch: the first write was to the old t.
    cluster.create_topic("t", 2).unwrap();
    let answer = client.send(batch(0, 0, 1), 9).await.unwrap();
    let stored = &answer.responses[0].partition_responses[0];
    assert_eq!((stored.error_code, stored.base_offset), (0, 0));
    cluster.settled().await;
    cluster.check(&Checks::default()).assert_clean();
}

#[tokio::test]
async fn an_error_injected_into_an_acks_0_produce_closes_the_connection() {
    let (cluster, client) = setup().await;
    cluster
        .add_rule(Rule::on(ApiKey::Produce).error(kmock::ResponseError::NotLeaderOrFollower))
        .unwrap();
    client
        .produce("t", 0, &[record(b"k", b"v")], 0)
        .await
        .unwrap();
    assert!(
        client.wait_closed(Duration::from_secs(5)).await,
        "acks=0 failures close the connection"
    );
}
