//! librdkafka's transactional producer (the rdkafka crate, `transactional.id`) against kmock's
//! transaction coordinator: committed transactions are visible to a read_committed consumer
//! and aborted ones never, a read_uncommitted consumer sees both, the offsets sent in a
//! committed transaction become the group's and those of an aborted one never do, a second
//! producer with the same transactional id fences the first, and a transaction whose
//! coordinator moves mid-way commits at the new one. Every run leaves every check clean,
//! the transaction checks included.

mod common;

use common::rdkafka_txn::{
    assert_clean_with_transaction_checks, assert_read_back, on_partition, read_all, send,
    transactional_producer, values, HANG_GUARD,
};
use kmock::journal::RequestSummary;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_transactions_are_read_and_aborted_ones_are_not() {
    let cluster = kmock::Cluster::builder()
        .brokers(3)
        .topic("out", 2)
        .topic("in", 2)
        .start()
        .await
        .unwrap();
    let bootstrap = cluster.bootstrap();
    let producer = transactional_producer(&bootstrap, "txn-a");
    producer.init_transactions(HANG_GUARD).unwrap();
    // The offsets are committed for a group no consumer has joined (generation -1).
    let group: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "g")
        .create()
        .unwrap();
    let metadata = group.group_metadata().unwrap();
    let offsets = |o0: i64, o1: i64| {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset("in", 0, Offset::Offset(o0))
            .unwrap();
        list.add_partition_offset("in", 1, Offset::Offset(o1))
            .unwrap();
        list
    };

    // Committed, with offsets; aborted, with offsets; committed again, without offsets.
    let (first, aborted, last) = (values("c", 6), values("a", 6), values("d", 4));
    producer.begin_transaction().unwrap();
    send(&producer, "out", &first).await;
    producer
        .send_offsets_to_transaction(&offsets(5, 7), &metadata, HANG_GUARD)
        .unwrap();
    producer.commit_transaction(HANG_GUARD).unwrap();
    producer.begin_transaction().unwrap();
    send(&producer, "out", &aborted).await;
    producer
        .send_offsets_to_transaction(&offsets(9, 9), &metadata, HANG_GUARD)
        .unwrap();
    producer.abort_transaction(HANG_GUARD).unwrap();
    producer.begin_transaction().unwrap();
    send(&producer, "out", &last).await;
    producer.commit_transaction(HANG_GUARD).unwrap();

    assert_read_back(&bootstrap, "out", &first, &aborted, &last).await;
    // Each partition: 3 + 3 + 2 records and a marker after each transaction.
    let (low, high) = group.fetch_watermarks("out", 0, HANG_GUARD).unwrap();
    assert_eq!((low, high), (0, 11));

    let mut asked = TopicPartitionList::new();
    asked.add_partition("in", 0);
    asked.add_partition("in", 1);
    let got = group.committed_offsets(asked, HANG_GUARD).unwrap();
    let got: Vec<(i32, Offset)> = got
        .elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect();
    assert_eq!(
        got,
        vec![(0, Offset::Offset(5)), (1, Offset::Offset(7))],
        "the offsets of the committed transaction, not the aborted one's"
    );
    // The journal has each transaction's EndTxn, in order, answered NONE, and the offsets sent.
    let journal = cluster.journal();
    let ends: Vec<(bool, Option<i16>)> = journal
        .api("EndTxn")
        .filter_map(|e| match &e.request {
            Some(RequestSummary::EndTxn(s)) => Some((s.committed, s.error_code)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        vec![(true, Some(0)), (false, Some(0)), (true, Some(0))]
    );
    let sent: Vec<(String, Vec<i64>)> = journal
        .api("TxnOffsetCommit")
        .filter_map(|e| match &e.request {
            Some(RequestSummary::TxnOffsetCommit(s)) => Some((
                s.group_id.clone(),
                s.partitions.iter().map(|p| p.offset).collect(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        sent,
        vec![("g".to_owned(), vec![5, 7]), ("g".to_owned(), vec![9, 9])]
    );
    assert_clean_with_transaction_checks(&cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    let cluster = kmock::Cluster::builder()
        .topic("out", 2)
        .start()
        .await
        .unwrap();
    let bootstrap = cluster.bootstrap();
    let first = transactional_producer(&bootstrap, "txn-b");
    first.init_transactions(HANG_GUARD).unwrap();
    first.begin_transaction().unwrap();
    send(&first, "out", &values("zombie", 2)).await;

    // The second instance's InitProducerId aborts the first's open transaction.
    let second = transactional_producer(&bootstrap, "txn-b");
    second.init_transactions(HANG_GUARD).unwrap();
    second.begin_transaction().unwrap();
    send(&second, "out", &values("live", 2)).await;
    second.commit_transaction(HANG_GUARD).unwrap();

    let refused = first
        .commit_transaction(HANG_GUARD)
        .expect_err("the fenced producer's commit");
    let KafkaError::Transaction(e) = &refused else {
        panic!("not a transaction error: {refused}");
    };
    // librdkafka reports the broker's INVALID_PRODUCER_EPOCH (EndTxn before v2) as its local
    // fatal `Fenced` error.
    assert!(e.is_fatal(), "fencing is fatal: {e}");
    assert_eq!(e.code(), RDKafkaErrorCode::Fenced, "{e}");

    let committed = read_all(&bootstrap, "out", "read_committed").await;
    assert_eq!(
        committed,
        vec![vec!["live0".to_owned()], vec!["live1".to_owned()]]
    );
    assert_clean_with_transaction_checks(&cluster);
}

/// The transaction APIs, whose requests go to the transaction coordinator.
const TXN_APIS: [&str; 4] = [
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "TxnOffsetCommit",
    "EndTxn",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_whose_coordinator_moves_mid_way_commits_at_the_new_one() {
    use common::exactly_once::coordinator_move;
    let cluster = kmock::Cluster::builder()
        .brokers(3)
        .topic("out", 2)
        .start()
        .await
        .unwrap();
    let bootstrap = cluster.bootstrap();
    let producer = transactional_producer(&bootstrap, "txn-move");
    producer.init_transactions(HANG_GUARD).unwrap();
    let old = cluster.transaction_coordinator("txn-move");
    let new = old % 3 + 1;
    let mut sent = Vec::new();
    for t in 0..4 {
        producer.begin_transaction().unwrap();
        let batch = values(&format!("t{t}-"), 4);
        send(&producer, "out", &batch).await;
        if t == 1 {
            // The second transaction has begun at the old coordinator: its partitions were
            // added there after the first transaction's EndTxn.
            let first_end = cluster.journal().api("EndTxn").last().unwrap().seq;
            cluster
                .wait_for(
                    |e| e.is("AddPartitionsToTxn") && e.seq > first_end && e.broker == old,
                    HANG_GUARD,
                )
                .await
                .unwrap();
            cluster
                .move_transaction_coordinator("txn-move", new)
                .unwrap();
            assert_eq!(cluster.transaction_coordinator("txn-move"), new);
        }
        producer.commit_transaction(HANG_GUARD).unwrap();
        sent.extend(batch);
    }

    let committed = read_all(&bootstrap, "out", "read_committed").await;
    assert_eq!(
        committed,
        vec![on_partition(&sent, 0), on_partition(&sent, 1)]
    );

    let journal = cluster.journal();
    let moved = coordinator_move(journal.entries()).expect("the move is journaled");
    let changes = moved.operation.as_ref().unwrap().leader_changes();
    assert!(
        matches!(changes, [c] if c.topic == "__transaction_state" && c.from == old && c.to == new),
        "{changes:?}"
    );
    let txn_after = |broker: i32| -> Vec<&kmock::Entry> {
        journal
            .entries()
            .iter()
            .filter(|e| e.seq > moved.seq && e.broker == broker)
            .filter(|e| TXN_APIS.iter().any(|api| e.is(api)))
            .collect()
    };
    // librdkafka sent its EndTxn to the coordinator it knew; refused, it looked the
    // coordinator up again and committed at the new one.
    let at_old = txn_after(old);
    assert!(
        !at_old.is_empty(),
        "a request at the old coordinator after the move"
    );
    for e in &at_old {
        let codes = e.response.as_ref().map(|r| r.error_codes.clone());
        assert_eq!(
            codes,
            Some(vec![16]),
            "NOT_COORDINATOR at the old one: {e:?}"
        );
    }
    let ends_at_new = txn_after(new)
        .into_iter()
        .filter(
            |e| matches!(&e.request, Some(RequestSummary::EndTxn(s)) if s.error_code == Some(0)),
        )
        .count();
    assert_eq!(
        ends_at_new, 3,
        "transactions 1 to 3 committed at the new coordinator"
    );
    assert_clean_with_transaction_checks(&cluster);
}
