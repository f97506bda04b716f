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
    /// holds, or holds resolved (also after each eviction, so that the queue stays about as
    /// long as memory is when nothing reads the journal).
    pub(super) fn trim_deferred(&mut self) {
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

    /// Resolves, under the lock, the entries only the completion log still holds: those
    /// completed before a reset ([`Journal::clear`]), kept there (at most `LOG_SLACK`) for
    /// the live readers on their way to them, which [`Journal::resolved_state`] no longer
    /// finds in memory.
    pub(super) fn resolve_log(&mut self) {
        for logged in self.log.iter_mut().flatten() {
            if has_deferred(&logged.0) {
                let mut entry = (*logged.0).clone();
                resolve(&mut entry);
                let bytes = size::entry_bytes(&entry);
                *logged = (Arc::new(entry), bytes);
            }
        }
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
#[path = "deferred_tests.rs"]
mod tests;
