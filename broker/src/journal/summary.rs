//! Decoded summaries of requests and responses, as the journal keeps them.
//!
//! Full for what ordering depends on (Produce batches, OffsetCommit offsets, group membership
//! and assignments, Fetch and ListOffsets positions, producer ids), the common entry fields
//! only for every other API. Summaries hold no record
//! contents: records stay in the partition logs.

use std::sync::Arc;

use kafka_protocol::protocol::StrBytes;
use serde::{Deserialize, Serialize};

use crate::state::batch::DeferredDigests;
pub use crate::state::batch::RecordDigest;

pub use super::admin_summary::*;
pub(crate) use super::consumer_summary::topic_names;
pub use super::consumer_summary::*;
pub(crate) use super::request::{add_digests, summarize};
pub(crate) use super::response::{complete, error_codes};
pub use super::txn_admin_summary::*;
pub use super::txn_summary::*;

/// Most items one summary keeps in its list: the partitions of a Produce, Fetch, ListOffsets
/// or OffsetCommit request, the offsets of an OffsetFetch answer. Past it the first ones are
/// kept and the rest counted (`dropped_partitions`, `dropped_offsets`; [`super::Entry::dropped`]),
/// so that one hostile request cannot fill memory. No client sends that many: a request goes
/// to one broker, and Kafka's guidance is a few thousand partitions a broker; a consumer
/// group's commit names its assigned partitions, far fewer than 100,000 in any deployment we
/// know of. A kept partition costs about 100 bytes, so a summary stays near 10 MiB.
pub const MAX_SUMMARY_ITEMS: usize = 100_000;

/// Items dropped when a list of `total` kept `kept`.
pub(crate) fn bounded_len(total: usize, kept: usize) -> u64 {
    total.saturating_sub(kept) as u64
}

/// `serde`'s default for a header field an older journal line does not carry.
fn unknown() -> i64 {
    -1
}

/// `serde`'s test for a count left out of JSON when zero.
pub(super) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What the journal records of a request, by API. Serialized externally tagged:
/// `{"produce": {…}}`, or `"other"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RequestSummary {
    /// Produce: every partition's batch header, and where it went.
    Produce(ProduceSummary),
    /// Fetch: every partition's fetch offset, and what came back.
    Fetch(FetchSummary),
    /// ListOffsets: every partition's timestamp asked, and the offset returned.
    ListOffsets(ListOffsetsSummary),
    /// InitProducerId: the ids asked for and given.
    InitProducerId(InitProducerIdSummary),
    /// OffsetCommit: the group, generation, member, and every partition's offset.
    OffsetCommit(OffsetCommitSummary),
    /// OffsetFetch: the groups asked, and the offsets answered.
    OffsetFetch(OffsetFetchSummary),
    /// JoinGroup: the member joining, and the generation it got.
    JoinGroup(JoinGroupSummary),
    /// SyncGroup: the assignments sent (by the leader), and the one answered.
    SyncGroup(SyncGroupSummary),
    /// Heartbeat: the member and generation.
    Heartbeat(GroupMemberSummary),
    /// LeaveGroup: the members leaving.
    LeaveGroup(LeaveGroupSummary),
    /// DeleteTopics: the topics named, and how each deletion was answered.
    DeleteTopics(Vec<DeletedTopic>),
    /// Metadata: the topics asked about (`null` for all topics).
    Metadata(MetadataSummary),
    /// AddPartitionsToTxn: the transaction and the partitions added.
    AddPartitionsToTxn(AddPartitionsToTxnSummary),
    /// AddOffsetsToTxn: the transaction and the group added.
    AddOffsetsToTxn(AddOffsetsToTxnSummary),
    /// TxnOffsetCommit: the transaction, the group, member, generation and every offset.
    TxnOffsetCommit(TxnOffsetCommitSummary),
    /// EndTxn: the transaction, commit or abort, and the answer.
    EndTxn(EndTxnSummary),
    /// DescribeTransactions: the ids asked about, and their states answered.
    DescribeTransactions(DescribeTransactionsSummary),
    /// ListTransactions: the filters, and how many transactions were listed.
    ListTransactions(ListTransactionsSummary),
    /// DescribeProducers: the partitions asked about.
    DescribeProducers(DescribeProducersSummary),
    /// ConsumerGroupHeartbeat (KIP-848): the member, its epoch and owned partitions, and the
    /// epoch and assignment answered.
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatSummary),
    /// DeleteRecords: every partition's offset, and the log start offset answered.
    DeleteRecords(DeleteRecordsSummary),
    /// Any other API: the entry's common fields are all that is recorded.
    Other,
}

impl RequestSummary {
    /// Items of the summary's list dropped past [`MAX_SUMMARY_ITEMS`] (partitions, or the
    /// offsets of an OffsetFetch answer); 0 when kept whole.
    pub fn dropped(&self) -> u64 {
        match self {
            Self::Produce(s) => s.dropped_partitions,
            Self::Fetch(s) => s.dropped_partitions,
            Self::ListOffsets(s) => s.dropped_partitions,
            Self::OffsetCommit(s) => s.dropped_partitions,
            Self::OffsetFetch(s) => s.dropped_offsets,
            Self::Metadata(s) => s.dropped_topics,
            Self::AddPartitionsToTxn(s) => s.dropped_partitions,
            Self::TxnOffsetCommit(s) => s.dropped_partitions,
            Self::DescribeTransactions(s) => s.dropped_transactions,
            Self::ListTransactions(s) => s.dropped_filters,
            Self::DescribeProducers(s) => s.dropped_partitions,
            Self::DeleteRecords(s) => s.dropped_partitions,
            _ => 0,
        }
    }
}

/// A Metadata request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataSummary {
    /// The topics asked about, in request order (a topic named only by its id, v10+, by its
    /// name, or the id as text when unknown); `None` for all topics (`null` in the request, or
    /// an empty list at v0, as Kafka reads it).
    pub topics: Option<Vec<String>>,
    /// Topics past [`MAX_SUMMARY_ITEMS`], counted, not kept (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_topics: u64,
}

/// A Produce request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceSummary {
    /// Transactional id, if any.
    pub transactional_id: Option<String>,
    /// acks: 0, 1 or -1.
    pub acks: i16,
    /// Request timeout, ms.
    pub timeout_ms: i32,
    /// One item per partition, in request order.
    pub partitions: Vec<ProducePartition>,
    /// Partitions past [`MAX_SUMMARY_ITEMS`], counted, not kept (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_partitions: u64,
}

/// One partition's batch in a Produce request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducePartition {
    /// Topic name (the topic id, as text, when a v13+ request names an unknown id): a string
    /// shared by the entries of one connection's requests naming the topic (`Arc<str>`),
    /// written as a JSON string.
    pub topic: Arc<str>,
    /// Partition index.
    pub partition: i32,
    /// Producer id from the batch header, -1 when not idempotent or unreadable.
    pub producer_id: i64,
    /// Producer epoch from the batch header, -1 when not idempotent or unreadable.
    pub producer_epoch: i16,
    /// Base sequence from the batch header, -1 when not idempotent or unreadable.
    pub base_sequence: i32,
    /// Record count from the batch header, 0 when unreadable.
    pub record_count: i32,
    /// Timestamp of the first record from the batch header (as the client set it, ms since
    /// the epoch), -1 when unreadable or absent from older JSON.
    #[serde(default = "unknown")]
    pub first_timestamp: i64,
    /// Largest record timestamp from the batch header (as the client set it, ms since the
    /// epoch), -1 when unreadable or absent from older JSON.
    #[serde(default = "unknown")]
    pub max_timestamp: i64,
    /// Offset the broker gave the first record (the original's, for a duplicate); `None` until
    /// answered, or when refused or unanswered.
    pub base_offset: Option<i64>,
    /// Error code answered for this partition; `None` until answered or when unanswered.
    pub error_code: Option<i16>,
    /// The batch's CRC-32C field as the client sent it; `None` when the batch is unreadable
    /// (and in journals written before kmock recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc: Option<u32>,
    /// The identity of each record of the batch, in record order
    /// (`state::batch::digest`), set once the broker has walked the batch: `None` for a
    /// batch it never walked (refused before its records were read, held back by a fault, or
    /// with the journal off), one whose records are invalid, one past the request's bound
    /// (`state::batch::digest::MAX_REQUEST_DIGESTS`, 2^20), and in older journals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digests: Option<Vec<RecordDigest>>,
    /// An uncompressed batch's records, held until the journal computes their `digests`
    /// (`journal::deferred`): `None` in every entry a reader gets; never written.
    #[serde(skip)]
    pub(crate) deferred: Option<DeferredDigests>,
}

/// A Fetch request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchSummary {
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
    /// Longest wait for `min_bytes`, ms.
    pub max_wait_ms: i32,
    /// Bytes to wait for.
    pub min_bytes: i32,
    /// Largest answer, bytes.
    pub max_bytes: i32,
    /// One item per partition, in request order.
    pub partitions: Vec<FetchPartition>,
    /// Partitions past [`MAX_SUMMARY_ITEMS`], counted, not kept (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_partitions: u64,
}

/// One partition of a Fetch request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchPartition {
    /// Topic name (the id as text for an unknown v13+ topic id).
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Offset asked for.
    pub fetch_offset: i64,
    /// High watermark answered; `None` until answered.
    pub high_watermark: Option<i64>,
    /// Bytes of records answered; `None` until answered.
    pub records_bytes: Option<usize>,
    /// Offset of the last record answered (the last whole batch's base offset plus its last
    /// offset delta); `None` until answered, when no whole batch was answered, and in older
    /// journals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_offset: Option<i64>,
    /// The aborted transactions a read_committed answer listed, for the client to drop their
    /// records (Kafka's `AbortedTransaction`s); `None` until answered, for read_uncommitted,
    /// and in older journals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted_transactions: Option<Vec<AbortedTransaction>>,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
}

/// An aborted transaction a read_committed Fetch answer listed: the client drops the records
/// of `producer_id` from `first_offset` up to that transaction's abort marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortedTransaction {
    /// The transaction's producer id.
    pub producer_id: i64,
    /// The offset of the transaction's first record in the partition.
    pub first_offset: i64,
}

/// A ListOffsets request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListOffsetsSummary {
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
    /// One item per partition, in request order.
    pub partitions: Vec<ListOffsetsPartition>,
    /// Partitions past [`MAX_SUMMARY_ITEMS`], counted, not kept (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_partitions: u64,
}

/// One partition of a ListOffsets request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListOffsetsPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Timestamp asked: -1 latest, -2 earliest, -3 max timestamp, else ms since the epoch.
    pub timestamp: i64,
    /// Offset answered; `None` until answered.
    pub offset: Option<i64>,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
}

/// An InitProducerId request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitProducerIdSummary {
    /// Transactional id, if any.
    pub transactional_id: Option<String>,
    /// Transaction timeout asked, ms.
    pub transaction_timeout_ms: i32,
    /// Producer id sent (KIP-360 bump), -1 for none.
    pub producer_id: i64,
    /// Producer epoch sent, -1 for none.
    pub producer_epoch: i16,
    /// Producer id given; `None` until answered.
    pub assigned_producer_id: Option<i64>,
    /// Producer epoch given; `None` until answered.
    pub assigned_producer_epoch: Option<i16>,
}

/// An OffsetCommit request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetCommitSummary {
    /// Group id.
    pub group_id: String,
    /// Generation id (member epoch from v9), -1 from outside group management.
    pub generation_id: i32,
    /// Member id, empty from outside group management.
    pub member_id: String,
    /// Static member id, if any.
    pub group_instance_id: Option<String>,
    /// One item per partition, in request order.
    pub partitions: Vec<CommitPartition>,
    /// Partitions past [`MAX_SUMMARY_ITEMS`], counted, not kept (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_partitions: u64,
}

/// One partition of an OffsetCommit request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The offset committed.
    pub offset: i64,
    /// Leader epoch sent with it, -1 for none.
    pub leader_epoch: i32,
    /// Metadata string sent with it.
    pub metadata: Option<String>,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
}

impl CommitPartition {
    /// A partition of `topic` as an OffsetCommit or TxnOffsetCommit request sends it: its
    /// index, the offset, the leader epoch (-1 for none) and the metadata; not yet answered.
    pub(super) fn sent(
        topic: &str,
        partition: i32,
        offset: i64,
        leader_epoch: i32,
        metadata: Option<&StrBytes>,
    ) -> Self {
        CommitPartition {
            topic: topic.to_owned(),
            partition,
            offset,
            leader_epoch,
            metadata: metadata.map(|m| m.as_str().to_owned()),
            error_code: None,
        }
    }
}

/// An OffsetFetch request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetFetchSummary {
    /// The groups asked about.
    pub groups: Vec<String>,
    /// Every partition answered with its committed offset (-1 for none); `None` until answered.
    pub offsets: Option<Vec<FetchedOffset>>,
    /// Offsets answered past [`MAX_SUMMARY_ITEMS`], counted, not kept (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_offsets: u64,
}

/// One committed offset in an OffsetFetch answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchedOffset {
    /// Group id.
    pub group_id: String,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Committed offset, -1 for none.
    pub offset: i64,
}

/// A JoinGroup request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinGroupSummary {
    /// Group id.
    pub group_id: String,
    /// Member id sent (empty on a first join).
    pub member_id: String,
    /// Static member id, if any.
    pub group_instance_id: Option<String>,
    /// Protocol type (`consumer`).
    pub protocol_type: String,
    /// Protocol names offered, in preference order.
    pub protocols: Vec<String>,
    /// Session timeout asked, ms.
    pub session_timeout_ms: i32,
    /// Rebalance timeout asked, ms.
    pub rebalance_timeout_ms: i32,
    /// Generation answered; `None` until answered.
    pub generation_id: Option<i32>,
    /// Member id answered (assigned on a first join); `None` until answered.
    pub assigned_member_id: Option<String>,
    /// Leader answered; `None` until answered.
    pub leader: Option<String>,
    /// Protocol (assignor) the group chose, as answered (`range`, `cooperative-sticky`, …);
    /// `None` until answered, when the answer names none (an error, v7+) or in journals
    /// written before kmock recorded it.
    #[serde(default)]
    pub protocol_name: Option<String>,
}

/// A SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncGroupSummary {
    /// Group id.
    pub group_id: String,
    /// Generation id.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// Static member id, if any.
    pub group_instance_id: Option<String>,
    /// The leader's assignments, one per member (empty from followers).
    pub assignments: Vec<MemberAssignment>,
    /// The member's own assignment answered; `None` until answered.
    pub assignment: Option<Vec<TopicPartitions>>,
}

/// One member's assignment in a SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberAssignment {
    /// Member id.
    pub member_id: String,
    /// The partitions, decoded as the consumer protocol's assignment; `None` when the bytes are
    /// not one (another protocol type).
    pub partitions: Option<Vec<TopicPartitions>>,
}

/// Partitions of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicPartitions {
    /// Topic name.
    pub topic: String,
    /// Partition indexes.
    pub partitions: Vec<i32>,
}

/// A Heartbeat request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMemberSummary {
    /// Group id.
    pub group_id: String,
    /// Generation id.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// Static member id, if any.
    pub group_instance_id: Option<String>,
}

/// A LeaveGroup request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaveGroupSummary {
    /// Group id.
    pub group_id: String,
    /// `(member id, static member id)` of each member leaving.
    pub members: Vec<(String, Option<String>)>,
}

/// One topic of a DeleteTopics request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedTopic {
    /// Topic name (the topic id, as text, when named by an unknown id).
    pub topic: String,
    /// Error code answered for it; `None` until answered or when unanswered.
    pub error_code: Option<i16>,
}

/// What the journal records of an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseSummary {
    /// When the answer was written, µs since the cluster started.
    pub at_us: u64,
    /// When its bytes began to be handed to the socket, µs since the cluster started: the
    /// client cannot have read the answer before (`at_us` is taken once the write is done, so
    /// a request the client sent on reading the answer may arrive before it). `None` in older
    /// journals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sending_us: Option<u64>,
    /// Every distinct non-zero error code in the answer (top level, topics, partitions), in
    /// the order they appear.
    pub error_codes: Vec<i16>,
}
