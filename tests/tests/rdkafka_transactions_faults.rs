//! librdkafka's transactional producer (the rdkafka crate, bundled librdkafka 2.12) under
//! transaction version 2 and under faults chosen by transactional id: with
//! `transaction.version` 2 finalized, committed transactions are read by a read_committed
//! consumer and aborted ones never (and the journal says which protocol librdkafka spoke);
//! CONCURRENT_TRANSACTIONS on EndTxn is retried until the commit goes through;
//! PRODUCER_FENCED on EndTxn is fatal; a rule for another transactional id never fires.

mod common;

use common::rdkafka_txn::{
    assert_clean_with_transaction_checks, assert_read_back, on_partition, read_all, send,
    transactional_producer, values, HANG_GUARD,
};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use kmock::journal::RequestSummary;
use kmock::{Rule, TransactionVersion};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::Producer;

/// The (version, error code) of every EndTxn in the journal, in arrival order, once the last
/// one's answer is recorded (EndTxns share the coordinator connection, answered in order).
async fn end_txns(cluster: &kmock::Cluster) -> Vec<(i16, Option<i16>)> {
    let last = cluster.journal().api("EndTxn").last().map(|e| e.seq);
    if let Some(seq) = last {
        // A generous guard that only catches a hang.
        cluster
            .wait_for(|e| e.seq == seq && e.response.is_some(), HANG_GUARD)
            .await
            .unwrap();
    }
    cluster
        .journal()
        .api("EndTxn")
        .filter_map(|e| match &e.request {
            Some(RequestSummary::EndTxn(s)) => Some((e.version.unwrap_or(-1), s.error_code)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_transaction_version_2_read_committed_reads_exactly_the_committed_data() {
    let cluster = kmock::Cluster::builder()
        .brokers(3)
        .topic("out", 2)
        .transaction_version(TransactionVersion::V2)
        .start()
        .await
        .unwrap();
    let bootstrap = cluster.bootstrap();
    let producer = transactional_producer(&bootstrap, "txn-v2");
    producer.init_transactions(HANG_GUARD).unwrap();
    let (first, aborted, last) = (values("c", 6), values("a", 4), values("d", 4));
    producer.begin_transaction().unwrap();
    send(&producer, "out", &first).await;
    producer.commit_transaction(HANG_GUARD).unwrap();
    producer.begin_transaction().unwrap();
    send(&producer, "out", &aborted).await;
    producer.abort_transaction(HANG_GUARD).unwrap();
    producer.begin_transaction().unwrap();
    send(&producer, "out", &last).await;
    producer.commit_transaction(HANG_GUARD).unwrap();

    assert_read_back(&bootstrap, "out", &first, &aborted, &last).await;
    // librdkafka 2.12 speaks transaction version 1 even when the cluster finalizes 2: it adds
    // its partitions with AddPartitionsToTxn (v0) and ends with EndTxn v1 (no epoch bump), its
    // Produce is v10, which Kafka 4.x accepts from such a client.
    let journal = cluster.journal();
    let added = journal.api("AddPartitionsToTxn").count();
    assert!(
        added >= 3,
        "one AddPartitionsToTxn per transaction at least, got {added}"
    );
    let ends = end_txns(&cluster).await;
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert!(
        ends.iter().all(|&(v, code)| v < 5 && code == Some(0)),
        "EndTxn below v5, answered NONE: {ends:?}"
    );
    assert_clean_with_transaction_checks(&cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_transactions_on_end_txn_is_retried_until_the_commit_goes_through() {
    let cluster = kmock::Cluster::builder()
        .topic("out", 2)
        .start()
        .await
        .unwrap();
    let busy = cluster
        .add_rule(
            Rule::on(ApiKey::EndTxn)
                .transactional_id("txn-busy")
                .error(ResponseError::ConcurrentTransactions)
                .first(2),
        )
        .unwrap();
    let other = cluster
        .add_rule(
            Rule::on(ApiKey::EndTxn)
                .transactional_id("someone-else")
                .error(ResponseError::ProducerFenced),
        )
        .unwrap();
    let bootstrap = cluster.bootstrap();
    let producer = transactional_producer(&bootstrap, "txn-busy");
    producer.init_transactions(HANG_GUARD).unwrap();
    producer.begin_transaction().unwrap();
    let sent = values("v", 4);
    send(&producer, "out", &sent).await;
    producer.commit_transaction(HANG_GUARD).unwrap();

    let committed = read_all(&bootstrap, "out", "read_committed").await;
    for (p, read) in committed.iter().enumerate() {
        assert_eq!(read, &on_partition(&sent, p), "partition {p}");
    }
    let busy_code = ResponseError::ConcurrentTransactions.code();
    let codes: Vec<Option<i16>> = end_txns(&cluster)
        .await
        .into_iter()
        .map(|(_, c)| c)
        .collect();
    assert_eq!(
        codes,
        vec![Some(busy_code), Some(busy_code), Some(0)],
        "two refusals, then the commit"
    );
    assert_eq!(busy.fired(), 2);
    assert_eq!(
        (other.matched(), other.fired()),
        (0, 0),
        "a rule for another transactional id"
    );
    assert_clean_with_transaction_checks(&cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_fenced_on_end_txn_is_fatal() {
    let cluster = kmock::Cluster::builder()
        .topic("out", 2)
        .start()
        .await
        .unwrap();
    cluster
        .add_rule(
            Rule::on(ApiKey::EndTxn)
                .transactional_id("txn-fenced")
                .error(ResponseError::ProducerFenced)
                .first(1),
        )
        .unwrap();
    let bootstrap = cluster.bootstrap();
    let producer = transactional_producer(&bootstrap, "txn-fenced");
    producer.init_transactions(HANG_GUARD).unwrap();
    producer.begin_transaction().unwrap();
    send(&producer, "out", &values("v", 2)).await;
    let refused = producer
        .commit_transaction(HANG_GUARD)
        .expect_err("a fenced commit");
    let KafkaError::Transaction(e) = &refused else {
        panic!("not a transaction error: {refused}");
    };
    assert!(e.is_fatal(), "fencing is fatal: {e}");
    assert_eq!(e.code(), RDKafkaErrorCode::Fenced, "{e}");
    // Fatal: the producer sends no EndTxn again, and its transaction is left open at kmock
    // (the refused EndTxn was not applied), so read_committed sees none of it.
    let codes: Vec<Option<i16>> = end_txns(&cluster)
        .await
        .into_iter()
        .map(|(_, c)| c)
        .collect();
    assert_eq!(codes, vec![Some(ResponseError::ProducerFenced.code())]);
    let committed = read_all(&bootstrap, "out", "read_committed").await;
    assert_eq!(committed, vec![Vec::<String>::new(), Vec::new()]);
}
