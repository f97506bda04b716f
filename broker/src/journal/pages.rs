//! What readers of the journal take from memory without copying: where the journal stands
//! ([`Cursor`]), pages of entries in arrival order ([`Page`]) and in completion order
//! ([`LivePage`]), each bounded so that a filtered read holds the journal's lock briefly.

use std::sync::Arc;

use super::store::Journal;
use super::Entry;

/// A page stops once its entries reach this estimated size (and holds at least one entry):
/// what a reader that does not read can keep alive past eviction.
const PAGE_BYTES: usize = 1024 * 1024;

/// Most entries one page looks at, so that a filtered page holds the lock briefly.
const PAGE_SCAN: usize = 4096;

/// Where the journal stands, for a reader starting: what it may replay and follow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor {
    /// The seq of the oldest entry in memory (the next seq when memory is empty).
    pub first: u64,
    /// The seq of the newest entry numbered (0 for none).
    pub last: u64,
    /// The completion position: live entries are those completed from here on.
    pub done: u64,
}

/// Entries in arrival order, shared with memory ([`Journal::page`]).
#[derive(Debug)]
pub(crate) struct Page {
    pub entries: Vec<Arc<Entry>>,
    /// The last seq looked at: the next page starts after it.
    pub next: u64,
    /// Seqs in the range asked that had left memory.
    pub missed: u64,
}

/// Entries in completion order, shared with memory ([`Journal::live_page`]).
#[derive(Debug)]
pub(crate) enum LivePage {
    /// Entries, and the position after them.
    Entries(Vec<Arc<Entry>>, u64),
    /// The reader's position has left memory; at least this many completed entries are lost
    /// to it.
    Behind(u64),
}

impl Journal {
    /// Where the journal stands now.
    pub fn cursor(&self) -> Cursor {
        let state = self.state();
        Cursor {
            first: state
                .entries
                .front()
                .map_or(state.next_seq, |s| s.entry.seq),
            last: state.next_seq - 1,
            done: state.log_base + state.log.len() as u64,
        }
    }

    /// Entries with seq in `(after, until]` that `keep` keeps, in arrival order: at most `max`,
    /// about [`PAGE_BYTES`] of them, from at most [`PAGE_SCAN`] entries looked at.
    pub fn page(&self, after: u64, until: u64, max: usize, keep: impl Fn(&Entry) -> bool) -> Page {
        let state = self.resolved_state();
        let first = state
            .entries
            .front()
            .map_or(state.next_seq, |s| s.entry.seq);
        let mut page = Page {
            entries: Vec::new(),
            next: after,
            missed: 0,
        };
        if after >= until {
            return page;
        }
        if after + 1 < first {
            page.next = (first - 1).min(until);
            page.missed = page.next - after;
        }
        let (mut bytes, mut scanned) = (0, 0);
        let start = (page.next + 1).saturating_sub(first) as usize;
        for slot in state.entries.range(start.min(state.entries.len())..) {
            let full = page.entries.len() >= max || bytes >= PAGE_BYTES;
            if slot.entry.seq > until || scanned == PAGE_SCAN || full {
                break;
            }
            scanned += 1;
            page.next = slot.entry.seq;
            if keep(&slot.entry) {
                bytes += slot.bytes;
                page.entries.push(slot.entry.clone());
            }
        }
        page
    }

    /// Entries completed from position `from` on that `keep` keeps, in completion order, with
    /// the same limits as [`Self::page`]; [`LivePage::Behind`] when `from` has left memory.
    pub fn live_page(&self, from: u64, max: usize, keep: impl Fn(&Entry) -> bool) -> LivePage {
        let state = self.resolved_state();
        let gone = |i: usize| state.log.range(i..).filter(|l| l.is_none()).count() as u64;
        let Some(mut i) = from.checked_sub(state.log_base).map(|i| i as usize) else {
            return LivePage::Behind(state.log_base - from + gone(0));
        };
        let (mut out, mut bytes, mut scanned) = (Vec::new(), 0, 0);
        while let Some(logged) = state.log.get(i) {
            if out.len() >= max || bytes >= PAGE_BYTES || scanned == PAGE_SCAN {
                break;
            }
            let Some((entry, size)) = logged else {
                if out.is_empty() {
                    return LivePage::Behind(gone(i));
                }
                break;
            };
            scanned += 1;
            i += 1;
            if keep(entry) {
                bytes += size;
                out.push(entry.clone());
            }
        }
        LivePage::Entries(out, state.log_base + i as u64)
    }
}
