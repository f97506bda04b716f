//! Producer id and epoch allocation (InitProducerId).
//!
//! Producer ids count up from 0, as a KRaft cluster's first producer id block. The sequence
//! rules for idempotent batches live with the partition logs, not here.

use std::collections::HashMap;

/// Producer id and epoch of a transactional id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdAndEpoch {
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
}

/// Allocates producer ids, and keeps the id and epoch of every transactional id.
#[derive(Debug, Default)]
pub struct ProducerIds {
    next_producer_id: i64,
    transactional: HashMap<String, Transactional>,
}

#[derive(Debug, Clone, Copy)]
struct Transactional {
    current: ProducerIdAndEpoch,
    /// What the id had before the last bump, to recognise a retried bump (KIP-360).
    previous: Option<ProducerIdAndEpoch>,
}

/// Why a KIP-360 re-initialisation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenced;

impl ProducerIds {
    /// A fresh producer id with epoch 0, as for an idempotent producer without transactional
    /// id (Kafka's `TransactionCoordinator.handleInitProducerId` always allocates a new one).
    pub fn allocate(&mut self) -> ProducerIdAndEpoch {
        let producer_id = self.next_producer_id;
        self.next_producer_id += 1;
        ProducerIdAndEpoch {
            producer_id,
            producer_epoch: 0,
        }
    }

    /// Initialises a transactional id: a new producer id the first time, else the same id with
    /// the epoch bumped; when the epoch would pass `i16::MAX - 1`, a new id with epoch 0
    /// (Kafka's `TransactionMetadata.prepareIncrementProducerEpoch`).
    ///
    /// `expected` is the id and epoch the client names (KIP-360, InitProducerId v3+): they must
    /// be the current ones, or the ones before the last bump (a retry whose answer was lost,
    /// answered with the current ones without bumping again); an unknown transactional id takes
    /// any.
    ///
    /// # Errors
    /// [`Fenced`] when `expected` is neither.
    pub fn init_transactional(
        &mut self,
        transactional_id: &str,
        expected: Option<ProducerIdAndEpoch>,
    ) -> Result<ProducerIdAndEpoch, Fenced> {
        let known = self.transactional.get(transactional_id).copied();
        if let (Some(known), Some(expected)) = (known, expected) {
            if known.previous == Some(expected) {
                return Ok(known.current);
            }
            if known.current != expected {
                return Err(Fenced);
            }
        }
        let next = match known {
            Some(t) if t.current.producer_epoch < i16::MAX - 1 => ProducerIdAndEpoch {
                producer_id: t.current.producer_id,
                producer_epoch: t.current.producer_epoch + 1,
            },
            _ => self.allocate(),
        };
        self.transactional.insert(
            transactional_id.to_owned(),
            Transactional {
                current: next,
                previous: known.map(|t| t.current),
            },
        );
        Ok(next)
    }
}

impl ProducerIds {
    /// Fences the producer of `transactional_id` by bumping its epoch once, as Kafka's
    /// `TransactionMetadata.prepareFenceProducerEpoch` when an InitProducerId or the
    /// transaction timeout aborts an open transaction: the fenced epoch is given to no client,
    /// and no retry can claim an epoch before it (`lastProducerEpoch` is cleared).
    ///
    /// # Errors
    /// [`Fenced`] when the id is unknown, or `expected` (KIP-360) names neither the current id
    /// and epoch nor the ones before the last bump.
    pub fn fence(
        &mut self,
        transactional_id: &str,
        expected: Option<ProducerIdAndEpoch>,
    ) -> Result<ProducerIdAndEpoch, Fenced> {
        let known = self.transactional.get_mut(transactional_id).ok_or(Fenced)?;
        if let Some(expected) = expected {
            if known.current != expected && known.previous != Some(expected) {
                return Err(Fenced);
            }
        }
        known.current.producer_epoch = known.current.producer_epoch.saturating_add(1);
        known.previous = None;
        Ok(known.current)
    }
}

impl ProducerIds {
    /// Bumps the epoch of `transactional_id` at the end of a transaction (transaction version
    /// 2, Kafka's `TransactionMetadata.prepareAbortOrCommit` and `prepareComplete`). Returns
    /// the id and epoch the markers carry (the epoch bumped) and those the producer goes on
    /// with: the same, or a new producer id at epoch 0 when the epoch was exhausted (32766 or
    /// more before the bump, `TransactionMetadata.isEpochExhausted`).
    ///
    /// # Panics
    /// If the transactional id was never initialised (the coordinator ends only known ones).
    pub fn bump_at_end(
        &mut self,
        transactional_id: &str,
    ) -> (ProducerIdAndEpoch, ProducerIdAndEpoch) {
        let known = *self
            .transactional
            .get(transactional_id)
            .expect("only initialised transactional ids end a transaction");
        let marker = ProducerIdAndEpoch {
            producer_id: known.current.producer_id,
            producer_epoch: known.current.producer_epoch.saturating_add(1),
        };
        let (next, previous) = if known.current.producer_epoch >= i16::MAX - 1 {
            (self.allocate(), None)
        } else {
            (marker, Some(known.current))
        };
        self.transactional.insert(
            transactional_id.to_owned(),
            Transactional {
                current: next,
                previous,
            },
        );
        (marker, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(producer_id: i64, producer_epoch: i16) -> ProducerIdAndEpoch {
        ProducerIdAndEpoch {
            producer_id,
            producer_epoch,
        }
    }

    #[test]
    fn a_transactional_id_keeps_its_producer_id_and_bumps_the_epoch() {
        let mut ids = ProducerIds::default();
        let first = ids.init_transactional("t", None).unwrap();
        assert_eq!(
            ids.init_transactional("t", None),
            Ok(id(first.producer_id, 1))
        );
    }

    #[test]
    fn a_retried_bump_gets_the_current_epoch_without_bumping_again() {
        let mut ids = ProducerIds::default();
        let first = ids.init_transactional("t", None).unwrap();
        let bumped = ids.init_transactional("t", Some(first)).unwrap();
        assert_eq!(bumped, id(first.producer_id, 1));
        assert_eq!(
            ids.init_transactional("t", Some(first)),
            Ok(bumped),
            "retry of the same bump"
        );
        assert_eq!(
            ids.init_transactional("t", Some(id(first.producer_id, 7))),
            Err(Fenced)
        );
    }

    #[test]
    fn an_unknown_transactional_id_takes_any_expected_id() {
        let mut ids = ProducerIds::default();
        assert_eq!(
            ids.init_transactional("new", Some(id(42, 3)))
                .map(|p| p.producer_epoch),
            Ok(0)
        );
    }
}
