//! The journal: every request the cluster receives, in one cluster-wide arrival order.
//!
//! A request gets its sequence number the moment its whole frame has been read, before it is
//! handled, across every broker and connection; numbering and appending happen under one lock,
//! so the journal never holds entry n+1 before entry n. The entry is completed when the request
//! has been answered (or left unanswered), with the response's time and error codes.
//!
//! Memory is bounded by a capacity in entries: when full, the oldest entry goes and
//! [`JournalSnapshot::evicted`] counts it. A JSON Lines sink, when set, receives every entry
//! once it is complete and is never truncated; since requests on different connections complete
//! in any order, its lines are in completion order — sort by `seq` for arrival order.
//!
//! Cluster operations (a broker taken down or brought up, a leader or coordinator moved) are
//! entries of their own, numbered in the same order, with [`Entry::operation`] set and no API.

pub mod summary;

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

pub use crate::state::failover::LeaderChange;
pub use summary::{
    CommitPartition, DeletedTopic, FetchPartition, FetchSummary, FetchedOffset, GroupMemberSummary,
    InitProducerIdSummary, JoinGroupSummary, LeaveGroupSummary, ListOffsetsPartition,
    ListOffsetsSummary, MemberAssignment, OffsetCommitSummary, OffsetFetchSummary,
    ProducePartition, ProduceSummary, RequestSummary, ResponseSummary, SyncGroupSummary,
    TopicPartitions,
};

/// Default capacity, in entries.
pub const DEFAULT_CAPACITY: usize = 1_000_000;

/// One request as it arrived. Field names are stable: they are the JSON Lines format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Arrival order across the whole cluster, from 1.
    pub seq: u64,
    /// When the frame was read, µs since the cluster started (monotonic clock).
    pub at_us: u64,
    /// Node id of the broker whose listener read it.
    pub broker: i32,
    /// Connection id, unique within the cluster.
    pub conn: u64,
    /// The client's address.
    pub peer: SocketAddr,
    /// The client id from the request header.
    pub client_id: Option<String>,
    /// Kafka's API name (`Produce`, `Fetch`, …), or `Unknown(<key>)`; `null` for a frame too
    /// short to carry one.
    pub api: Option<String>,
    /// API version asked, when readable.
    pub version: Option<i16>,
    /// Correlation id, when readable.
    pub correlation_id: Option<i32>,
    /// The decoded request; `None` for a bad request.
    pub request: Option<RequestSummary>,
    /// Why the frame could not be handled (the connection was closed); `None` for a good one.
    pub bad_request: Option<String>,
    /// The answer; `None` while pending, and for requests never answered (acks = 0, closed).
    pub response: Option<ResponseSummary>,
    /// Names of the fault rules applied to this request.
    pub faults: Vec<String>,
    /// For a cluster operation's entry, what was done (then `api` is `None`, `conn` 0 and
    /// `broker` the node id acted on, -1 for a reset); `None` for a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<ClusterOperation>,
}

/// A cluster operation, as journaled, with the leader changes it caused (each bumping the
/// partition's leader epoch; `__consumer_offsets` partitions are group coordinators).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ClusterOperation {
    /// A broker was taken down: its connections closed, new ones refused.
    BrokerDown {
        /// The broker.
        node_id: i32,
        /// Leaders moved off it.
        leader_changes: Vec<LeaderChange>,
    },
    /// A broker came back and listens again on its port.
    BrokerUp {
        /// The broker.
        node_id: i32,
        /// Leaders moved back to it.
        leader_changes: Vec<LeaderChange>,
    },
    /// A partition's leader was moved.
    MoveLeader {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// The new leader.
        node_id: i32,
        /// The change (empty when it already led).
        leader_changes: Vec<LeaderChange>,
    },
    /// A group's coordinator was moved (with every group on its `__consumer_offsets`
    /// partition).
    MoveCoordinator {
        /// Group id.
        group_id: String,
        /// The new coordinator.
        node_id: i32,
        /// The change (empty when it already coordinated the group).
        leader_changes: Vec<LeaderChange>,
    },
    /// The cluster started afresh ([`crate::Cluster::reset`]): checks forget what came
    /// before. Written to a JSON Lines sink and to subscribers only, since the journal in
    /// memory is emptied by it.
    Reset,
}

impl ClusterOperation {
    /// The leader changes the operation caused.
    pub fn leader_changes(&self) -> &[LeaderChange] {
        match self {
            Self::BrokerDown { leader_changes, .. }
            | Self::BrokerUp { leader_changes, .. }
            | Self::MoveLeader { leader_changes, .. }
            | Self::MoveCoordinator { leader_changes, .. } => leader_changes,
            Self::Reset => &[],
        }
    }
}

impl Entry {
    /// An entry numbered `seq` with nothing recorded yet.
    fn new(seq: u64, at_us: u64, from: &Arrival) -> Self {
        Self {
            seq,
            at_us,
            broker: from.broker,
            conn: from.conn,
            peer: from.peer,
            client_id: None,
            api: None,
            version: None,
            correlation_id: None,
            request: None,
            bad_request: None,
            response: None,
            faults: Vec::new(),
            operation: None,
        }
    }

    /// Whether this entry is a request of `api` (Kafka's name, e.g. `"Produce"`).
    pub fn is(&self, api: &str) -> bool {
        self.api.as_deref() == Some(api)
    }

    /// The `(topic, partition)` pairs the request names (Produce, Fetch, ListOffsets,
    /// OffsetCommit), in request order; empty for other APIs.
    pub fn partitions(&self) -> Vec<(&str, i32)> {
        match &self.request {
            Some(RequestSummary::Produce(s)) => s
                .partitions
                .iter()
                .map(|p| (p.topic.as_str(), p.partition))
                .collect(),
            Some(RequestSummary::Fetch(s)) => s
                .partitions
                .iter()
                .map(|p| (p.topic.as_str(), p.partition))
                .collect(),
            Some(RequestSummary::ListOffsets(s)) => s
                .partitions
                .iter()
                .map(|p| (p.topic.as_str(), p.partition))
                .collect(),
            Some(RequestSummary::OffsetCommit(s)) => s
                .partitions
                .iter()
                .map(|p| (p.topic.as_str(), p.partition))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The topics the request names (those of [`Self::partitions`], and DeleteTopics'), each
    /// once, sorted.
    pub fn topics(&self) -> Vec<&str> {
        let mut topics: Vec<&str> = self.partitions().into_iter().map(|(t, _)| t).collect();
        if let Some(RequestSummary::DeleteTopics(deleted)) = &self.request {
            topics.extend(deleted.iter().map(|d| d.topic.as_str()));
        }
        topics.sort_unstable();
        topics.dedup();
        topics
    }

    /// The transactional id the request carries (Produce, InitProducerId).
    pub fn transactional_id(&self) -> Option<&str> {
        match &self.request {
            Some(RequestSummary::Produce(s)) => s.transactional_id.as_deref(),
            Some(RequestSummary::InitProducerId(s)) => s.transactional_id.as_deref(),
            _ => None,
        }
    }

    /// The producer ids of a Produce request's batches (-1 for non-idempotent ones).
    pub fn producer_ids(&self) -> Vec<i64> {
        match &self.request {
            Some(RequestSummary::Produce(s)) => {
                s.partitions.iter().map(|p| p.producer_id).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The consumer groups the request is about (group APIs), empty for other APIs.
    pub fn groups(&self) -> Vec<&str> {
        match &self.request {
            Some(RequestSummary::OffsetCommit(s)) => vec![s.group_id.as_str()],
            Some(RequestSummary::OffsetFetch(s)) => s.groups.iter().map(String::as_str).collect(),
            Some(RequestSummary::JoinGroup(s)) => vec![s.group_id.as_str()],
            Some(RequestSummary::SyncGroup(s)) => vec![s.group_id.as_str()],
            Some(RequestSummary::Heartbeat(s)) => vec![s.group_id.as_str()],
            Some(RequestSummary::LeaveGroup(s)) => vec![s.group_id.as_str()],
            _ => Vec::new(),
        }
    }
}

/// One partition of an OffsetCommit request, with the entry it came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommit {
    /// The whole entry (seq, conn, times, …).
    pub entry: Entry,
    /// Group id.
    pub group_id: String,
    /// Generation id sent.
    pub generation_id: i32,
    /// Member id sent.
    pub member_id: String,
    /// The partition's commit.
    pub commit: CommitPartition,
}

/// One partition's batch of a Produce request, with the entry it came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceBatch {
    /// The whole entry (seq, conn, times, …).
    pub entry: Entry,
    /// The partition's batch.
    pub batch: ProducePartition,
}

/// Why waiting on the journal failed.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// No matching entry arrived in time.
    #[error("no matching journal entry within {timeout:?}; the last entries were:\n{last}")]
    Timeout {
        /// How long was waited.
        timeout: Duration,
        /// The last entries seen, one JSON line each.
        last: String,
    },
    /// A JSON Lines journal could not be read or written.
    #[error("journal JSON Lines: {0}")]
    Json(String),
}

/// A copy of the journal at one moment, with ordered queries.
#[derive(Debug, Clone, Default)]
pub struct JournalSnapshot {
    entries: Vec<Entry>,
    evicted: u64,
}

impl JournalSnapshot {
    /// Every entry kept, in arrival order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// How many of the oldest entries were dropped to stay within the capacity.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Entries of one API (Kafka's name, e.g. `"Produce"`), in arrival order.
    pub fn api<'a>(&'a self, api: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries.iter().filter(move |e| e.is(api))
    }

    /// Entries of one connection, in arrival order.
    pub fn connection(&self, conn: u64) -> impl Iterator<Item = &Entry> + '_ {
        self.entries.iter().filter(move |e| e.conn == conn)
    }

    /// Entries whose request header carried this client id, in arrival order.
    pub fn client_id<'a>(&'a self, client_id: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.client_id.as_deref() == Some(client_id))
    }

    /// Entries naming this topic (Produce, Fetch, ListOffsets), in arrival order.
    pub fn topic<'a>(&'a self, topic: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.topics().contains(&topic))
    }

    /// Entries about this consumer group, in arrival order.
    pub fn group<'a>(&'a self, group_id: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.groups().contains(&group_id))
    }

    /// Entries naming this topic partition, in arrival order.
    pub fn partition<'a>(
        &'a self,
        topic: &'a str,
        partition: i32,
    ) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.partitions().contains(&(topic, partition)))
    }

    /// One item per partition of every OffsetCommit request, in arrival order (and request
    /// order within one request): what the client really committed, accepted or not.
    pub fn offset_commits(&self) -> Vec<OffsetCommit> {
        self.entries
            .iter()
            .filter_map(|e| match &e.request {
                Some(RequestSummary::OffsetCommit(s)) => {
                    Some(s.partitions.iter().map(move |p| OffsetCommit {
                        entry: e.clone(),
                        group_id: s.group_id.clone(),
                        generation_id: s.generation_id,
                        member_id: s.member_id.clone(),
                        commit: p.clone(),
                    }))
                }
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// One item per partition batch of every Produce request, in arrival order (and request
    /// order within one request).
    pub fn produce_batches(&self) -> Vec<ProduceBatch> {
        self.entries
            .iter()
            .filter_map(|e| match &e.request {
                Some(RequestSummary::Produce(s)) => {
                    Some(s.partitions.iter().map(move |b| ProduceBatch {
                        entry: e.clone(),
                        batch: b.clone(),
                    }))
                }
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Writes every entry as one JSON object a line.
    ///
    /// # Errors
    /// [`JournalError::Json`] when writing fails.
    pub fn write_jsonl(&self, mut out: impl Write) -> Result<(), JournalError> {
        for entry in &self.entries {
            write_line(&mut out, entry)?;
        }
        out.flush().map_err(|e| JournalError::Json(e.to_string()))
    }
}

/// Reads a JSON Lines journal (as written by [`JournalSnapshot::write_jsonl`] or
/// `kmock serve --journal`), sorted into arrival order. Blank lines are skipped.
///
/// # Errors
/// [`JournalError::Json`] naming the first line that is not an entry.
pub fn read_jsonl(input: impl BufRead) -> Result<Vec<Entry>, JournalError> {
    let mut entries = Vec::new();
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|e| JournalError::Json(e.to_string()))?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = serde_json::from_str(&line)
            .map_err(|e| JournalError::Json(format!("line {}: {e}", n + 1)))?;
        entries.push(entry);
    }
    entries.sort_by_key(|e: &Entry| e.seq);
    Ok(entries)
}

fn write_line(out: &mut impl Write, entry: &Entry) -> Result<(), JournalError> {
    serde_json::to_writer(&mut *out, entry).map_err(|e| JournalError::Json(e.to_string()))?;
    out.write_all(b"\n")
        .map_err(|e| JournalError::Json(e.to_string()))
}

/// Where a cluster operation's entry comes from: no broker, no connection, no peer.
const OPERATION: Arrival = Arrival {
    broker: -1,
    conn: 0,
    peer: SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0),
};

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
    started: Instant,
    capacity: usize,
    state: Mutex<State>,
    sink: Option<Mutex<Sink>>,
    appended: Notify,
    /// Every entry as it completes, to whoever subscribed ([`Journal::subscribe`]).
    /// Shared, so the channel's slots stay small: it allocates all of them up front.
    completed: tokio::sync::broadcast::Sender<std::sync::Arc<Entry>>,
}

/// Completed entries a subscriber may fall behind by before it misses some
/// (`RecvError::Lagged`).
pub const SUBSCRIBER_BACKLOG: usize = 16 * 1024;

#[derive(Debug, Default)]
struct State {
    /// The newest entries, in seq order, each with whether it is complete.
    entries: VecDeque<(Entry, bool)>,
    /// Entries dropped from memory before they were complete, kept until then for the sink.
    unfinished: HashMap<u64, Entry>,
    next_seq: u64,
    evicted: u64,
}

/// Where complete entries are written as JSON Lines.
pub(crate) struct Sink(pub Box<dyn Write + Send>);

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink")
    }
}

impl Journal {
    pub fn new(capacity: usize, sink: Option<Sink>) -> Self {
        Self {
            started: Instant::now(),
            capacity,
            state: Mutex::new(State {
                next_seq: 1,
                ..State::default()
            }),
            sink: sink.map(Mutex::new),
            appended: Notify::new(),
            completed: tokio::sync::broadcast::channel(SUBSCRIBER_BACKLOG).0,
        }
    }

    /// Whether entries are kept anywhere: in memory (capacity above 0) or in a sink. When not,
    /// the journal is off and [`Self::number`] is all a request needs.
    pub fn records(&self) -> bool {
        self.capacity > 0 || self.sink.is_some()
    }

    /// Gives a request its seq without building an entry (journal off), counting it as evicted.
    pub fn number(&self) -> u64 {
        let mut state = self.state();
        let seq = state.next_seq;
        state.next_seq += 1;
        state.evicted += 1;
        seq
    }

    /// µs since the cluster started.
    pub fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Numbers and appends an entry in one step; `fill` sets the request fields.
    pub fn append(&self, from: &Arrival, fill: impl FnOnce(&mut Entry)) -> u64 {
        let mut state = self.state();
        // Read the clock under the lock, so `at_us` never goes backwards as `seq` goes up.
        let at_us = self.now_us();
        let seq = state.next_seq;
        state.next_seq += 1;
        let mut entry = Entry::new(seq, at_us, from);
        fill(&mut entry);
        state.entries.push_back((entry, false));
        if state.entries.len() > self.capacity {
            if let Some((old, finished)) = state.entries.pop_front() {
                state.evicted += 1;
                if !finished && self.sink.is_some() {
                    state.unfinished.insert(old.seq, old);
                }
            }
        }
        drop(state);
        self.appended.notify_waiters();
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
        let mut state = self.state();
        let first = state.entries.front().map_or(u64::MAX, |(e, _)| e.seq);
        let in_memory = seq
            .checked_sub(first)
            .and_then(|i| state.entries.get_mut(i as usize));
        // A copy is made only for someone who reads it: the sink or a subscriber.
        let published = sink.is_some() || self.completed.receiver_count() > 0;
        let entry = match in_memory {
            Some((entry, finished)) => {
                complete(entry);
                *finished = true;
                published.then(|| entry.clone())
            }
            None => state.unfinished.remove(&seq).map(|mut entry| {
                complete(&mut entry);
                entry
            }),
        };
        if let Some(entry) = entry {
            self.publish(sink.as_deref_mut(), entry);
        }
        drop(state);
        drop(sink);
        self.appended.notify_waiters();
    }

    /// Hands a completed entry to subscribers and the sink. Called under the journal lock
    /// (and the sink's, taken first), so a subscriber that then reads memory sees each entry
    /// either complete there or later here. No subscriber, no copy.
    fn publish(&self, sink: Option<&mut Sink>, entry: Entry) {
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
            let _ = self.completed.send(std::sync::Arc::new(entry));
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
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<std::sync::Arc<Entry>> {
        self.completed.subscribe()
    }

    /// Forgets every entry kept in memory (and the evicted count), then numbers `marker` and
    /// gives it to the sink and subscribers only. Numbering goes on, so nothing is numbered
    /// twice; requests still in flight reach the sink when they complete, as evicted ones do.
    pub fn clear(&self, marker: ClusterOperation) {
        let mut sink = self
            .sink
            .as_ref()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()));
        let mut state = self.state();
        let in_flight: Vec<Entry> = std::mem::take(&mut state.entries)
            .into_iter()
            .filter(|(_, finished)| !finished)
            .map(|(entry, _)| entry)
            .collect();
        if self.sink.is_some() {
            state
                .unfinished
                .extend(in_flight.into_iter().map(|e| (e.seq, e)));
        } else {
            state.unfinished.clear();
        }
        state.evicted = 0;
        if !self.records() {
            return;
        }
        // Numbered under the same lock, so it falls between the entries it separates.
        let seq = state.next_seq;
        state.next_seq += 1;
        let mut entry = Entry::new(seq, self.now_us(), &OPERATION);
        entry.operation = Some(marker);
        self.publish(sink.as_deref_mut(), entry);
        drop(state);
        drop(sink);
        self.appended.notify_waiters();
    }

    pub fn snapshot(&self) -> JournalSnapshot {
        let state = self.state();
        JournalSnapshot {
            entries: state.entries.iter().map(|(e, _)| e.clone()).collect(),
            evicted: state.evicted,
        }
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
            let appended = self.appended.notified();
            tokio::pin!(appended);
            appended.as_mut().enable();
            if let Some((found, _)) = self.state().entries.iter().find(|(e, _)| pred(e)) {
                return Ok(found.clone());
            }
            if tokio::time::timeout_at(deadline, appended).await.is_err() {
                let state = self.state();
                let skip = state.entries.len().saturating_sub(10);
                let mut last = Vec::new();
                for (entry, _) in state.entries.iter().skip(skip) {
                    let _ = write_line(&mut last, entry);
                }
                return Err(JournalError::Timeout {
                    timeout,
                    last: String::from_utf8_lossy(&last).into_owned(),
                });
            }
        }
    }
}
