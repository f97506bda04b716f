//! Transactions: what the transaction coordinator knows of every transactional id, and the
//! offsets committed inside transactions until their transaction ends.
//!
//! As Apache Kafka's `TransactionMetadata` and `TransactionStateManager` (transaction version
//! 1: the client adds every partition with AddPartitionsToTxn and its group with
//! AddOffsetsToTxn). kmock writes the markers of an EndTxn while it answers it, so the
//! PrepareCommit and PrepareAbort states Kafka passes through last no time here and are not
//! kept: an EndTxn goes from Ongoing straight to CompleteCommit or CompleteAbort. The
//! coordinator's work on the cluster (markers, offsets) is [`coordinator`].

pub mod coordinator;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tokio::time::Instant;

use super::groups::CommittedOffset;

/// The state of a transactional id (Kafka's `TransactionState`, without the Prepare states
/// kmock never stays in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// Initialised (InitProducerId), no transaction begun.
    Empty,
    /// A transaction is open: partitions or a group were added.
    Ongoing,
    /// The last transaction was committed.
    CompleteCommit,
    /// The last transaction was aborted (by the client, a fencing InitProducerId or its
    /// timeout).
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name of the state, as DescribeTransactions answers it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
        }
    }
}

/// One transactional id's transaction.
#[derive(Debug, Clone)]
pub struct TxnMetadata {
    /// Producer id.
    pub producer_id: i64,
    /// Current producer epoch.
    pub producer_epoch: i16,
    /// The `transaction.timeout.ms` of the last InitProducerId, in ms.
    pub timeout_ms: i32,
    /// State.
    pub state: TxnState,
    /// Partitions of the open transaction (topic, partition).
    pub partitions: BTreeSet<(String, i32)>,
    /// Groups whose offsets the open transaction commits (AddOffsetsToTxn).
    pub groups: BTreeSet<String>,
    /// When the open transaction began (its first AddPartitionsToTxn or AddOffsetsToTxn).
    pub started: Option<Instant>,
    /// When the last transaction began, in ms since the Unix epoch (-1 before the first:
    /// Kafka's `txnStartTimestamp`, as DescribeTransactions answers it).
    pub start_time_ms: i64,
    /// Whether the last transition was made with transaction version 2 (Kafka's
    /// `clientTransactionVersion.supportsEpochBump`): an EndTxn v5+, or a partition or group
    /// added by a Produce v12+ or TxnOffsetCommit v5+. Then an EndTxn's epoch must be the
    /// current one while a transaction is open, and the one before the last bump (a retry)
    /// once it ended.
    pub epoch_bump: bool,
    /// The producer id before the last EndTxn rolled it over (its epoch was exhausted), to
    /// recognise a retry of that EndTxn.
    pub previous_producer_id: Option<i64>,
}

/// Every transactional id's transaction, and the offsets pending in open transactions.
#[derive(Debug, Default)]
pub struct Transactions {
    txns: HashMap<String, TxnMetadata>,
    /// Offsets of TxnOffsetCommit requests, by (group, producer id), until the transaction
    /// ends: moved to the group's committed offsets on commit, dropped on abort (Kafka's
    /// `pendingTransactionalOffsetCommits`).
    pending_offsets: HashMap<(String, i64), BTreeMap<(String, i32), CommittedOffset>>,
}

impl Transactions {
    /// The transaction of `transactional_id`, if it was ever initialised.
    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id)
    }

    /// Every transactional id and its transaction, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &TxnMetadata)> {
        self.txns.iter()
    }

    /// Offsets committed in the open transaction of `producer_id` for `group_id`, not yet
    /// visible to OffsetFetch.
    pub fn pending_offsets(
        &self,
        group_id: &str,
        producer_id: i64,
    ) -> Option<&BTreeMap<(String, i32), CommittedOffset>> {
        self.pending_offsets
            .get(&(group_id.to_owned(), producer_id))
    }

    /// Whether an open transaction has an offset of `group_id` for `topic`/`partition`
    /// pending (OffsetFetch's `require_stable` answers UNSTABLE_OFFSET_COMMIT then).
    pub fn has_pending_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        self.pending_offsets.iter().any(|((g, _), offsets)| {
            g == group_id && offsets.contains_key(&(topic.to_owned(), partition))
        })
    }

    /// Checks that producer `producer_id` at `producer_epoch` may act for `transactional_id`,
    /// in Kafka's order: an unknown id or another producer id is INVALID_PRODUCER_ID_MAPPING,
    /// another epoch PRODUCER_FENCED.
    ///
    /// # Errors
    /// As above, for the caller to map to what its API version knows.
    pub fn check_producer(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<&TxnMetadata, kafka_protocol::ResponseError> {
        use kafka_protocol::ResponseError::{InvalidProducerIdMapping, ProducerFenced};
        let txn = self
            .txns
            .get(transactional_id)
            .ok_or(InvalidProducerIdMapping)?;
        if txn.producer_id != producer_id {
            return Err(InvalidProducerIdMapping);
        }
        if txn.producer_epoch != producer_epoch {
            return Err(ProducerFenced);
        }
        Ok(txn)
    }
}

#[cfg(test)]
mod tests;
