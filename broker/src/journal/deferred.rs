//! Record digests the journal computes when they are first needed
//! ([`crate::state::batch::DeferredDigests`]): a completed Produce entry may hold the records of
//! its uncompressed batches instead of their digests, and the journal replaces them with the
//! digests
//! - before anyone reads the entry: every read of the journal in memory (snapshots, pages, live
//!   pages, waits) goes through [`Journal::resolved_state`];
//! - when the entry completes, if a sink or a live subscriber is there to take it at once;
//! - when the bytes the journal holds pass `journal_max_bytes`: the oldest entries' records are
//!   replaced by their digests (8 bytes a record) before any entry is evicted, so an entry stays
//!   in memory as long as it would have with its digests computed on arrival.
//!
//! Readers compute the digests outside the journal's lock, a few entries at a time, so that a
//! long journal read does not hold up the connections appending to it; the memory bound and
//! the sink compute them under the lock, as the sink already writes its line there.
//!
//! Every reader so sees the digests it would have seen had they been computed on arrival: the
//! same walk over the same bytes, in request order within [`MAX_REQUEST_DIGESTS`].

use std::sync::{Arc, MutexGuard};

use super::store::{Journal, State};
use super::summary::RequestSummary;
use super::{size, Entry};
use crate::state::batch::digest::MAX_REQUEST_DIGESTS;

/// Entries a reader resolves per turn of the journal's lock.
const RESOLVE_TURN: usize = 64;

/// Whether `entry` holds records whose digests are still to be computed.
pub(super) fn has_deferred(entry: &Entry) -> bool {
    match &entry.request {
        Some(RequestSummary::Produce(p)) => p.partitions.iter().any(|b| b.deferred.is_some()),
        _ => false,
    }
}

/// Computes `entry`'s deferred digests: each batch's in request order, within
/// [`MAX_REQUEST_DIGESTS`] in all (a batch that does not fit in what is left keeps none, as
/// one whose digests were computed on arrival).
pub(super) fn resolve(entry: &mut Entry) {
    let Some(RequestSummary::Produce(produce)) = &mut entry.request else {
        return;
    };
    let mut budget = MAX_REQUEST_DIGESTS;
    for batch in &mut produce.partitions {
        if let Some(deferred) = batch.deferred.take() {
            batch.digests = deferred.digests(budget);
        } else if batch.digests.as_ref().is_some_and(|d| d.len() > budget) {
            batch.digests = None;
        }
        budget -= batch.digests.as_ref().map_or(0, Vec::len);
    }
}

impl State {
    /// The position in `entries` of entry `seq`, if memory holds it.
    fn index_of(&self, seq: u64) -> Option<usize> {
        let first = self.entries.front()?.entry.seq;
        let i = usize::try_from(seq.checked_sub(first)?).ok()?;
        (i < self.entries.len()).then_some(i)
    }

    /// Puts `entry`, resolved, in place of the entry in memory at `i` (and of its item in the
    /// completion log), counting its new size.
    fn replace(&mut self, i: usize, entry: Entry) {
        let bytes = size::entry_bytes(&entry);
        let entry = Arc::new(entry);
        let slot = &mut self.entries[i];
        self.bytes = self.bytes - slot.bytes + bytes;
        slot.bytes = bytes;
        slot.entry = entry.clone();
        if let Some(done) = slot.done {
            let logged = done
                .checked_sub(self.log_base)
                .and_then(|j| self.log.get_mut(j as usize));
            if let Some(Some(logged)) = logged {
                *logged = (entry, bytes);
            }
        }
    }

    /// Drops the seqs at the front of the queue of deferred entries that memory no longer
    /// holds, or holds resolved.
    fn trim_deferred(&mut self) {
        while let Some(&seq) = self.deferred.front() {
            match self.index_of(seq) {
                Some(i) if has_deferred(&self.entries[i].entry) => return,
                _ => {
                    self.deferred.pop_front();
                }
            }
        }
    }

    /// Resolves the oldest entry in memory still holding records, under the lock; `false` when
    /// none is left.
    pub(super) fn resolve_oldest(&mut self) -> bool {
        self.trim_deferred();
        let Some(seq) = self.deferred.pop_front() else {
            return false;
        };
        let i = self.index_of(seq).expect("trimmed: in memory");
        let mut entry = (*self.entries[i].entry).clone();
        resolve(&mut entry);
        self.replace(i, entry);
        true
    }
}

impl Journal {
    /// The journal's state with no deferred digest left in memory, for a reader. The entries
    /// deferred when it is called are resolved outside the lock, [`RESOLVE_TURN`] at a time
    /// (each reader computes what it finds; two readers at once may both compute an entry,
    /// one puts it back); those completed meanwhile, under it.
    pub(super) fn resolved_state(&self) -> MutexGuard<'_, State> {
        let mut state = self.state();
        let until = state.next_seq;
        loop {
            state.trim_deferred();
            let taken: Vec<Entry> = state
                .deferred
                .iter()
                .take_while(|&&seq| seq < until)
                .filter_map(|&seq| state.index_of(seq))
                .map(|i| &state.entries[i].entry)
                .filter(|entry| has_deferred(entry))
                .take(RESOLVE_TURN)
                .map(|entry| (**entry).clone())
                .collect();
            if taken.is_empty() {
                break;
            }
            drop(state);
            let resolved: Vec<Entry> = taken
                .into_iter()
                .map(|mut entry| {
                    resolve(&mut entry);
                    entry
                })
                .collect();
            state = self.state();
            for entry in resolved {
                // Evicted meanwhile, or resolved by the memory bound or another reader.
                if let Some(i) = state.index_of(entry.seq) {
                    if has_deferred(&state.entries[i].entry) {
                        state.replace(i, entry);
                    }
                }
            }
        }
        while state.resolve_oldest() {}
        state
    }
}

#[cfg(test)]
mod tests {
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
        let batch = encoded(3);
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
        let batch = encoded(3);
        let partition = |deferred: Option<DeferredDigests>, digests| ProducePartition {
            topic: "orders".into(),
            partition: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            record_count: 3,
            first_timestamp: -1,
            max_timestamp: -1,
            base_offset: None,
            error_code: None,
            crc: None,
            digests,
            deferred,
        };
        // A computed batch that uses up the bound but two, then a deferred one of three and a
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
}
