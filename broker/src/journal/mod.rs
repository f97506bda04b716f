//! The journal: every request the cluster receives, in one cluster-wide arrival order.
//!
//! A request gets its sequence number the moment its whole frame has been read, before it is
//! handled, across every broker and connection; numbering and appending happen under one lock,
//! so the journal never holds entry n+1 before entry n. The entry is completed when the request
//! has been answered (or left unanswered), with the response's time and error codes.
//!
//! Memory is bounded twice, in entries ([`DEFAULT_CAPACITY`]) and in bytes
//! ([`DEFAULT_MAX_BYTES`], each entry's heap size estimated when it is appended and again when
//! it is completed): past either bound the oldest entries go, and [`JournalSnapshot::evicted`]
//! counts them. A request summary naming more than [`summary::MAX_SUMMARY_ITEMS`] partitions
//! keeps the first ones and counts the rest ([`Entry::dropped`]). Entries are shared
//! (`Arc<Entry>`) between memory, the live subscribers and the control API's readers, which
//! page through memory instead of copying it. A JSON Lines sink, when set, receives every entry
//! once it is complete and is never evicted from by the bounds; since requests on different
//! connections complete in any order, its lines are in completion order — sort by `seq` for
//! arrival order.
//!
//! Cluster operations (a broker taken down or brought up, a leader or coordinator moved) and
//! retention's deletions are entries of their own, numbered in the same order, with
//! [`Entry::operation`] set and no API.

mod admin_summary;
mod changes;
mod consumer_summary;
mod deferred;
mod hand_over;
mod names;
mod pages;
mod request;
mod response;
mod size;
mod snapshot;
mod store;
pub mod summary;
mod txn_admin_summary;
mod txn_summary;

use std::borrow::Cow;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::state::failover::LeaderChange;
pub(crate) use names::Names;
pub(crate) use pages::{Cursor, LivePage};
pub use snapshot::JournalSnapshot;
pub use store::SUBSCRIBER_BACKLOG;
pub(crate) use store::{Arrival, Journal, Sink};
pub use summary::{
    AbortedTransaction, CommitPartition, DeletedTopic, FetchPartition, FetchSummary, FetchedOffset,
    GroupMemberSummary, InitProducerIdSummary, JoinGroupSummary, LeaveGroupSummary,
    ListOffsetsPartition, ListOffsetsSummary, MemberAssignment, MetadataSummary,
    OffsetCommitSummary, OffsetFetchSummary, ProducePartition, ProduceSummary, RecordDigest,
    RequestSummary, ResponseSummary, SyncGroupSummary, TopicPartitions,
};

/// Default capacity, in entries.
pub const DEFAULT_CAPACITY: usize = 1_000_000;

/// Default bound of the journal in memory, in bytes of heap (estimated): 512 MiB. An ordinary
/// entry (a Produce or Fetch of a few partitions) is estimated at 0.5–1 KiB, so the default
/// keeps about as many of them as [`DEFAULT_CAPACITY`]; it also holds the largest entries a
/// request can make ([`summary::MAX_SUMMARY_ITEMS`] partitions, about 10 MiB each) by the
/// dozen, while staying a fraction of a laptop's memory, also with a few clusters side by side.
pub const DEFAULT_MAX_BYTES: usize = 512 * 1024 * 1024;

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
    /// The client id from the request header: a string shared by the entries of one
    /// connection's requests (`Arc<str>`, allocated once while the id stays the same), written
    /// as a JSON string.
    #[serde(default)]
    pub client_id: Option<Arc<str>>,
    /// Kafka's API name (`Produce`, `Fetch`, …), or `Unknown(<key>)`; `null` for a frame too
    /// short to carry one. Borrowed for the names kmock knows (shared, not allocated per
    /// entry), owned for an unknown key and when read back from JSON.
    pub api: Option<Cow<'static, str>>,
    /// API version asked, when readable.
    pub version: Option<i16>,
    /// Correlation id, when readable.
    pub correlation_id: Option<i32>,
    /// The decoded request; `None` for a bad request.
    pub request: Option<RequestSummary>,
    /// Why the frame could not be handled (the connection was closed); `None` for a good one.
    pub bad_request: Option<String>,
    /// Proxy mode only: why a request whose header reads but whose body the codec does not
    /// decode (an API or version newer than kafka-protocol knows, or a malformed body) was
    /// forwarded untouched, the connection kept open (then `request` is `"other"`); absent
    /// from the JSON when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undecoded: Option<String>,
    /// Why kmock closed the connection after this request instead of answering it: a fault
    /// (`disconnect`, an `error` on an acks = 0 Produce), or Kafka's own behaviour for the
    /// request (a failed acks = 0 Produce, a JoinGroup naming one protocol twice), or an
    /// answer the codec could not encode; absent from the JSON when `None`. A bad frame's
    /// reason is `bad_request`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<String>,
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
/// partition's leader epoch; `__consumer_offsets` partitions are group coordinators,
/// `__transaction_state` partitions transaction coordinators).
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
    /// A transactional id's transaction coordinator was moved (with every transactional id
    /// on its `__transaction_state` partition).
    MoveTransactionCoordinator {
        /// Transactional id.
        transactional_id: String,
        /// The new coordinator.
        node_id: i32,
        /// The change (empty when it already coordinated the id).
        leader_changes: Vec<LeaderChange>,
    },
    /// Retention deleted a partition's oldest segments, as Kafka's `UnifiedLog
    /// .deleteOldSegments` does (past `retention.bytes` or `retention.ms`, or wholly below the
    /// log start offset a DeleteRecords set): on the retention timer, at
    /// [`crate::Cluster::check_retention`], or after a Produce append (the `retention.bytes`
    /// pass alone, numbered after that Produce request). The entry's `broker` is the
    /// partition's leader. Kafka logs these deletions; nothing tells a client.
    Retention {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// The log start offset after the deletion (where a DeleteRecords had already set it,
        /// when the segments deleted lay wholly below it).
        log_start_offset: i64,
        /// Bytes of record batches deleted.
        deleted_bytes: u64,
    },
    /// The group coordinator converted a group between the classic protocol and the KIP-848
    /// consumer protocol (Kafka 4's online migration, `group.consumer.migration.policy`): not
    /// an operation anyone asked for, journaled so that the conversion shows. `broker` is the
    /// group's coordinator.
    GroupConverted {
        /// Group id.
        group_id: String,
        /// The group type now: `consumer` (upgraded by a ConsumerGroupHeartbeat) or
        /// `classic` (downgraded when its last consumer-protocol member left).
        to: String,
        /// The member whose joining (upgrade) or leaving (downgrade) converted it.
        member_id: String,
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
            | Self::MoveCoordinator { leader_changes, .. }
            | Self::MoveTransactionCoordinator { leader_changes, .. } => leader_changes,
            Self::Retention { .. } | Self::GroupConverted { .. } | Self::Reset => &[],
        }
    }

    /// The [`Self::Retention`] entry of what retention `deleted` from `topic`'s `partition`.
    pub(crate) fn retention(
        topic: &str,
        partition: i32,
        deleted: crate::state::topics::Deleted,
    ) -> Self {
        Self::Retention {
            topic: topic.to_owned(),
            partition,
            log_start_offset: deleted.log_start_offset,
            deleted_bytes: deleted.bytes,
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
            undecoded: None,
            closed: None,
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
                .map(|p| (&*p.topic, p.partition))
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
            Some(RequestSummary::AddPartitionsToTxn(s)) => s
                .partitions
                .iter()
                .map(|p| (p.topic.as_str(), p.partition))
                .collect(),
            Some(RequestSummary::TxnOffsetCommit(s)) => s
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

    /// The transactional id the request carries (Produce, InitProducerId and the transaction
    /// APIs).
    pub fn transactional_id(&self) -> Option<&str> {
        match &self.request {
            Some(RequestSummary::Produce(s)) => s.transactional_id.as_deref(),
            Some(RequestSummary::InitProducerId(s)) => s.transactional_id.as_deref(),
            Some(RequestSummary::AddPartitionsToTxn(s)) => Some(&s.transactional_id),
            Some(RequestSummary::AddOffsetsToTxn(s)) => Some(&s.transactional_id),
            Some(RequestSummary::TxnOffsetCommit(s)) => Some(&s.transactional_id),
            Some(RequestSummary::EndTxn(s)) => Some(&s.transactional_id),
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
            Some(RequestSummary::AddOffsetsToTxn(s)) => vec![s.group_id.as_str()],
            Some(RequestSummary::TxnOffsetCommit(s)) => vec![s.group_id.as_str()],
            Some(RequestSummary::ConsumerGroupHeartbeat(s)) => vec![s.group_id.as_str()],
            _ => Vec::new(),
        }
    }

    /// How many items (partitions, offsets) the request summary dropped past
    /// [`summary::MAX_SUMMARY_ITEMS`]; 0 for a summary kept whole.
    pub fn dropped(&self) -> u64 {
        self.request.as_ref().map_or(0, RequestSummary::dropped)
    }
}

/// One partition of an OffsetCommit request, with the entry it came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommit {
    /// The whole entry (seq, conn, times, …), shared by the items of one request.
    pub entry: Arc<Entry>,
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
    /// The whole entry (seq, conn, times, …), shared by the items of one request.
    pub entry: Arc<Entry>,
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

pub(crate) fn write_line(out: &mut impl Write, entry: &Entry) -> Result<(), JournalError> {
    serde_json::to_writer(&mut *out, entry).map_err(|e| JournalError::Json(e.to_string()))?;
    out.write_all(b"\n")
        .map_err(|e| JournalError::Json(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Produce line as kmock wrote it before batches had identity (README's example).
    const BEFORE_DIGESTS: &str = r#"{"seq":3,"at_us":1023066,"broker":1,"conn":1,"peer":"127.0.0.1:46692","client_id":"rdkafka","api":"Produce","version":7,"correlation_id":3,"request":{"produce":{"transactional_id":null,"acks":-1,"timeout_ms":30000,"partitions":[{"topic":"orders","partition":2,"producer_id":-1,"producer_epoch":-1,"base_sequence":-1,"record_count":2,"base_offset":0,"error_code":0}]}},"bad_request":null,"response":{"at_us":1023272,"error_codes":[]},"faults":[]}"#;

    fn batch(entry: &Entry) -> &ProducePartition {
        match &entry.request {
            Some(RequestSummary::Produce(p)) => &p.partitions[0],
            other => panic!("not a Produce: {other:?}"),
        }
    }

    /// Lines as kmock writes them (README's examples), with a client id and a topic (shared
    /// strings in memory) and without a client id.
    const CURRENT: [&str; 2] = [
        r#"{"seq":3,"at_us":1023066,"broker":1,"conn":1,"peer":"127.0.0.1:46692","client_id":"rdkafka","api":"Produce","version":7,"correlation_id":3,"request":{"produce":{"transactional_id":null,"acks":-1,"timeout_ms":30000,"partitions":[{"topic":"orders","partition":2,"producer_id":-1,"producer_epoch":-1,"base_sequence":-1,"record_count":2,"first_timestamp":1796112000123,"max_timestamp":1796112000125,"base_offset":0,"error_code":0}]}},"bad_request":null,"response":{"at_us":1023272,"sending_us":1023212,"error_codes":[]},"faults":[]}"#,
        r#"{"seq":14,"at_us":2093122,"broker":1,"conn":3,"peer":"127.0.0.1:46710","client_id":null,"api":null,"version":null,"correlation_id":null,"request":null,"bad_request":"frame of 3 bytes is too short for a request header (at least 8)","response":null,"faults":[]}"#,
    ];

    #[test]
    fn shared_names_are_written_and_read_as_plain_strings() {
        for line in CURRENT {
            let entry = read_jsonl(line.as_bytes()).unwrap().remove(0);
            let mut written = Vec::new();
            write_line(&mut written, &entry).unwrap();
            assert_eq!(String::from_utf8(written).unwrap(), format!("{line}\n"));
        }
        let entry = read_jsonl(CURRENT[0].as_bytes()).unwrap().remove(0);
        assert_eq!(
            (entry.client_id.as_deref(), &*batch(&entry).topic),
            (Some("rdkafka"), "orders")
        );
    }

    #[test]
    fn a_journal_without_crc_or_digests_still_loads() {
        let entries = read_jsonl(BEFORE_DIGESTS.as_bytes()).unwrap();
        let b = batch(&entries[0]);
        assert_eq!((b.crc, b.digests.as_ref()), (None, None));
    }

    #[test]
    fn crc_and_digests_are_written_and_read_back() {
        let mut entry = read_jsonl(BEFORE_DIGESTS.as_bytes()).unwrap().remove(0);
        if let Some(RequestSummary::Produce(p)) = &mut entry.request {
            p.partitions[0].crc = Some(0x8f3a_2b1c);
            p.partitions[0].digests = Some(vec![RecordDigest(1), RecordDigest(u64::MAX)]);
        }
        let mut line = Vec::new();
        write_line(&mut line, &entry).unwrap();
        let text = String::from_utf8(line.clone()).unwrap();
        assert!(
            text.contains(r#""crc":2402954012,"digests":["0000000000000001","ffffffffffffffff"]"#),
            "{text}"
        );
        assert_eq!(read_jsonl(&line[..]).unwrap(), vec![entry]);
    }
}
