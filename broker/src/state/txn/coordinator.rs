//! The transaction coordinator's operations on the cluster, as Kafka's
//! `TransactionCoordinator` (transaction version 1): initialising a transactional producer
//! (fencing and aborting an open transaction), adding partitions and groups, ending a
//! transaction by writing a marker to each of its partitions and settling its group offsets,
//! and aborting transactions open past their timeout.
//!
//! The coordinator's own checks (that it is the coordinator, the transaction timeout) are the
//! handlers'; the errors here are the coordinator's, before any API version maps them
//! (PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for old versions).

use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{TxnMetadata, TxnState};
use crate::state::batch::control;
use crate::state::coordinator::partition_for;
use crate::state::groups::CommittedOffset;
use crate::state::producers::{Fenced, ProducerIdAndEpoch};
use crate::state::ClusterState;

/// A marker written to a partition when a transaction ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerWritten {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The marker's offset.
    pub offset: i64,
}

/// How a transaction ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// Producer id and epoch after the end (the epoch the markers carry).
    pub producer: ProducerIdAndEpoch,
    /// Whether it was committed.
    pub committed: bool,
    /// The markers written, in partition order (none for a retried EndTxn).
    pub markers: Vec<MarkerWritten>,
}

impl ClusterState {
    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId`): a retry of the
    /// last bump gets the current id; an open transaction is aborted with the epoch bumped once
    /// (fencing the producer that opened it) and the answer is CONCURRENT_TRANSACTIONS, so that
    /// the client's retry bumps again; otherwise a new id the first time, the epoch bumped
    /// after.
    ///
    /// # Errors
    /// PRODUCER_FENCED when `expected` (KIP-360) is neither the current id and epoch nor the
    /// ones before the last bump; CONCURRENT_TRANSACTIONS after aborting an open transaction.
    pub fn init_transactional_producer(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
        now_ms: i64,
    ) -> Result<ProducerIdAndEpoch, ResponseError> {
        let ongoing = self
            .transactions
            .txns
            .get(transactional_id)
            .is_some_and(|t| t.state == TxnState::Ongoing);
        if ongoing {
            let fenced = self
                .producers
                .fence(transactional_id, expected)
                .map_err(|Fenced| ResponseError::ProducerFenced)?;
            self.complete_transaction(transactional_id, fenced.producer_epoch, false, now_ms);
            return Err(ResponseError::ConcurrentTransactions);
        }
        let ids = self
            .producers
            .init_transactional(transactional_id, expected)
            .map_err(|Fenced| ResponseError::ProducerFenced)?;
        let txn = self
            .transactions
            .txns
            .entry(transactional_id.to_owned())
            .or_insert_with(|| TxnMetadata {
                producer_id: ids.producer_id,
                producer_epoch: ids.producer_epoch,
                timeout_ms,
                state: TxnState::Empty,
                partitions: Default::default(),
                groups: Default::default(),
                started: None,
                start_time_ms: -1,
                epoch_bump: false,
                previous_producer_id: None,
            });
        txn.producer_id = ids.producer_id;
        txn.producer_epoch = ids.producer_epoch;
        txn.timeout_ms = timeout_ms;
        txn.state = TxnState::Empty;
        txn.start_time_ms = -1;
        txn.epoch_bump = false;
        Ok(ids)
    }

    /// AddPartitionsToTxn (`partitions`) or AddOffsetsToTxn (`group`): the transaction becomes
    /// Ongoing (starting its timeout if it was not) with them added. `epoch_bump` says the
    /// add was made with transaction version 2 (by a Produce v12+, a TxnOffsetCommit v5+ or an
    /// AddPartitionsToTxn v5), as Kafka's `prepareAddPartitions` records its
    /// `clientTransactionVersion`.
    ///
    /// # Errors
    /// INVALID_PRODUCER_ID_MAPPING or PRODUCER_FENCED ([`super::Transactions::check_producer`]).
    pub fn add_to_transaction(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: &[(String, i32)],
        group: Option<&str>,
        (now, now_ms): (Instant, i64),
        epoch_bump: bool,
    ) -> Result<(), ResponseError> {
        self.transactions.check_producer(
            transactional_id,
            producer.producer_id,
            producer.producer_epoch,
        )?;
        let txn = self
            .transactions
            .txns
            .get_mut(transactional_id)
            .expect("checked above");
        if txn.state != TxnState::Ongoing {
            txn.started = Some(now);
            txn.start_time_ms = now_ms;
            txn.state = TxnState::Ongoing;
        }
        txn.epoch_bump = epoch_bump;
        txn.partitions.extend(partitions.iter().cloned());
        txn.groups.extend(group.map(str::to_owned));
        Ok(())
    }

    /// Whether the transaction of `transactional_id` holds `topic`/`partition`, as the
    /// coordinator answers a verification (KIP-890 part 1, Kafka's
    /// `handleVerifyPartitionsInTransaction`).
    ///
    /// # Errors
    /// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, or TRANSACTION_ABORTABLE for a partition
    /// not in the transaction.
    pub fn verify_in_transaction(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        topic: &str,
        partition: i32,
    ) -> Result<(), ResponseError> {
        let txn = self.transactions.check_producer(
            transactional_id,
            producer.producer_id,
            producer.producer_epoch,
        )?;
        if !txn.partitions.contains(&(topic.to_owned(), partition)) {
            return Err(ResponseError::TransactionAbortable);
        }
        Ok(())
    }

    /// Keeps the offsets of a TxnOffsetCommit pending until the transaction of `producer_id`
    /// ends.
    pub fn add_pending_offsets(
        &mut self,
        group_id: &str,
        producer_id: i64,
        offsets: impl IntoIterator<Item = ((String, i32), CommittedOffset)>,
    ) {
        self.transactions
            .pending_offsets
            .entry((group_id.to_owned(), producer_id))
            .or_default()
            .extend(offsets);
    }

    /// EndTxn (Kafka's `TransactionCoordinator.endTransaction`): an open transaction is
    /// committed or aborted; a retry of the EndTxn that ended it is answered again.
    ///
    /// With `bump` (EndTxn v5+, transaction version 2) the epoch is bumped: the markers carry
    /// the bumped epoch and the answer names it; when the epoch was exhausted (32766 or more,
    /// Kafka's `isProducerEpochExhausted`), the answer names a new producer id at epoch 0
    /// instead. After a version-2 transition the epoch sent must be the current one while a
    /// transaction is open or none began, and once it ended the one before the bump (a retry,
    /// or the last epoch of the rolled-over producer id); the current epoch with no transaction
    /// open is INVALID_TXN_STATE for a commit (as Kafka 4.4.0 answers it) and, with `bump`, an
    /// abort that bumps the epoch and marks nothing; any other is PRODUCER_FENCED.
    ///
    /// # Errors
    /// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, or INVALID_TXN_STATE when there is no
    /// open transaction to end that way.
    pub fn end_transaction(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        commit: bool,
        bump: bool,
        now_ms: i64,
    ) -> Result<Ended, ResponseError> {
        let txn = self
            .transactions
            .txns
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        let ended = matches!(
            txn.state,
            TxnState::CompleteCommit | TxnState::CompleteAbort
        );
        let retry_on_overflow = txn.epoch_bump
            && txn.previous_producer_id == Some(producer.producer_id)
            && producer.producer_epoch == i16::MAX - 1
            && txn.producer_epoch == 0;
        let retry_on_bump = txn.epoch_bump
            && i32::from(txn.producer_epoch) == i32::from(producer.producer_epoch) + 1;
        if txn.producer_id != producer.producer_id && !retry_on_overflow {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        let current_epoch = producer.producer_epoch == txn.producer_epoch;
        let retry = txn.epoch_bump && ended && (retry_on_bump || retry_on_overflow);
        if !(current_epoch || retry) {
            return Err(ResponseError::ProducerFenced);
        }
        // Transaction version 2 lets a producer abort with no transaction open (it may not
        // know whether its partitions were added): the epoch is bumped as by any end
        // (fixtures/conformance/txn_end_txn_with_nothing_open.txt).
        let empty_abort = bump
            && !commit
            && current_epoch
            && !retry
            && (txn.state == TxnState::Empty || (txn.epoch_bump && ended));
        if txn.epoch_bump && ended && !retry && !empty_abort {
            // The epoch of the next transaction, none begun: Kafka 4.4.0 answers
            // INVALID_TXN_STATE (fixtures/conformance/txn_v2_end_txn_bumps_the_epoch.txt).
            return Err(ResponseError::InvalidTxnState);
        }
        let current = ProducerIdAndEpoch {
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
        };
        match (txn.state, commit) {
            (TxnState::Ongoing, _) if bump => {
                Ok(self.end_with_bump(transactional_id, commit, now_ms))
            }
            _ if empty_abort => Ok(self.end_with_bump(transactional_id, false, now_ms)),
            (TxnState::Ongoing, _) => {
                let ended = self.complete_transaction(
                    transactional_id,
                    producer.producer_epoch,
                    commit,
                    now_ms,
                );
                if let Some(txn) = self.transactions.txns.get_mut(transactional_id) {
                    txn.epoch_bump = false;
                }
                Ok(ended)
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(Ended {
                producer: current,
                committed: commit,
                markers: Vec::new(),
            }),
            _ => Err(ResponseError::InvalidTxnState),
        }
    }

    /// Ends the open transaction (if any) of `transactional_id` with the epoch bump of
    /// transaction version 2: the markers carry the bumped epoch, and the answer names the
    /// producer id and epoch to go on with (a new id at epoch 0 once the epoch is exhausted).
    fn end_with_bump(&mut self, transactional_id: &str, commit: bool, now_ms: i64) -> Ended {
        let (marker, next) = self.producers.bump_at_end(transactional_id);
        let mut ended =
            self.complete_transaction(transactional_id, marker.producer_epoch, commit, now_ms);
        let txn = self
            .transactions
            .txns
            .get_mut(transactional_id)
            .expect("ended above");
        txn.epoch_bump = true;
        if next.producer_id != marker.producer_id {
            txn.previous_producer_id = Some(marker.producer_id);
        }
        txn.producer_id = next.producer_id;
        txn.producer_epoch = next.producer_epoch;
        ended.producer = next;
        ended
    }

    /// Aborts every open transaction past its `transaction.timeout.ms` whose coordinator is
    /// up, fencing its producer with an epoch bump, as Kafka's `abortTimedOutTransactions`.
    /// Returns the transactional ids aborted, with how.
    pub fn abort_timed_out_transactions(
        &mut self,
        now: Instant,
        now_ms: i64,
    ) -> Vec<(String, Ended)> {
        let expired: Vec<String> = self
            .transactions
            .txns
            .iter()
            .filter(|(id, t)| {
                t.state == TxnState::Ongoing
                    && t.started.is_some_and(|s| {
                        now.duration_since(s).as_millis() >= u128::from(t.timeout_ms.unsigned_abs())
                    })
                    && self.transaction_coordinator(id) != -1
            })
            .map(|(id, _)| id.clone())
            .collect();
        expired
            .into_iter()
            .filter_map(|id| {
                let fenced = self.producers.fence(&id, None).ok()?;
                let ended = self.complete_transaction(&id, fenced.producer_epoch, false, now_ms);
                tracing::debug!(transactional_id = id, "transaction timed out: aborted");
                Some((id, ended))
            })
            .collect()
    }

    /// Ends the open transaction of `transactional_id`: a marker at `marker_epoch` on each of
    /// its partitions, its groups' pending offsets committed or dropped.
    fn complete_transaction(
        &mut self,
        transactional_id: &str,
        marker_epoch: i16,
        commit: bool,
        now_ms: i64,
    ) -> Ended {
        let index = partition_for(transactional_id, self.transaction_state.len() as i32);
        let coordinator_epoch = self.transaction_state[index as usize].leader_epoch;
        let Some(txn) = self.transactions.txns.get_mut(transactional_id) else {
            unreachable!("only known transactional ids are completed")
        };
        txn.producer_epoch = marker_epoch;
        txn.state = if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        txn.started = None;
        let producer_id = txn.producer_id;
        let partitions = std::mem::take(&mut txn.partitions);
        let groups = std::mem::take(&mut txn.groups);
        let mut markers = Vec::with_capacity(partitions.len());
        for (topic, index) in partitions {
            let Some(p) = self
                .topics
                .get_mut(&topic)
                .and_then(|t| t.partition_mut(index))
            else {
                continue; // deleted since it was added
            };
            let marker =
                control::marker(producer_id, marker_epoch, commit, coordinator_epoch, now_ms);
            let offset = p.log.append_marker(marker, commit, p.leader_epoch, now_ms);
            p.producers
                .record_marker(producer_id, marker_epoch, coordinator_epoch, now_ms);
            markers.push(MarkerWritten {
                topic,
                partition: index,
                offset,
            });
        }
        for group_id in groups {
            let pending = self
                .transactions
                .pending_offsets
                .remove(&(group_id.clone(), producer_id));
            if let (true, Some(pending)) = (commit, pending) {
                if let Some(group) = self.groups.get_mut(&group_id) {
                    group.offsets.extend(pending);
                }
            }
        }
        Ended {
            producer: ProducerIdAndEpoch {
                producer_id,
                producer_epoch: marker_epoch,
            },
            committed: commit,
            markers,
        }
    }
}
