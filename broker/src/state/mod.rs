//! The cluster's mutable state: topics and logs, producer ids.
//!
//! One owner: all of it sits in one [`ClusterState`] behind one `std::sync::Mutex` in
//! [`crate::cluster::Shared`]. A `std` mutex and not Tokio's because no code holds it across an
//! `.await` and every critical section is short (a lookup, an append); handlers that wait (Fetch
//! long polling) drop the lock and wait on [`crate::cluster::Shared::data_arrived`].

pub mod batch;
pub mod coordinator;
pub mod groups;
pub mod log;
pub mod producer_state;
pub mod producers;
pub mod topics;

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use uuid::Uuid;

use producers::ProducerIds;
use topics::Topic;

/// Everything a request can change.
#[derive(Debug)]
pub struct ClusterState {
    /// Node ids of the brokers, in order.
    pub nodes: Vec<i32>,
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

impl ClusterState {
    /// Empty state for brokers `nodes`; `id_seed` varies topic ids between clusters.
    pub fn new(nodes: Vec<i32>, id_seed: u64) -> Self {
        Self {
            nodes,
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

    /// Checks that a topic could be created (CreateTopics `validate_only` stops here).
    ///
    /// # Errors
    /// [`CreateTopicError`] with Kafka's error for the first problem found.
    pub fn check_new_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), CreateTopicError> {
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
        Ok(())
    }

    /// Creates a topic after [`Self::check_new_topic`].
    ///
    /// # Errors
    /// As [`Self::check_new_topic`].
    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<&Topic, CreateTopicError> {
        self.check_new_topic(name, partitions, &configs)?;
        self.topics_created += 1;
        let id = Uuid::from_u64_pair(self.id_seed, self.topics_created);
        let topic = Topic::new(name, id, partitions, &self.nodes, configs);
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

    #[test]
    fn a_topic_of_two_billion_partitions_is_refused_without_building_it() {
        let mut state = ClusterState::new(vec![1], 0);
        let err = state
            .create_topic("huge", i32::MAX, BTreeMap::new())
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
        let mut state = ClusterState::new(vec![1, 2], 0);
        let first = state.create_topic("t", 2, BTreeMap::new()).unwrap().id;
        state.topics.remove("t");
        let second = state.create_topic("t", 2, BTreeMap::new()).unwrap().id;
        assert_ne!(first, second);
    }
}
