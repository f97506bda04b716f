//! The cluster's mutable state: topics and logs, producer ids.
//!
//! One owner: all of it sits in one [`ClusterState`] behind one `std::sync::Mutex` in
//! [`crate::cluster::Shared`]. A `std` mutex and not Tokio's because no code holds it across an
//! `.await` and every critical section is short (a lookup, an append); handlers that wait (Fetch
//! long polling) drop the lock and wait on [`crate::cluster::Shared::data_arrived`].

pub mod batch;
pub mod coordinator;
pub mod failover;
pub mod groups;
pub mod log;
pub mod producer_state;
pub mod producers;
pub mod topics;

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;
use uuid::Uuid;

use producers::ProducerIds;
use topics::{Partition, Topic};

/// Everything a request can change.
#[derive(Debug)]
pub struct ClusterState {
    /// Node ids of the brokers, in order, down or not.
    pub nodes: Vec<i32>,
    /// Brokers taken down ([`Self::broker_down`]).
    pub down: BTreeSet<i32>,
    /// Replicas of a partition when creation does not say (Kafka's
    /// `default.replication.factor`).
    pub default_replication_factor: usize,
    /// Leadership of `__consumer_offsets`: the leader of a group's partition is its coordinator.
    pub consumer_offsets: Vec<Partition>,
    /// Leadership of `__transaction_state`: the leader of a transactional id's partition is its
    /// transaction coordinator.
    pub transaction_state: Vec<Partition>,
    /// Topics by name.
    pub topics: BTreeMap<String, Topic>,
    /// Producer id and epoch allocation.
    pub producers: ProducerIds,
    /// Consumer groups and their committed offsets.
    pub groups: groups::Groups,
    topics_created: u64,
    id_seed: u64,
}

/// Why a topic could not be created, with the Kafka error to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopicError {
    /// TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS or INVALID_CONFIG.
    pub error: ResponseError,
    /// What is wrong, in a sentence.
    pub message: String,
}

/// How the cluster places partitions, fixed at start.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// Replicas of a partition when creation does not say.
    pub default_replication_factor: usize,
    /// Partitions of `__consumer_offsets` (Kafka's `offsets.topic.num.partitions`).
    pub offsets_topic_partitions: i32,
}

impl ClusterState {
    /// Empty state for brokers `nodes`, internal topics placed as `placement` says (their
    /// replication factor is Kafka's default of 3, or fewer with fewer brokers); `id_seed`
    /// varies topic ids between clusters.
    pub fn new(nodes: Vec<i32>, placement: Placement, id_seed: u64) -> Self {
        let internal = |partitions: i32| -> Vec<Partition> {
            (0..partitions.max(1) as usize)
                .map(|p| Partition::new(topics::replicas_for(p, 3, &nodes)))
                .collect()
        };
        Self {
            consumer_offsets: internal(placement.offsets_topic_partitions),
            transaction_state: internal(coordinator::TRANSACTION_STATE_PARTITIONS),
            nodes,
            down: BTreeSet::new(),
            default_replication_factor: placement.default_replication_factor,
            topics: BTreeMap::new(),
            producers: ProducerIds::default(),
            groups: groups::Groups::default(),
            topics_created: 0,
            id_seed,
        }
    }

    /// Checks a new topic's name and configs, in Kafka's order: a legal name that is not
    /// internal and does not collide with an existing one, then not taken, then valid configs.
    ///
    /// # Errors
    /// [`CreateTopicError`] with Kafka's error for the first problem found.
    pub fn check_name_and_configs(
        &self,
        name: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), CreateTopicError> {
        let fail = |error, message: String| Err(CreateTopicError { error, message });
        if let Err(m) = topics::validate_name(name) {
            return fail(ResponseError::InvalidTopicException, m);
        }
        if name == "__cluster_metadata" {
            return fail(
                ResponseError::InvalidRequest,
                format!("{name} is reserved for the cluster"),
            );
        }
        if self.topics.contains_key(name) {
            return fail(
                ResponseError::TopicAlreadyExists,
                format!("topic {name:?} already exists"),
            );
        }
        // Kafka refuses names that differ only by '.' and '_', since metrics cannot tell them apart.
        let unified = name.replace('.', "_");
        if let Some(other) = self.topics.keys().find(|t| t.replace('.', "_") == unified) {
            return fail(
                ResponseError::InvalidTopicException,
                format!("topic {name:?} collides with existing topic {other:?}"),
            );
        }
        if let Err(m) = topics::validate_configs(configs) {
            return fail(ResponseError::InvalidConfig, m);
        }
        Ok(())
    }

    /// Checks that a topic could be created (CreateTopics `validate_only` stops here) and
    /// gives the replication factor it would get: `replication_factor`, or the default for
    /// `None`.
    ///
    /// # Errors
    /// [`CreateTopicError`] with Kafka's error for the first problem found; a replication
    /// factor below 1 or above the live brokers is INVALID_REPLICATION_FACTOR, as Kafka's
    /// controller refuses replicas it cannot place.
    pub fn check_new_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: Option<i32>,
        configs: &BTreeMap<String, String>,
    ) -> Result<usize, CreateTopicError> {
        self.check_name_and_configs(name, configs)?;
        if !(1..=topics::MAX_PARTITIONS).contains(&partitions) {
            return Err(CreateTopicError {
                error: ResponseError::InvalidPartitions,
                message: format!(
                    "number of partitions must be between 1 and {}, not {partitions}",
                    topics::MAX_PARTITIONS
                ),
            });
        }
        let live = self.live_nodes().len();
        let factor = replication_factor.map_or(self.default_replication_factor as i64, i64::from);
        if factor < 1 || factor > live as i64 {
            return Err(CreateTopicError {
                error: ResponseError::InvalidReplicationFactor,
                message: format!(
                    "replication factor {factor} cannot be reached: {live} brokers are up"
                ),
            });
        }
        Ok(factor as usize)
    }

    /// Creates a topic after [`Self::check_new_topic`].
    ///
    /// # Errors
    /// As [`Self::check_new_topic`].
    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: Option<i32>,
        configs: BTreeMap<String, String>,
    ) -> Result<&Topic, CreateTopicError> {
        let factor = self.check_new_topic(name, partitions, replication_factor, &configs)?;
        self.topics_created += 1;
        let id = Uuid::from_u64_pair(self.id_seed, self.topics_created);
        let live = self.live_nodes();
        let topic = Topic::new(name, id, partitions, factor, &live, configs);
        tracing::debug!(topic = name, partitions, %id, "topic created");
        Ok(self.topics.entry(name.to_owned()).or_insert(topic))
    }

    /// The topic with this id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&Topic> {
        self.topics.values().find(|t| t.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLACEMENT: Placement = Placement {
        default_replication_factor: 1,
        offsets_topic_partitions: 50,
    };

    #[test]
    fn a_topic_of_two_billion_partitions_is_refused_without_building_it() {
        let mut state = ClusterState::new(vec![1], PLACEMENT, 0);
        let err = state
            .create_topic("huge", i32::MAX, None, BTreeMap::new())
            .unwrap_err();
        assert_eq!(
            err.error,
            ResponseError::InvalidPartitions,
            "{}",
            err.message
        );
        assert!(state.topics.is_empty());
    }

    #[test]
    fn a_topic_name_can_be_reused_after_deletion_with_a_new_id() {
        let mut state = ClusterState::new(vec![1, 2], PLACEMENT, 0);
        let first = state
            .create_topic("t", 2, None, BTreeMap::new())
            .unwrap()
            .id;
        state.topics.remove("t");
        let second = state
            .create_topic("t", 2, None, BTreeMap::new())
            .unwrap()
            .id;
        assert_ne!(first, second);
    }
}
