//! Idempotent producer state of one partition: Kafka's sequence rules, exactly.
//!
//! Kept per (producer id, partition) as Apache Kafka's `ProducerStateManager` and
//! `ProducerAppendInfo` keep it, and checked for every batch that carries a producer id, in
//! Kafka's order:
//! 1. a negative base sequence is INVALID_RECORD (`LogValidator`);
//! 2. a duplicate — same epoch and the same first and last sequence as one of the last five
//!    batches kept — is not appended and is answered NONE with the original base offset;
//! 3. an epoch lower than the current one is INVALID_PRODUCER_EPOCH (47);
//! 4. a new, higher epoch must start at sequence 0 unless no state exists, else
//!    OUT_OF_ORDER_SEQUENCE_NUMBER (45);
//! 5. within an epoch the base sequence must be last + 1, wrapping from 2^31−1 to 0, else 45;
//! 6. with no state for the producer any sequence is accepted (Kafka 2.5+, KIP-360); emulating
//!    Kafka before 2.5, a non-zero sequence without state is UNKNOWN_PRODUCER_ID (59), and a
//!    transaction version 2 transactional batch (Produce v12+) without state must start at 0,
//!    else 45, as Kafka 4.4.0 answers ([`WithoutState`]);
//! 7. a producer whose epoch began with a transaction marker (a transaction version 2 EndTxn,
//!    or a fence, bumped it) and has no batch since must start at sequence 0, else 45.
//!
//! A batch in a new epoch clears the five-batch cache; a sixth batch evicts the oldest, so a
//! retry of an evicted batch gets 45.

use std::collections::{HashMap, VecDeque};

use kafka_protocol::ResponseError;

use super::batch::BatchInfo;

/// Batches remembered per producer for duplicate detection (Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`).
pub const BATCHES_RETAINED: usize = 5;

/// Where a batch went, kept to answer its duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchMetadata {
    first_seq: i32,
    last_seq: i32,
    base_offset: i64,
    log_append_time_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
    /// Max timestamp of the last batch, or the timestamp of the last marker (Kafka's
    /// `ProducerStateEntry.lastTimestamp`).
    last_timestamp: i64,
    /// Coordinator epoch of the last marker, -1 before one.
    coordinator_epoch: i32,
}

impl ProducerEntry {
    fn new(epoch: i16) -> Self {
        Self {
            epoch,
            batches: VecDeque::with_capacity(BATCHES_RETAINED),
            last_timestamp: -1,
            coordinator_epoch: -1,
        }
    }
}

/// What DescribeProducers tells of one producer of a partition (Kafka's
/// `ProducerStateManager.activeProducers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    /// Producer id.
    pub producer_id: i64,
    /// Its current epoch on the partition.
    pub producer_epoch: i16,
    /// The last sequence of its last batch kept, -1 when none is (only markers since its
    /// epoch began).
    pub last_sequence: i32,
    /// Max timestamp of its last batch, or its last marker's timestamp (ms).
    pub last_timestamp: i64,
    /// Coordinator epoch of its last marker, -1 before one.
    pub coordinator_epoch: i32,
}

/// What the first batch of a producer without state on a partition may start at (rule 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithoutState {
    /// Any sequence (Kafka 2.5+, KIP-360).
    AnySequence,
    /// Sequence 0, else UNKNOWN_PRODUCER_ID (Kafka before 2.5).
    ZeroOrUnknownProducerId,
    /// Sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER: a transactional batch under transaction
    /// version 2 (Produce v12+), which begins a transaction at an epoch its EndTxn bumped
    /// (Kafka 4.4.0; `fixtures/conformance/txn_v2_sequences_after_the_epoch_bump.txt`).
    ZeroOrOutOfOrder,
}

/// What to do with a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not a duplicate and in sequence (or not idempotent): append it.
    Append,
    /// A retry of a batch already in the log: answer NONE with where it went.
    Duplicate {
        /// Base offset of the original.
        base_offset: i64,
        /// LogAppendTime of the original, -1 for CreateTime.
        log_append_time_ms: i64,
    },
    /// Refused.
    Reject {
        /// The Kafka error.
        error: ResponseError,
        /// The rule broken, with expected and actual values.
        reason: String,
    },
}

/// Producer state of one partition.
#[derive(Debug, Default)]
pub struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
}

/// The last sequence of a batch of `count` records from `base`, wrapping past `i32::MAX` to 0
/// (Kafka's `DefaultRecordBatch.incrementSequence`).
pub fn last_sequence(base: i32, count: i32) -> i32 {
    let increment = count - 1;
    if base > i32::MAX - increment {
        increment - (i32::MAX - base) - 1
    } else {
        base + increment
    }
}

fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

impl ProducerStates {
    /// Judges a batch. `unknown_producer_id_rule` is the pre-2.5 behaviour: a non-zero first
    /// sequence from a producer without state is UNKNOWN_PRODUCER_ID.
    pub fn check(&self, batch: &BatchInfo, without_state: WithoutState) -> Verdict {
        let (pid, epoch, first) = (batch.producer_id, batch.producer_epoch, batch.base_sequence);
        if pid < 0 {
            return Verdict::Append;
        }
        let reject = |error, reason: String| Verdict::Reject { error, reason };
        if first < 0 {
            return reject(
                ResponseError::InvalidRecord,
                format!("producer {pid} epoch {epoch}: base sequence {first} is negative"),
            );
        }
        let last = last_sequence(first, batch.record_count);
        let Some(entry) = self.producers.get(&pid) else {
            return match without_state {
                WithoutState::AnySequence => Verdict::Append,
                _ if first == 0 => Verdict::Append,
                WithoutState::ZeroOrUnknownProducerId => reject(
                    ResponseError::UnknownProducerId,
                    format!("producer {pid} epoch {epoch} has no state here and its first sequence is {first}, not 0 (Kafka before 2.5)"),
                ),
                WithoutState::ZeroOrOutOfOrder => reject(
                    ResponseError::OutOfOrderSequenceNumber,
                    format!("producer {pid} epoch {epoch}: a version-2 transaction's first batch here must start at sequence 0, got {first}"),
                ),
            };
        };
        if epoch == entry.epoch {
            if let Some(original) = entry
                .batches
                .iter()
                .find(|b| b.first_seq == first && b.last_seq == last)
            {
                return Verdict::Duplicate {
                    base_offset: original.base_offset,
                    log_append_time_ms: original.log_append_time_ms,
                };
            }
        }
        if epoch < entry.epoch {
            return reject(
                ResponseError::InvalidProducerEpoch,
                format!(
                    "producer {pid}: epoch {epoch} is older than the current epoch {}",
                    entry.epoch
                ),
            );
        }
        if epoch > entry.epoch {
            if first != 0 {
                return reject(
                    ResponseError::OutOfOrderSequenceNumber,
                    format!(
                        "producer {pid}: new epoch {epoch} must start at sequence 0, got {first}"
                    ),
                );
            }
            return Verdict::Append;
        }
        match entry.batches.back() {
            // Only a marker since the epoch began (Kafka's entry has no last sequence, and
            // `inSequence(NO_SEQUENCE, first)` holds for 0 alone).
            None if first != 0 => reject(
                ResponseError::OutOfOrderSequenceNumber,
                format!(
                    "producer {pid} epoch {epoch}: its epoch began with a transaction marker here, so its first batch must start at sequence 0, got {first}"
                ),
            ),
            Some(previous) if !in_sequence(previous.last_seq, first) => reject(
                ResponseError::OutOfOrderSequenceNumber,
                format!(
                    "producer {pid} epoch {epoch}: expected sequence {}, got {first}",
                    if previous.last_seq == i32::MAX {
                        0
                    } else {
                        previous.last_seq + 1
                    }
                ),
            ),
            _ => Verdict::Append,
        }
    }

    /// Records a transaction marker of `producer_id` at `producer_epoch`: a higher epoch (the
    /// coordinator fenced the producer) becomes the producer's, forgetting its batches, as
    /// Kafka's `ProducerAppendInfo.appendEndTxnMarker`; sequences go on across transactions.
    /// The marker's `coordinator_epoch` and `timestamp` (ms) become the producer's.
    pub fn record_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        timestamp: i64,
    ) {
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry::new(producer_epoch));
        if producer_epoch > entry.epoch {
            entry.epoch = producer_epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = coordinator_epoch;
        entry.last_timestamp = timestamp;
    }

    /// Every producer with state on the partition, by producer id.
    pub fn active(&self) -> Vec<ActiveProducer> {
        let mut all: Vec<ActiveProducer> = self
            .producers
            .iter()
            .map(|(&producer_id, e)| ActiveProducer {
                producer_id,
                producer_epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_seq),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
            })
            .collect();
        all.sort_by_key(|p| p.producer_id);
        all
    }

    /// Records an appended batch of a producer (no-op for producer id -1).
    pub fn record(&mut self, batch: &BatchInfo, base_offset: i64, log_append_time_ms: i64) {
        if batch.producer_id < 0 {
            return;
        }
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerEntry::new(batch.producer_epoch));
        entry.last_timestamp = batch.max_timestamp;
        if entry.epoch != batch.producer_epoch {
            entry.epoch = batch.producer_epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == BATCHES_RETAINED {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMetadata {
            first_seq: batch.base_sequence,
            last_seq: last_sequence(batch.base_sequence, batch.record_count),
            base_offset,
            log_append_time_ms,
        });
    }
}

#[cfg(test)]
mod tests;
