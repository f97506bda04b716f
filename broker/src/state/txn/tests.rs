//! The coordinator's transitions, markers and pending offsets, without the wire.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::TxnState;
use crate::state::groups::CommittedOffset;
use crate::state::producers::ProducerIdAndEpoch;
use crate::state::{ClusterState, Placement};

const PLACEMENT: Placement = Placement {
    default_replication_factor: 1,
    offsets_topic_partitions: 50,
    kafka_version: crate::KafkaVersion::LATEST,
};

fn state_with_topic() -> ClusterState {
    let mut state = ClusterState::new(vec![1], PLACEMENT, 0);
    state.create_topic("t", 2, None, BTreeMap::new()).unwrap();
    state
}

fn offset(offset: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: -1,
        metadata: None,
    }
}

fn open(state: &mut ClusterState, id: &str, group: Option<&str>) -> ProducerIdAndEpoch {
    let producer = state
        .init_transactional_producer(id, 60_000, None, 0)
        .unwrap();
    let partitions = [("t".to_owned(), 0), ("t".to_owned(), 1)];
    state
        .add_to_transaction(id, producer, &partitions, group, (Instant::now(), 0), false)
        .unwrap();
    producer
}

#[test]
fn a_commit_writes_a_marker_to_every_partition_and_commits_the_pending_offsets() {
    let mut state = state_with_topic();
    state.groups.check_txn_commit("g", -1, "", None).unwrap();
    let producer = open(&mut state, "tx", Some("g"));
    state.add_pending_offsets(
        "g",
        producer.producer_id,
        vec![(("t".into(), 0), offset(5))],
    );
    assert!(state.transactions.has_pending_offset("g", "t", 0));
    assert!(
        state.groups.get("g").unwrap().offsets.is_empty(),
        "pending until commit"
    );
    let ended = state
        .end_transaction("tx", producer, true, false, 0)
        .unwrap();
    let markers: Vec<(i32, i64)> = ended
        .markers
        .iter()
        .map(|m| (m.partition, m.offset))
        .collect();
    assert_eq!(markers, vec![(0, 0), (1, 0)]);
    let p0 = state.topics["t"].partition(0).unwrap();
    assert_eq!(p0.log.last_stable_offset(), 1);
    assert!(p0.log.aborted_between(0, 1).is_empty());
    assert_eq!(
        state.groups.get("g").unwrap().offsets[&("t".into(), 0)].offset,
        5
    );
    assert_eq!(
        state.transactions.get("tx").unwrap().state,
        TxnState::CompleteCommit
    );
}

#[test]
fn an_abort_drops_the_pending_offsets_and_enters_the_aborted_index() {
    let mut state = state_with_topic();
    state.groups.check_txn_commit("g", -1, "", None).unwrap();
    let producer = open(&mut state, "tx", Some("g"));
    state.add_pending_offsets(
        "g",
        producer.producer_id,
        vec![(("t".into(), 0), offset(5))],
    );
    state
        .end_transaction("tx", producer, false, false, 0)
        .unwrap();
    assert!(state.groups.get("g").unwrap().offsets.is_empty());
    assert!(!state.transactions.has_pending_offset("g", "t", 0));
    let aborted = state.topics["t"]
        .partition(1)
        .unwrap()
        .log
        .aborted_between(0, 1);
    assert_eq!(
        aborted
            .iter()
            .map(|a| (a.producer_id, a.first_offset, a.last_offset))
            .collect::<Vec<_>>(),
        vec![(producer.producer_id, 0, 0)]
    );
    // A retried abort is answered again; a commit has nothing to commit.
    assert!(state
        .end_transaction("tx", producer, false, false, 0)
        .unwrap()
        .markers
        .is_empty());
    assert_eq!(
        state.end_transaction("tx", producer, true, false, 0),
        Err(ResponseError::InvalidTxnState)
    );
}

#[test]
fn a_new_instance_aborts_the_open_transaction_with_a_fencing_epoch_then_bumps_again() {
    let mut state = state_with_topic();
    let old = open(&mut state, "tx", None);
    assert_eq!(
        state.init_transactional_producer("tx", 60_000, None, 0),
        Err(ResponseError::ConcurrentTransactions)
    );
    let txn = state.transactions.get("tx").unwrap();
    assert_eq!(
        (txn.state, txn.producer_epoch),
        (TxnState::CompleteAbort, 1)
    );
    let new = state
        .init_transactional_producer("tx", 60_000, None, 0)
        .unwrap();
    assert_eq!((new.producer_id, new.producer_epoch), (old.producer_id, 2));
    assert_eq!(
        state.end_transaction("tx", old, true, false, 0),
        Err(ResponseError::ProducerFenced)
    );
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let mut state = state_with_topic();
    let producer = state.init_transactional_producer("tx", 1, None, 0).unwrap();
    let start = Instant::now();
    state
        .add_to_transaction("tx", producer, &[("t".into(), 0)], None, (start, 0), false)
        .unwrap();
    assert!(
        state.abort_timed_out_transactions(start, 0).is_empty(),
        "not yet"
    );
    let later = start + std::time::Duration::from_millis(1);
    let aborted = state.abort_timed_out_transactions(later, 0);
    assert_eq!(aborted.len(), 1);
    assert!(!aborted[0].1.committed);
    assert_eq!(aborted[0].1.producer.producer_epoch, 1);
    assert_eq!(
        state.add_to_transaction("tx", producer, &[], None, (later, 0), false),
        Err(ResponseError::ProducerFenced)
    );
}

#[test]
fn an_exhausted_epoch_is_fenced_to_i16_max_then_a_new_producer_id_starts_at_epoch_0() {
    let mut state = state_with_topic();
    let mut producer = open(&mut state, "tx", None);
    state
        .end_transaction("tx", producer, false, false, 0)
        .unwrap();
    // Every epoch a client can be given, up to i16::MAX - 1 (Kafka's isProducerEpochExhausted).
    while producer.producer_epoch < i16::MAX - 1 {
        producer = state
            .init_transactional_producer("tx", 60_000, None, 0)
            .unwrap();
    }
    assert_eq!(producer.producer_id, 0);
    let partitions = [("t".to_owned(), 0)];
    state
        .add_to_transaction(
            "tx",
            producer,
            &partitions,
            None,
            (Instant::now(), 0),
            false,
        )
        .unwrap();
    // A new instance fences the open transaction with the last epoch, i16::MAX.
    assert_eq!(
        state.init_transactional_producer("tx", 60_000, None, 0),
        Err(ResponseError::ConcurrentTransactions)
    );
    let txn = state.transactions.get("tx").unwrap();
    assert_eq!(
        (txn.producer_epoch, txn.state),
        (i16::MAX, TxnState::CompleteAbort)
    );
    // Its retry gets a new producer id; the old one at any epoch is refused.
    let next = state
        .init_transactional_producer("tx", 60_000, None, 0)
        .unwrap();
    assert_eq!(
        next,
        ProducerIdAndEpoch {
            producer_id: 1,
            producer_epoch: 0
        }
    );
    for epoch in [i16::MAX - 1, i16::MAX] {
        let old = ProducerIdAndEpoch {
            producer_id: 0,
            producer_epoch: epoch,
        };
        assert_eq!(
            state.end_transaction("tx", old, false, false, 0),
            Err(ResponseError::InvalidProducerIdMapping)
        );
    }
}

#[test]
fn an_exhausted_epoch_rolls_the_producer_id_over_at_a_version_2_end() {
    let mut state = state_with_topic();
    let mut producer = state
        .init_transactional_producer("tx", 60_000, None, 0)
        .unwrap();
    // Re-initialise up to the last epoch an InitProducerId gives (32766).
    while producer.producer_epoch < i16::MAX - 1 {
        producer = state
            .init_transactional_producer("tx", 60_000, None, 0)
            .unwrap();
    }
    let old_id = producer.producer_id;
    state
        .add_to_transaction(
            "tx",
            producer,
            &[("t".into(), 0)],
            None,
            (Instant::now(), 0),
            true,
        )
        .unwrap();
    let ended = state
        .end_transaction("tx", producer, true, true, 0)
        .unwrap();
    assert_eq!(ended.markers.len(), 1);
    assert_ne!(ended.producer.producer_id, old_id, "a new producer id");
    assert_eq!(ended.producer.producer_epoch, 0);
    let marker = &state.topics["t"].partitions[0].log.batches()[0];
    assert_eq!(
        (marker.producer.0, marker.producer.1),
        (old_id, i16::MAX),
        "the marker carries the old id at the bumped epoch"
    );
    // A retry of that EndTxn names the old id and epoch: answered with the new ones.
    assert_eq!(
        state.end_transaction("tx", producer, true, true, 0),
        Ok(super::coordinator::Ended {
            producer: ended.producer,
            committed: true,
            markers: Vec::new(),
        })
    );
    // The next transaction is the new id's; the old one is unknown to the transactional id.
    let stale = ProducerIdAndEpoch {
        producer_id: old_id,
        producer_epoch: 0,
    };
    assert_eq!(
        state.end_transaction("tx", stale, true, true, 0),
        Err(ResponseError::InvalidProducerIdMapping)
    );
    let next = ended.producer;
    state
        .add_to_transaction(
            "tx",
            next,
            &[("t".into(), 1)],
            None,
            (Instant::now(), 0),
            true,
        )
        .unwrap();
    let again = state.end_transaction("tx", next, false, true, 0).unwrap();
    assert_eq!(
        again.producer,
        ProducerIdAndEpoch {
            producer_id: next.producer_id,
            producer_epoch: 1
        }
    );
}

#[test]
fn a_version_2_end_answers_retries_and_refuses_the_next_epoch_with_nothing_open() {
    let mut state = state_with_topic();
    let producer = open(&mut state, "tx", None);
    // `open` added with version 1; the EndTxn v5 still bumps (the request's version counts).
    let ended = state
        .end_transaction("tx", producer, true, true, 0)
        .unwrap();
    assert_eq!(ended.producer.producer_epoch, producer.producer_epoch + 1);
    assert_eq!(
        state.end_transaction("tx", ended.producer, true, true, 0),
        Err(ResponseError::InvalidTxnState),
        "no transaction open at the bumped epoch"
    );
    let older = ProducerIdAndEpoch {
        producer_epoch: producer.producer_epoch - 1,
        ..producer
    };
    assert_eq!(
        state.end_transaction("tx", older, true, true, 0),
        Err(ResponseError::ProducerFenced),
        "an epoch neither current nor the last"
    );
    assert_eq!(
        state.end_transaction("tx", producer, false, true, 0),
        Err(ResponseError::InvalidTxnState),
        "a retry that turned into an abort"
    );
}

#[test]
fn a_version_2_abort_with_nothing_open_bumps_the_epoch_and_a_commit_is_refused() {
    let mut state = state_with_topic();
    let producer = state
        .init_transactional_producer("tx", 60_000, None, 0)
        .unwrap();
    for (commit, bump) in [(true, false), (false, false), (true, true)] {
        assert_eq!(
            state.end_transaction("tx", producer, commit, bump, 0),
            Err(ResponseError::InvalidTxnState),
            "commit {commit}, version 2 {bump}: nothing open"
        );
    }
    let ended = state
        .end_transaction("tx", producer, false, true, 0)
        .unwrap();
    assert!(ended.markers.is_empty(), "no partition to mark");
    assert_eq!(ended.producer.producer_epoch, producer.producer_epoch + 1);
    assert_eq!(state.transactions.txns["tx"].state, TxnState::CompleteAbort);
    // At the bumped epoch, with nothing open again: another abort bumps again; a commit is
    // refused; the old epoch's abort is a retry.
    assert_eq!(
        state.end_transaction("tx", ended.producer, true, true, 0),
        Err(ResponseError::InvalidTxnState)
    );
    let retried = state
        .end_transaction("tx", producer, false, true, 0)
        .unwrap();
    assert_eq!(retried.producer, ended.producer, "a retry changes nothing");
    let again = state
        .end_transaction("tx", ended.producer, false, true, 0)
        .unwrap();
    assert_eq!(again.producer.producer_epoch, producer.producer_epoch + 2);
}
