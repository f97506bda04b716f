//! The cluster's mutable state: topics and logs, producer ids.
//!
//! One owner: all of it sits in one [`ClusterState`] behind one `std::sync::Mutex` in
//! [`crate::shared::Shared`]. A `std` mutex and not Tokio's because no code holds it across an
//! `.await` and every critical section is short (a lookup, an append); handlers that wait (Fetch
//! long polling) drop the lock and wait on [`crate::shared::Shared::data_arrived`].

pub mod batch;
pub mod coordinator;
pub mod failover;
pub mod groups;
pub mod log;
pub mod producer_state;
pub mod producers;
pub mod quotas;
pub mod segments;
pub mod topic_configs;
pub mod topics;
pub mod txn;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::KafkaVersion;

use producers::ProducerIds;
use topics::{Deleted, Partition, Topic};

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
    /// Topics by name. Created only by [`Self::create_topic`] and removed only by
    /// [`Self::remove_topic`], which keep the indexes below in step.
    pub topics: BTreeMap<String, Topic>,
    /// Topic names by topic id, for [`Self::topic_by_id`] in constant time.
    names_by_id: HashMap<Uuid, String>,
    /// Topic names by their collision name (`.` read as `_`), for Kafka's collision check in
    /// constant time (the controller's `topicsWithCollisionChars`).
    names_by_collision_name: HashMap<String, String>,
    /// Producer id and epoch allocation.
    pub producers: ProducerIds,
    /// Consumer groups and their committed offsets.
    pub groups: groups::Groups,
    /// Transactions, as their coordinators know them ([`txn`]).
    pub transactions: txn::Transactions,
    /// Dynamic broker configs set by AlterConfigs and IncrementalAlterConfigs, by resource name
    /// (a node id, or `""` for the cluster-wide default), as Kafka's controller stores them;
    /// from Kafka 4.1 a fresh state holds the cluster-level `min.insync.replicas`
    /// ([`MIN_INSYNC_REPLICAS`], Eligible Leader Replicas).
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Client quotas set by AlterClientQuotas, and the byte rates measured against them.
    pub client_quotas: quotas::ClientQuotas,
    /// Bytes stored in every topic's partition logs (for the cluster's cap on stored bytes).
    pub stored: segments::StoredTotal,
    /// The Kafka release whose checks apply where releases differ (configs' ranges).
    pub kafka_version: KafkaVersion,
    topics_created: u64,
    id_seed: u64,
}

/// Why a topic could not be created, with the Kafka error to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopicError {
    /// TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS, INVALID_CONFIG,
    /// INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT or POLICY_VIOLATION.
    pub error: ResponseError,
    /// What is wrong, in a sentence.
    pub message: String,
}

/// How the cluster places partitions, and which Kafka release it emulates, fixed at start.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// Replicas of a partition when creation does not say.
    pub default_replication_factor: usize,
    /// Partitions of `__consumer_offsets` (Kafka's `offsets.topic.num.partitions`).
    pub offsets_topic_partitions: i32,
    /// The emulated release ([`ClusterState::kafka_version`]).
    pub kafka_version: KafkaVersion,
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
            names_by_id: HashMap::new(),
            names_by_collision_name: HashMap::new(),
            producers: ProducerIds::default(),
            groups: groups::Groups::default(),
            transactions: txn::Transactions::default(),
            broker_configs: initial_broker_configs(placement.kafka_version),
            client_quotas: quotas::ClientQuotas::default(),
            stored: segments::StoredTotal::default(),
            kafka_version: placement.kafka_version,
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
        if let Some(other) = self
            .names_by_collision_name
            .get(&collision_name(name))
            .filter(|other| self.topics.contains_key(other.as_str()))
        {
            return fail(
                ResponseError::InvalidTopicException,
                format!("topic {name:?} collides with existing topic {other:?}"),
            );
        }
        if let Err(m) = topics::validate_configs(configs, self.kafka_version) {
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
        if partitions < 1 {
            return Err(CreateTopicError {
                error: ResponseError::InvalidPartitions,
                message: format!("number of partitions must be at least 1, not {partitions}"),
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

    /// Creates a topic after [`Self::check_new_topic`], as one user operation of Kafka's
    /// controller: a topic whose records alone exceed [`MAX_RECORDS_PER_USER_OP`] is refused
    /// before anything is built. A request creating several topics checks their sum first
    /// ([`creation_records`]).
    ///
    /// # Errors
    /// As [`Self::check_new_topic`]; POLICY_VIOLATION past the bound.
    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: Option<i32>,
        configs: BTreeMap<String, String>,
    ) -> Result<&Topic, CreateTopicError> {
        let factor = self.check_new_topic(name, partitions, replication_factor, &configs)?;
        if creation_records(partitions, configs.len()) > MAX_RECORDS_PER_USER_OP {
            return Err(too_many_records());
        }
        self.topics_created += 1;
        let id = Uuid::from_u64_pair(self.id_seed, self.topics_created);
        let live = self.live_nodes();
        let topic = Topic::new(
            name,
            id,
            partitions,
            factor,
            &live,
            configs,
            self.stored.clone(),
        );
        tracing::debug!(topic = name, partitions, %id, "topic created");
        self.names_by_id.insert(id, name.to_owned());
        self.names_by_collision_name
            .insert(collision_name(name), name.to_owned());
        Ok(self.topics.entry(name.to_owned()).or_insert(topic))
    }

    /// Removes a topic and its index entries; `None` if there is none of that name.
    pub fn remove_topic(&mut self, name: &str) -> Option<Topic> {
        let topic = self.topics.remove(name)?;
        self.names_by_id.remove(&topic.id);
        self.names_by_collision_name.remove(&collision_name(name));
        Some(topic)
    }

    /// Kafka's retention check (`LogManager.cleanupLogs`) at wall-clock `now_ms` on every
    /// partition of every topic ([`Partition::delete_old_segments`], every pass). Returns each
    /// partition it deleted from: topic, partition, leader and what went, in topic order.
    pub fn delete_old_segments(&mut self, now_ms: i64) -> Vec<(String, i32, i32, Deleted)> {
        let mut deleted = Vec::new();
        for (name, topic) in &mut self.topics {
            for (index, p) in topic.partitions.iter_mut().enumerate() {
                if let Some(d) = p.delete_old_segments(now_ms, false) {
                    deleted.push((name.clone(), index as i32, p.leader, d));
                }
            }
        }
        deleted
    }

    /// The topic with this id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&Topic> {
        let name = self.names_by_id.get(&id)?;
        self.topics.get(name).filter(|t| t.id == id)
    }
}

/// Checks one partition's manually assigned `replicas` as Kafka's controller does
/// (`ReplicationControlManager.validateManualPartitionAssignment`): not empty, every broker
/// of `nodes` (down or not) and named once, as many replicas as `replication_factor` when given
/// (that of the topic's other partitions), and at least one of them not `down`.
///
/// # Errors
/// INVALID_REPLICA_ASSIGNMENT with what is wrong.
pub fn check_manual_assignment(
    nodes: &[i32],
    down: &BTreeSet<i32>,
    replicas: &[i32],
    replication_factor: Option<usize>,
) -> Result<(), CreateTopicError> {
    let fail = |message: String| {
        Err(CreateTopicError {
            error: ResponseError::InvalidReplicaAssignment,
            message,
        })
    };
    if replicas.is_empty() {
        return fail("The manual partition assignment includes an empty replica list.".into());
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    for (i, broker) in sorted.iter().enumerate() {
        if !nodes.contains(broker) {
            return fail(format!(
                "The manual partition assignment includes broker {broker}, but no such broker is registered."
            ));
        }
        if i > 0 && sorted[i - 1] == *broker {
            return fail(format!(
                "The manual partition assignment includes the broker {broker} more than once."
            ));
        }
    }
    if let Some(rf) = replication_factor.filter(|rf| *rf != sorted.len()) {
        return fail(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
            sorted.len()
        ));
    }
    if replicas.iter().all(|b| down.contains(b)) {
        return fail(
            "All brokers specified in the manual partition assignment are fenced or in controlled shutdown."
                .into(),
        );
    }
    Ok(())
}

/// Most metadata records one user operation may write: Kafka's
/// `QuorumController.MAX_RECORDS_PER_USER_OP` (10,000, the controller's batch size). Creating a
/// topic writes one record, plus one per partition and one per config (`ReplicationControlManager
/// .createTopic`); growing a topic one per new partition; deleting one one record.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// The metadata records Kafka's controller writes to create a topic of `partitions` partitions
/// with `configs` configs: a `TopicRecord`, a `PartitionRecord` per partition, a `ConfigRecord`
/// per config.
pub fn creation_records(partitions: i32, configs: usize) -> usize {
    1 + usize::try_from(partitions).unwrap_or(0) + configs
}

/// Kafka's answer to a user operation over [`MAX_RECORDS_PER_USER_OP`]: the controller's
/// `BoundedListTooLongException` becomes POLICY_VIOLATION (`EventHandlerExceptionInfo`).
pub fn too_many_records() -> CreateTopicError {
    CreateTopicError {
        error: ResponseError::PolicyViolation,
        message: "Unable to perform excessively large batch operation.".into(),
    }
}

/// Kafka's `Topic.unifyCollisionChars`: `.` and `_` read the same in metric names.
fn collision_name(name: &str) -> String {
    name.replace('.', "_")
}

/// The dynamic broker configs of a fresh cluster, by resource name (`""`: the cluster level):
/// from Kafka 4.1, whose new clusters enable Eligible Leader Replicas (KIP-966,
/// `eligible.leader.replicas.version=1`), the cluster-level `min.insync.replicas`, stored when
/// the cluster is formatted from the static value (1, kmock's and `fixtures/kafka/kafka.sh`'s),
/// which Kafka 4.4.0 describes with source DYNAMIC_DEFAULT_BROKER_CONFIG; none before 4.1.
fn initial_broker_configs(
    kafka_version: KafkaVersion,
) -> BTreeMap<String, BTreeMap<String, String>> {
    if kafka_version < KafkaVersion::V4_1 {
        return BTreeMap::new();
    }
    let cluster = BTreeMap::from([(MIN_INSYNC_REPLICAS.to_owned(), "1".to_owned())]);
    BTreeMap::from([(String::new(), cluster)])
}

/// Kafka's name of the config whose cluster-level value Eligible Leader Replicas keeps
/// ([`initial_broker_configs`]).
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

#[cfg(test)]
mod tests {
    use super::*;

    const PLACEMENT: Placement = Placement {
        default_replication_factor: 1,
        offsets_topic_partitions: 50,
        kafka_version: KafkaVersion::LATEST,
    };

    #[test]
    fn a_topic_of_two_billion_partitions_is_refused_without_building_it() {
        let mut state = ClusterState::new(vec![1], PLACEMENT, 0);
        let err = state
            .create_topic("huge", i32::MAX, None, BTreeMap::new())
            .unwrap_err();
        assert_eq!(err.error, ResponseError::PolicyViolation, "{}", err.message);
        assert!(state.topics.is_empty());
    }

    #[test]
    fn a_topic_of_9999_partitions_is_the_largest_one_operation_creates() {
        let mut state = ClusterState::new(vec![1], PLACEMENT, 0);
        state
            .create_topic("largest", 9_999, None, BTreeMap::new())
            .unwrap();
        let err = state
            .create_topic("too-large", 10_000, None, BTreeMap::new())
            .unwrap_err();
        assert_eq!(err.error, ResponseError::PolicyViolation, "{}", err.message);
    }

    #[test]
    fn names_colliding_by_dot_and_underscore_are_refused_until_the_other_is_deleted() {
        let mut state = ClusterState::new(vec![1], PLACEMENT, 0);
        let id = state
            .create_topic("a.b", 1, None, BTreeMap::new())
            .unwrap()
            .id;
        let err = state
            .create_topic("a_b", 1, None, BTreeMap::new())
            .unwrap_err();
        assert_eq!(err.error, ResponseError::InvalidTopicException);
        assert_eq!(state.topic_by_id(id).map(|t| t.name.as_str()), Some("a.b"));
        state.remove_topic("a.b").unwrap();
        assert!(state.topic_by_id(id).is_none());
        state.create_topic("a_b", 1, None, BTreeMap::new()).unwrap();
    }

    #[test]
    fn a_topic_name_can_be_reused_after_deletion_with_a_new_id() {
        let mut state = ClusterState::new(vec![1, 2], PLACEMENT, 0);
        let first = state
            .create_topic("t", 2, None, BTreeMap::new())
            .unwrap()
            .id;
        state.remove_topic("t");
        let second = state
            .create_topic("t", 2, None, BTreeMap::new())
            .unwrap()
            .id;
        assert_ne!(first, second);
    }
}
