//! The journal's deferred record digests as its readers, sink, subscribers and bounds meet them.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Mutex;

use bytes::Bytes;
use kafka_protocol::records::{Compression, Record};

use super::*;
use crate::journal::request::add_digests;
use crate::journal::store::{Arrival, Sink};
use crate::journal::summary::{ProducePartition, ProduceSummary};
use crate::state::batch::{self, BatchDigests, DeferredDigests, RecordDigest};

fn encoded(records: usize) -> Bytes {
    let records: Vec<Record> = (0..records)
        .map(|i| kmock_client::record(b"k", format!("value {i}").as_bytes()))
        .collect();
    kmock_client::encode_batch(&records, Compression::None).unwrap()
}

/// The digests the validating walk computes for `batch`.
fn walked(batch: &Bytes) -> Vec<RecordDigest> {
    batch::inspect(batch, true, MAX_REQUEST_DIGESTS)
        .take_digests()
        .unwrap()
}

/// Appends and completes a Produce of `batch`, its digests deferred.
fn produce(journal: &Journal, batch: &Bytes) -> u64 {
    let from = Arrival {
        broker: 1,
        conn: 1,
        peer: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 1),
    };
    let seq = journal.append(&from, |entry| {
        entry.api = Some("Produce".into());
        entry.request = Some(RequestSummary::Produce(ProduceSummary {
            transactional_id: None,
            acks: -1,
            timeout_ms: 30_000,
            dropped_partitions: 0,
            partitions: vec![ProducePartition {
                topic: "orders".into(),
                partition: 0,
                producer_id: -1,
                producer_epoch: -1,
                base_sequence: -1,
                record_count: 1,
                first_timestamp: -1,
                max_timestamp: -1,
                base_offset: None,
                error_code: None,
                crc: None,
                digests: None,
                deferred: None,
            }],
        }));
    });
    let deferred = DeferredDigests::of_request(batch).unwrap().owned();
    journal.finish(seq, |entry| {
        let request = entry.request.as_mut().unwrap();
        add_digests(request, vec![BatchDigests::Deferred(deferred)]);
    });
    seq
}

fn digests(entry: &Entry) -> Option<&Vec<RecordDigest>> {
    match &entry.request {
        Some(RequestSummary::Produce(p)) => p.partitions[0].digests.as_ref(),
        _ => None,
    }
}

#[test]
fn a_reader_gets_the_digests_the_validating_walk_computes_and_the_entry_shrinks() {
    let journal = Journal::new(100, usize::MAX, None);
    let batch = encoded(50);
    produce(&journal, &batch);
    let held = journal.state().bytes;
    assert!(held > batch.len(), "the records are counted: {held}");
    assert!(has_deferred(&journal.state().entries[0].entry));
    let snapshot = journal.snapshot();
    assert_eq!(digests(&snapshot.entries()[0]), Some(&walked(&batch)));
    assert!(!has_deferred(&snapshot.entries()[0]));
    let state = journal.state();
    assert!(!has_deferred(&state.entries[0].entry));
    assert!(
        state.bytes < held - (batch.len() - 50 * 8) / 2,
        "{}",
        state.bytes
    );
    let logged = state.log[0].as_ref().unwrap();
    assert_eq!(
        digests(&logged.0),
        Some(&walked(&batch)),
        "the live log too"
    );
}

#[test]
fn past_the_memory_bound_records_give_way_to_digests_before_entries_are_evicted() {
    let batch = encoded(200);
    let one = {
        let journal = Journal::new(100, usize::MAX, None);
        produce(&journal, &batch);
        journal.snapshot();
        let bytes = journal.state().bytes;
        bytes
    };
    // Room for ten entries with digests, not for two with records.
    let journal = Journal::new(100, 10 * one, None);
    for _ in 0..10 {
        produce(&journal, &batch);
    }
    let state = journal.state();
    assert_eq!((state.entries.len(), state.evicted), (10, 0));
    let deferred = state
        .entries
        .iter()
        .filter(|s| has_deferred(&s.entry))
        .count();
    assert!(deferred <= 1, "{deferred} entries still hold records");
    drop(state);
    let snapshot = journal.snapshot();
    assert!(snapshot
        .entries()
        .iter()
        .all(|e| digests(e) == Some(&walked(&batch))));
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_sink_and_a_subscriber_get_the_digests_when_the_entry_completes() {
    let out = Shared::default();
    let journal = Journal::new(100, usize::MAX, Some(Sink(Box::new(out.clone()))));
    let mut subscriber = journal.subscribe();
    let batch = encoded(8);
    produce(&journal, &batch);
    let line = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let first = walked(&batch)[0].to_string();
    assert!(line.contains(&first), "{line}");
    let entry = subscriber.try_recv().unwrap();
    assert_eq!(digests(&entry), Some(&walked(&batch)));
    assert!(journal.state().deferred.is_empty());
}

#[test]
fn a_batch_past_the_request_bound_keeps_no_digest_in_any_form() {
    let mut entry = Entry::new(
        1,
        0,
        &Arrival {
            broker: 1,
            conn: 1,
            peer: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 1),
        },
    );
    let batch = encoded(8);
    let partition = |deferred: Option<DeferredDigests>, digests| ProducePartition {
        topic: "orders".into(),
        partition: 0,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        record_count: 8,
        first_timestamp: -1,
        max_timestamp: -1,
        base_offset: None,
        error_code: None,
        crc: None,
        digests,
        deferred,
    };
    // A computed batch that uses up the bound but two, then a deferred one of eight and a
    // computed one of two: the deferred one does not fit, the last does.
    entry.request = Some(RequestSummary::Produce(ProduceSummary {
        transactional_id: None,
        acks: -1,
        timeout_ms: 30_000,
        dropped_partitions: 0,
        partitions: vec![
            partition(None, Some(vec![RecordDigest(0); MAX_REQUEST_DIGESTS - 2])),
            partition(DeferredDigests::of_request(&batch), None),
            partition(None, Some(vec![RecordDigest(1); 2])),
        ],
    }));
    resolve(&mut entry);
    let Some(RequestSummary::Produce(p)) = &entry.request else {
        unreachable!()
    };
    let lengths: Vec<_> = p
        .partitions
        .iter()
        .map(|b| (b.digests.as_ref().map(Vec::len), b.deferred.is_some()))
        .collect();
    assert_eq!(
        lengths,
        [
            (Some(MAX_REQUEST_DIGESTS - 2), false),
            (None, false),
            (Some(2), false)
        ]
    );
}

#[test]
fn a_live_reader_behind_a_reset_gets_the_digests_of_the_entries_completed_before_it() {
    let journal = Journal::new(100, usize::MAX, None);
    let batch = encoded(9);
    produce(&journal, &batch);
    // The reset empties memory; the completion log keeps the entry for live readers.
    journal.clear(crate::journal::ClusterOperation::Reset);
    let crate::journal::LivePage::Entries(entries, _) = journal.live_page(0, 100, |_| true) else {
        panic!("the entry completed before the reset is still in the completion log");
    };
    let produced = entries
        .iter()
        .find(|e| e.is("Produce"))
        .expect("completed before the reset");
    assert!(
        !has_deferred(produced),
        "a reader got records: {produced:?}"
    );
    assert_eq!(digests(produced), Some(&walked(&batch)));
}

#[test]
fn entries_evicted_by_count_leave_the_queue_of_entries_holding_records() {
    // Nobody reads, and the byte bound is never reached: only the count bound evicts.
    let journal = Journal::new(10, usize::MAX, None);
    let batch = encoded(8);
    for _ in 0..1_000 {
        produce(&journal, &batch);
    }
    let state = journal.state();
    assert_eq!(state.entries.len(), 10);
    assert!(
        state.deferred.len() <= state.entries.len(),
        "{} seqs queued for 10 entries in memory",
        state.deferred.len()
    );
}

#[test]
fn a_subscriber_that_comes_after_the_completion_looked_for_one_gets_the_digests() {
    let journal = Journal::new(100, usize::MAX, None);
    let batch = encoded(8);
    // Completed with no sink and no subscriber: the entry keeps its records.
    produce(&journal, &batch);
    let held = journal.state().entries[0].entry.clone();
    assert!(has_deferred(&held));
    // A subscriber arriving between `finish`'s look for one and its publication (`subscribe`
    // does not take the journal's lock) is handed the entry as `finish` left it.
    let mut subscriber = journal.subscribe();
    journal.publish(None, held);
    let entry = subscriber.try_recv().unwrap();
    assert!(!has_deferred(&entry), "a subscriber got records");
    assert_eq!(digests(&entry), Some(&walked(&batch)));
}
