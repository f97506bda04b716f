//! The cluster's journal in memory ([`Journal`]): numbering, the two bounds (entries and
//! bytes), completion, the JSON Lines sink and the live subscribers. The pages the control API
//! reads without copying are in `pages.rs`.
//!
//! Entries are kept as `Arc<Entry>`: a completed entry is shared, never copied, with the
//! subscribers and with the readers of the control API. Completed entries are also listed in
//! completion order (the completion log), which live readers follow by position; an entry
//! evicted from memory leaves a gap there, and a reader that reaches a gap has fallen behind.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::Instant;

use super::changes::{Changed, Changes};
use super::deferred::{has_deferred, resolve};
use super::hand_over::{HandOver, HandOvers};
use super::{size, write_line, ClusterOperation, Entry, JournalError, JournalSnapshot};

/// Where a cluster operation's entry comes from: no broker, no connection, no peer.
const OPERATION: Arrival = Arrival {
    broker: -1,
    conn: 0,
    peer: SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0),
};

/// Completed entries a subscriber may fall behind by before it misses some
/// (`RecvError::Lagged`).
pub const SUBSCRIBER_BACKLOG: usize = 16 * 1024;

/// Items the completion log may hold beyond the entries in memory: reset markers, and the
/// entries completed just before a reset, for live readers still on their way to them.
const LOG_SLACK: usize = 1024;

/// Where an entry came from, before it has a number.
#[derive(Debug, Clone)]
pub(crate) struct Arrival {
    pub broker: i32,
    pub conn: u64,
    pub peer: SocketAddr,
}

/// The cluster's journal.
#[derive(Debug)]
pub(crate) struct Journal {
    /// The cluster's start on Tokio's clock (the clock of its timers and of timed fault
    /// rules; paused in tests with `tokio::time::pause`).
    started: Instant,
    capacity: usize,
    max_bytes: usize,
    state: Mutex<State>,
    sink: Option<Mutex<Sink>>,
    /// Wakes the waits on appends and completions ([`Self::changed`], [`Self::wait_for`]).
    appended: Changes,
    /// Every entry as it completes, to whoever subscribed ([`Journal::subscribe`]).
    /// Shared, so the channel's slots stay small: it allocates all of them up front.
    completed: broadcast::Sender<Arc<Entry>>,
    /// Answers being written to their sockets, whose entries are not complete yet.
    hand_overs: HandOvers,
}

/// One entry in memory.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) entry: Arc<Entry>,
    /// Its estimated heap size ([`size::entry_bytes`]).
    pub(super) bytes: usize,
    /// Its position in the completion log, once complete.
    pub(super) done: Option<u64>,
}

/// A completed entry in the completion log, with its estimated size; `None` once evicted.
pub(super) type Logged = Option<(Arc<Entry>, usize)>;

#[derive(Debug, Default)]
pub(super) struct State {
    /// The newest entries, in seq order.
    pub(super) entries: VecDeque<Slot>,
    /// The estimated bytes of `entries`.
    pub(super) bytes: usize,
    /// Entries dropped from memory before they were complete, kept until then for the sink.
    pub(super) unfinished: HashMap<u64, Entry>,
    /// Completed entries in completion order, for live readers.
    pub(super) log: VecDeque<Logged>,
    /// The completion position of `log`'s front.
    pub(super) log_base: u64,
    pub(super) next_seq: u64,
    pub(super) evicted: u64,
    /// The seqs of completed entries that may still hold records instead of their digests,
    /// in completion order (`deferred.rs`); some may have left memory or been resolved.
    pub(super) deferred: VecDeque<u64>,
}

/// Where complete entries are written as JSON Lines.
pub(crate) struct Sink(pub Box<dyn Write + Send>);

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink")
    }
}

impl Journal {
    /// A journal keeping at most `capacity` entries and `max_bytes` estimated bytes.
    pub fn new(capacity: usize, max_bytes: usize, sink: Option<Sink>) -> Self {
        Self {
            started: Instant::now(),
            capacity,
            max_bytes,
            state: Mutex::new(State {
                next_seq: 1,
                ..State::default()
            }),
            sink: sink.map(Mutex::new),
            appended: Changes::default(),
            completed: broadcast::channel(SUBSCRIBER_BACKLOG).0,
            hand_overs: HandOvers::default(),
        }
    }

    /// Whether entries are kept anywhere: in memory (both bounds above 0) or in a sink. When
    /// not, the journal is off and [`Self::number`] is all a request needs.
    pub fn records(&self) -> bool {
        (self.capacity > 0 && self.max_bytes > 0) || self.sink.is_some()
    }

    /// Gives a request its seq without building an entry (journal off), counting it as evicted.
    pub fn number(&self) -> u64 {
        let mut state = self.state();
        let seq = state.next_seq;
        state.next_seq += 1;
        state.evicted += 1;
        seq
    }

    /// Starts handing answers to a socket; their entries are to be completed before the
    /// returned guard is dropped ([`Self::settled`] waits for it).
    pub fn hand_over(&self) -> HandOver<'_> {
        self.hand_overs.begin()
    }

    /// Waits (at most half a second) until the entries of every answer whose write to its
    /// socket had begun are complete: what a reader needs before it looks at the answers a
    /// client may already hold.
    pub async fn settled(&self) {
        self.hand_overs.settled().await;
    }

    /// µs since the cluster started.
    pub fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Numbers and appends an entry in one step; `fill` sets the request fields.
    pub fn append(&self, from: &Arrival, fill: impl FnOnce(&mut Entry)) -> u64 {
        // Allocated before the lock is taken, numbered under it.
        let mut entry = Arc::new(Entry::new(0, 0, from));
        let mut state = self.state();
        // Read the clock under the lock, so `at_us` never goes backwards as `seq` goes up.
        let at_us = self.now_us();
        let seq = state.next_seq;
        state.next_seq += 1;
        let unshared = Arc::get_mut(&mut entry).expect("not shared yet");
        unshared.seq = seq;
        unshared.at_us = at_us;
        fill(unshared);
        let bytes = size::entry_bytes(unshared);
        state.bytes += bytes;
        state.entries.push_back(Slot {
            entry,
            bytes,
            done: None,
        });
        self.evict(&mut state);
        drop(state);
        self.appended.notify();
        seq
    }

    /// Completes entry `seq` and writes it to the sink, whether or not memory still holds it.
    ///
    /// The line reaches the sink before the completed entry can be seen in memory, so a reader
    /// who saw the completion finds the line whole in the sink.
    pub fn finish(&self, seq: u64, complete: impl FnOnce(&mut Entry)) {
        let mut sink = self
            .sink
            .as_ref()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()));
        let mut guard = self.state();
        let state = &mut *guard;
        let first = state.entries.front().map_or(u64::MAX, |s| s.entry.seq);
        let in_memory = seq
            .checked_sub(first)
            .and_then(|i| state.entries.get_mut(i as usize));
        let completed = match in_memory {
            Some(slot) => {
                // Copied only if a reader holds the entry while it is incomplete.
                let entry = Arc::make_mut(&mut slot.entry);
                complete(entry);
                if has_deferred(entry) {
                    if self.sink.is_some() || self.completed.receiver_count() > 0 {
                        resolve(entry);
                    } else {
                        state.deferred.push_back(seq);
                    }
                }
                let bytes = size::entry_bytes(entry);
                state.bytes = state.bytes - slot.bytes + bytes;
                slot.bytes = bytes;
                if slot.done.is_none() {
                    slot.done = Some(state.log_base + state.log.len() as u64);
                    state.log.push_back(Some((slot.entry.clone(), bytes)));
                }
                Some(slot.entry.clone())
            }
            None => state.unfinished.remove(&seq).map(|mut entry| {
                complete(&mut entry);
                resolve(&mut entry);
                Arc::new(entry)
            }),
        };
        if let Some(entry) = completed {
            self.publish(sink.as_deref_mut(), entry);
        }
        self.evict(state);
        drop(guard);
        drop(sink);
        self.appended.notify();
    }

    /// Drops the oldest entries while over either bound, leaving a gap in the completion log
    /// for each completed one, then trims the log.
    fn evict(&self, state: &mut State) {
        // Records held for their digests give way to the digests first (`deferred.rs`).
        while state.bytes > self.max_bytes && state.resolve_oldest() {}
        while state.entries.len() > self.capacity || state.bytes > self.max_bytes {
            let Some(slot) = state.entries.pop_front() else {
                break;
            };
            state.bytes -= slot.bytes;
            state.evicted += 1;
            match slot.done {
                Some(done) => {
                    let logged = done
                        .checked_sub(state.log_base)
                        .and_then(|i| state.log.get_mut(i as usize));
                    if let Some(logged) = logged {
                        *logged = None;
                    }
                }
                None if self.sink.is_some() => {
                    let entry = Arc::unwrap_or_clone(slot.entry);
                    state.unfinished.insert(entry.seq, entry);
                }
                None => {}
            }
        }
        let limit = state.entries.len() + LOG_SLACK;
        while matches!(state.log.front(), Some(None)) || state.log.len() > limit {
            state.log.pop_front();
            state.log_base += 1;
        }
        state.trim_deferred();
    }

    /// Hands a completed entry to subscribers and the sink. Called under the journal lock
    /// (and the sink's, taken first), so a subscriber that then reads memory sees each entry
    /// either complete there or later here. An entry still holding records (a subscriber
    /// came after [`Self::finish`] looked for one: [`Self::subscribe`] takes no lock) goes
    /// out with its digests, computed here; with nobody to take it, nothing is computed.
    pub(super) fn publish(&self, sink: Option<&mut Sink>, entry: Arc<Entry>) {
        if sink.is_none() && self.completed.receiver_count() == 0 {
            return;
        }
        let entry = if has_deferred(&entry) {
            let mut entry = Arc::unwrap_or_clone(entry);
            resolve(&mut entry);
            Arc::new(entry)
        } else {
            entry
        };
        if let Some(sink) = sink {
            let mut line = Vec::with_capacity(512);
            let written = write_line(&mut line, &entry).and_then(|()| {
                sink.0
                    .write_all(&line)
                    .and_then(|()| sink.0.flush())
                    .map_err(|e| JournalError::Json(e.to_string()))
            });
            if let Err(e) = written {
                tracing::error!("journal sink: {e}");
            }
        }
        if self.completed.receiver_count() > 0 {
            let _ = self.completed.send(entry);
        }
    }

    /// Journals a cluster operation as a complete entry of its own, when the journal records.
    pub fn record_operation(&self, node_id: i32, operation: ClusterOperation) {
        if !self.records() {
            return;
        }
        let from = Arrival {
            broker: node_id,
            ..OPERATION
        };
        let seq = self.append(&from, |entry| entry.operation = Some(operation));
        self.finish(seq, |_| {});
    }

    /// Every entry completed from now on, in completion order (the journal must record: see
    /// [`Self::records`]).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Entry>> {
        self.completed.subscribe()
    }

    /// Forgets every entry kept in memory (and the evicted count), then numbers `marker` and
    /// gives it to the sink, subscribers and live readers only. Numbering goes on, so nothing
    /// is numbered twice; requests still in flight reach the sink when they complete, as
    /// evicted ones do. Live readers still get the entries completed before the reset (at most
    /// [`LOG_SLACK`] of them).
    pub fn clear(&self, marker: ClusterOperation) {
        let mut sink = self
            .sink
            .as_ref()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()));
        let mut state = self.state();
        let in_flight: Vec<Entry> = std::mem::take(&mut state.entries)
            .into_iter()
            .filter(|slot| slot.done.is_none())
            .map(|slot| Arc::unwrap_or_clone(slot.entry))
            .collect();
        if self.sink.is_some() {
            state
                .unfinished
                .extend(in_flight.into_iter().map(|e| (e.seq, e)));
        } else {
            state.unfinished.clear();
        }
        state.bytes = 0;
        state.evicted = 0;
        state.deferred.clear();
        if self.records() {
            // Numbered under the same lock, so it falls between the entries it separates.
            let seq = state.next_seq;
            state.next_seq += 1;
            let mut entry = Entry::new(seq, self.now_us(), &OPERATION);
            entry.operation = Some(marker);
            let entry = Arc::new(entry);
            let bytes = size::entry_bytes(&entry);
            state.log.push_back(Some((entry.clone(), bytes)));
            self.publish(sink.as_deref_mut(), entry);
        }
        self.evict(&mut state);
        // What the completion log keeps for live readers goes to them with its digests.
        state.resolve_log();
        drop(state);
        drop(sink);
        self.appended.notify();
    }

    /// A copy of every entry in memory.
    pub fn snapshot(&self) -> JournalSnapshot {
        let state = self.resolved_state();
        JournalSnapshot {
            entries: state.entries.iter().map(|s| (*s.entry).clone()).collect(),
            evicted: state.evicted,
        }
    }

    /// Resolves at the next append or completion; enable it (or poll it once) before looking,
    /// so that nothing in between is missed.
    pub fn changed(&self) -> Changed<'_> {
        self.appended.changed()
    }

    /// Waits until an entry matching `pred` is in the journal (already there counts); woken
    /// by every append and every completion.
    pub async fn wait_for(
        &self,
        pred: impl Fn(&Entry) -> bool,
        timeout: Duration,
    ) -> Result<Entry, JournalError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let mut appended = self.appended.changed();
            appended.enable();
            if let Some(found) = self
                .resolved_state()
                .entries
                .iter()
                .find(|s| pred(&s.entry))
            {
                return Ok((*found.entry).clone());
            }
            if tokio::time::timeout_at(deadline, appended).await.is_err() {
                let state = self.resolved_state();
                let skip = state.entries.len().saturating_sub(10);
                let mut last = Vec::new();
                for slot in state.entries.iter().skip(skip) {
                    let _ = write_line(&mut last, &slot.entry);
                }
                return Err(JournalError::Timeout {
                    timeout,
                    last: String::from_utf8_lossy(&last).into_owned(),
                });
            }
        }
    }
}
