//! The estimated heap size of an entry ([`entry_bytes`]), what the journal's bound in bytes
//! counts: the entry's allocations as glibc's malloc rounds them (16-byte steps, 32 bytes at
//! least, 8 of header), walked field by field, without serializing anything. It runs when an
//! entry is appended and again when it is completed, in time linear in the lists it holds.

use std::mem::size_of;

use super::summary::*;
use super::{ClusterOperation, Entry, LeaderChange};
use crate::state::batch::DeferredDigests;

/// What one entry costs beyond its own heap: the `Arc` around it (two counters), its slot in
/// memory and its item in the completion log.
const KEPT: usize = 2 * size_of::<usize>() + 40 + 24;

/// Bytes the allocator takes for a request of `n` bytes (none for 0).
fn alloc(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        ((n + 8 + 15) & !15).max(32)
    }
}

/// An entry's estimated heap size, in bytes: the entry itself with everything it owns.
pub(crate) fn entry_bytes(entry: &Entry) -> usize {
    KEPT + alloc(size_of::<Entry>())
        + entry.client_id.heap()
        + entry.api.heap()
        + entry.request.heap()
        + entry.bad_request.heap()
        + entry.undecoded.heap()
        + entry.closed.heap()
        + entry.response.as_ref().map_or(0, |r| r.error_codes.heap())
        + entry.faults.heap()
        + entry.operation.heap()
}

/// Heap owned beyond the value's own size.
trait Heap {
    fn heap(&self) -> usize;
}

impl Heap for String {
    fn heap(&self) -> usize {
        alloc(self.capacity())
    }
}

/// A shared name (a client id, a topic) counted as if the entry owned it: its string and the
/// two counters before it.
impl Heap for std::sync::Arc<str> {
    fn heap(&self) -> usize {
        alloc(2 * size_of::<usize>() + self.len())
    }
}

/// A borrowed name is shared, only an owned one is the entry's.
impl Heap for std::borrow::Cow<'static, str> {
    fn heap(&self) -> usize {
        match self {
            std::borrow::Cow::Borrowed(_) => 0,
            std::borrow::Cow::Owned(s) => s.heap(),
        }
    }
}

impl Heap for i16 {
    fn heap(&self) -> usize {
        0
    }
}

/// The records held for their digests, counted whole (`DeferredDigests::held_bytes`).
impl Heap for DeferredDigests {
    fn heap(&self) -> usize {
        alloc(self.held_bytes())
    }
}

impl Heap for RecordDigest {
    fn heap(&self) -> usize {
        0
    }
}

impl Heap for i64 {
    fn heap(&self) -> usize {
        0
    }
}

impl Heap for i32 {
    fn heap(&self) -> usize {
        0
    }
}

impl<T: Heap> Heap for Option<T> {
    fn heap(&self) -> usize {
        self.as_ref().map_or(0, Heap::heap)
    }
}

impl<T: Heap> Heap for Vec<T> {
    fn heap(&self) -> usize {
        alloc(self.capacity() * size_of::<T>()) + self.iter().map(Heap::heap).sum::<usize>()
    }
}

impl<A: Heap, B: Heap> Heap for (A, B) {
    fn heap(&self) -> usize {
        self.0.heap() + self.1.heap()
    }
}

/// Types whose heap is their strings (and lists) only, field by field.
macro_rules! heap_of_fields {
    ($($ty:ty => [$($field:ident),*]),* $(,)?) => {
        $(impl Heap for $ty {
            fn heap(&self) -> usize {
                0 $(+ self.$field.heap())*
            }
        })*
    };
}

heap_of_fields! {
    ProducePartition => [topic, digests, deferred],
    FetchPartition => [topic, aborted_transactions],
    AbortedTransaction => [],
    ListOffsetsPartition => [topic],
    CommitPartition => [topic, metadata],
    FetchedOffset => [group_id, topic],
    TopicPartitions => [topic, partitions],
    MemberAssignment => [member_id, partitions],
    DeletedTopic => [topic],
    LeaderChange => [topic],
    ProduceSummary => [transactional_id, partitions],
    FetchSummary => [partitions],
    ListOffsetsSummary => [partitions],
    InitProducerIdSummary => [transactional_id],
    OffsetCommitSummary => [group_id, member_id, group_instance_id, partitions],
    OffsetFetchSummary => [groups, offsets],
    JoinGroupSummary => [group_id, member_id, group_instance_id, protocol_type, protocols,
        assigned_member_id, leader, protocol_name],
    SyncGroupSummary => [group_id, member_id, group_instance_id, assignments, assignment],
    GroupMemberSummary => [group_id, member_id, group_instance_id],
    LeaveGroupSummary => [group_id, members],
    MetadataSummary => [topics],
    TxnPartition => [topic],
    AddPartitionsToTxnSummary => [transactional_id, partitions],
    AddOffsetsToTxnSummary => [transactional_id, group_id],
    TxnOffsetCommitSummary => [transactional_id, group_id, member_id, group_instance_id,
        partitions],
    EndTxnSummary => [transactional_id],
    DescribedTransaction => [transactional_id, state],
    DescribeTransactionsSummary => [transactions],
    ListTransactionsSummary => [state_filters, producer_id_filters, transactional_id_pattern],
    DescribeProducersSummary => [topics],
    ConsumerGroupHeartbeatSummary => [group_id, member_id, instance_id, subscribed_topic_names,
        subscribed_topic_regex, server_assignor, owned, answered_member_id, assignment, topic_names],
    DeletedRecords => [topic],
    DeleteRecordsSummary => [partitions],
}

impl Heap for uuid::Uuid {
    fn heap(&self) -> usize {
        0
    }
}

impl Heap for RequestSummary {
    fn heap(&self) -> usize {
        match self {
            Self::Produce(s) => s.heap(),
            Self::Fetch(s) => s.heap(),
            Self::ListOffsets(s) => s.heap(),
            Self::InitProducerId(s) => s.heap(),
            Self::OffsetCommit(s) => s.heap(),
            Self::OffsetFetch(s) => s.heap(),
            Self::JoinGroup(s) => s.heap(),
            Self::SyncGroup(s) => s.heap(),
            Self::Heartbeat(s) => s.heap(),
            Self::LeaveGroup(s) => s.heap(),
            Self::DeleteTopics(s) => s.heap(),
            Self::Metadata(s) => s.heap(),
            Self::AddPartitionsToTxn(s) => s.heap(),
            Self::AddOffsetsToTxn(s) => s.heap(),
            Self::TxnOffsetCommit(s) => s.heap(),
            Self::EndTxn(s) => s.heap(),
            Self::DescribeTransactions(s) => s.heap(),
            Self::ListTransactions(s) => s.heap(),
            Self::DescribeProducers(s) => s.heap(),
            Self::ConsumerGroupHeartbeat(s) => s.heap(),
            Self::DeleteRecords(s) => s.heap(),
            Self::Other => 0,
        }
    }
}

impl Heap for ClusterOperation {
    fn heap(&self) -> usize {
        let named = match self {
            Self::MoveLeader { topic, .. } | Self::Retention { topic, .. } => topic.heap(),
            Self::MoveCoordinator { group_id, .. } => group_id.heap(),
            Self::MoveTransactionCoordinator {
                transactional_id, ..
            } => transactional_id.heap(),
            _ => 0,
        };
        named
            + alloc(std::mem::size_of_val(self.leader_changes()))
            + self.leader_changes().iter().map(Heap::heap).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::records::Compression;

    use super::*;

    #[test]
    fn a_commit_partition_costs_its_item_and_its_topic_string() {
        let partition = CommitPartition {
            topic: "orders".into(),
            partition: 0,
            offset: 1,
            leader_epoch: -1,
            metadata: None,
            error_code: None,
        };
        let list = vec![partition; 1000];
        // Each "orders" string is a minimal allocation of its own.
        assert_eq!(
            list.heap(),
            alloc(1000 * size_of::<CommitPartition>()) + 1000 * 32
        );
    }

    #[test]
    fn a_produce_partition_costs_its_topic_string_and_its_digests() {
        let mut batch = ProducePartition {
            topic: "orders".into(),
            partition: 0,
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
            record_count: 100,
            base_offset: None,
            error_code: None,
            first_timestamp: -1,
            max_timestamp: -1,
            crc: Some(1),
            digests: None,
            deferred: None,
        };
        assert_eq!(batch.heap(), 32);
        batch.digests = Some(vec![RecordDigest(0); 100]);
        assert_eq!(batch.heap(), 32 + alloc(800));
        let records: Vec<_> = (0..100)
            .map(|_| kmock_client::record(b"k", b"value"))
            .collect();
        let encoded = kmock_client::encode_batch(&records, Compression::None).unwrap();
        batch.digests = None;
        batch.deferred = DeferredDigests::of_request(&encoded);
        assert_eq!(batch.heap(), 32 + alloc(encoded.len() - 61));
    }
}
