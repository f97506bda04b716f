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
    transactional: HashMap<String, ProducerIdAndEpoch>,
}

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

    /// The current id and epoch of a transactional id, if it has been initialised.
    pub fn transactional(&self, transactional_id: &str) -> Option<ProducerIdAndEpoch> {
        self.transactional.get(transactional_id).copied()
    }

    /// Initialises a transactional id: a new producer id the first time, else the same id with
    /// the epoch bumped; when the epoch would pass `i16::MAX - 1`, a new id with epoch 0
    /// (Kafka's `TransactionMetadata.prepareIncrementProducerEpoch`).
    pub fn init_transactional(&mut self, transactional_id: &str) -> ProducerIdAndEpoch {
        let next = match self.transactional.get(transactional_id) {
            Some(current) if current.producer_epoch < i16::MAX - 1 => ProducerIdAndEpoch {
                producer_id: current.producer_id,
                producer_epoch: current.producer_epoch + 1,
            },
            _ => self.allocate(),
        };
        self.transactional.insert(transactional_id.to_owned(), next);
        next
    }
}
