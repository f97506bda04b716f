//! What a cluster is configured with ([`Config`], [`KafkaVersion`]) and the state every broker
//! task shares ([`Shared`]): data types the cluster, the server, the proxy, the handlers and
//! the fault rules all read, kept out of [`crate::cluster`] so none of them imports it.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;

use crate::error::Error;
use crate::faults::Rules;
use crate::journal::Journal;
use crate::state::{ClusterState, Placement};

pub use crate::versions::KafkaVersion;

/// A broker's identity as clients see it in Metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Node id (1, 2, … in start order).
    pub node_id: i32,
    /// The address its listener is bound to, and advertised.
    pub addr: SocketAddr,
}

/// The `transaction.version` feature the cluster has finalized (Kafka's `TransactionVersion`,
/// KIP-890): which transaction protocol the coordinator and the partitions speak.
///
/// Version 1 is the protocol of Kafka 3.x: the client adds every partition with
/// AddPartitionsToTxn and its group with AddOffsetsToTxn, and the epoch stays the same from one
/// transaction to the next. Version 2 (KIP-890 part 2, Kafka 4.0's default on a new cluster):
/// a transactional Produce (v12+) adds its partition to the transaction itself, TxnOffsetCommit
/// (v5+) its group, and every EndTxn (v5+) bumps the producer epoch, answering the new one.
/// ApiVersions (v3+) advertises the finalized level, which is how clients choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum TransactionVersion {
    /// `transaction.version=1`: Kafka 3.x's transactions.
    V1,
    /// `transaction.version=2`: KIP-890 part 2 (kmock's default, as Kafka 4.x finalizes it on a
    /// new cluster).
    #[default]
    V2,
}

impl TransactionVersion {
    /// The feature level ApiVersions advertises (1 or 2).
    pub const fn level(self) -> i16 {
        match self {
            Self::V1 => 1,
            Self::V2 => 2,
        }
    }

    /// The version of level `level`.
    ///
    /// # Errors
    /// [`Error::Config`] for a level other than 1 or 2.
    pub fn from_level(level: i64) -> Result<Self, Error> {
        match level {
            1 => Ok(Self::V1),
            2 => Ok(Self::V2),
            _ => Err(Error::Config(format!(
                "transaction_version {level} is not 1 or 2"
            ))),
        }
    }
}

/// Kafka's default `log.retention.check.interval.ms`: 5 minutes.
pub const DEFAULT_RETENTION_CHECK_INTERVAL: Duration = Duration::from_secs(300);

/// The shortest retention check interval kmock takes: 100 ms. Each check walks every partition
/// under the state lock, so a shorter one would hold it most of the time (Kafka sets no floor
/// on `log.retention.check.interval.ms` beyond 1 ms; kmock is stricter here, for itself).
pub const MIN_RETENTION_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Settings fixed at start.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub brokers: usize,
    pub host: IpAddr,
    pub port: u16,
    pub topics: Vec<(String, i32)>,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub max_frame_bytes: usize,
    pub cluster_id: String,
    pub kafka_version: KafkaVersion,
    pub transaction_version: TransactionVersion,
    pub journal_capacity: usize,
    pub journal_max_bytes: usize,
    pub offsets_topic_partitions: i32,
    pub seed: u64,
    /// `None`: 3, or the broker count if smaller.
    pub replication_factor: Option<usize>,
    /// Idle timeout, frame timeout, connection cap.
    pub limits: crate::limits::ConnectionLimits,
    /// KIP-848 consumer group settings.
    pub consumer_groups: crate::state::groups::consumer::ConsumerGroupConfig,
    /// How long after the start the group and transaction coordinators answer
    /// COORDINATOR_LOAD_IN_PROGRESS, as Kafka's while their partitions load.
    pub coordinator_load: Option<Duration>,
    /// Proxy mode: the upstream cluster's bootstrap addresses (`host:port`).
    pub upstream: Option<Vec<String>>,
    /// How often every partition's retention is checked (Kafka's
    /// `log.retention.check.interval.ms`).
    pub retention_check_interval: Duration,
    /// The cap on bytes stored in every partition log together; `None`: no cap.
    pub max_stored_bytes: Option<u64>,
}

impl Config {
    /// The default replication factor of new topics.
    pub fn replication_factor(&self) -> usize {
        self.replication_factor.unwrap_or(self.brokers.min(3))
    }

    /// A fresh state: the brokers, the internal topics and the configured topics.
    pub(crate) fn initial_state(&self, nodes: Vec<i32>) -> Result<ClusterState, Error> {
        let placement = Placement {
            default_replication_factor: self.replication_factor(),
            offsets_topic_partitions: self.offsets_topic_partitions,
            kafka_version: self.kafka_version,
        };
        // The fuzz targets' stored inputs name topics by id: with the `fuzzing` feature, the
        // same ids in every process and after every reset.
        let id_seed = if cfg!(feature = "fuzzing") {
            0
        } else {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        };
        let mut state = ClusterState::new(nodes, placement, id_seed);
        state.groups.consumer_config = self.consumer_groups;
        for (name, partitions) in &self.topics {
            state
                .create_topic(name, *partitions, None, BTreeMap::new())
                .map_err(|e| Error::Topic(e.message))?;
        }
        Ok(state)
    }

    /// [`Self::initial_state`] again, for a reset: the configured topics were created at
    /// start with every broker up, as they are in a fresh state, so this cannot fail.
    pub(crate) fn fresh_state(&self, nodes: Vec<i32>) -> ClusterState {
        self.initial_state(nodes)
            .expect("the configured topics were created once already")
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            brokers: 1,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            topics: Vec::new(),
            auto_create_topics: true,
            default_partitions: 1,
            max_frame_bytes: 100 * 1024 * 1024,
            cluster_id: "kmock-cluster".to_owned(),
            kafka_version: KafkaVersion::LATEST,
            transaction_version: TransactionVersion::V2,
            journal_capacity: crate::journal::DEFAULT_CAPACITY,
            journal_max_bytes: crate::journal::DEFAULT_MAX_BYTES,
            offsets_topic_partitions: crate::state::coordinator::OFFSETS_TOPIC_PARTITIONS,
            seed: 0,
            replication_factor: None,
            limits: crate::limits::ConnectionLimits::default(),
            consumer_groups: Default::default(),
            coordinator_load: None,
            upstream: None,
            retention_check_interval: DEFAULT_RETENTION_CHECK_INTERVAL,
            max_stored_bytes: None,
        }
    }
}

/// State shared by every listener and connection of one cluster.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: Config,
    pub brokers: Vec<BrokerInfo>,
    /// In proxy mode, the upstream cluster that answers instead of the handlers.
    pub upstream: Option<crate::proxy::Upstream>,
    pub state: Mutex<ClusterState>,
    /// Woken on every append, so long-polling Fetch requests can look again.
    pub data_arrived: Notify,
    /// Every request, in arrival order.
    pub journal: Journal,
    /// Fault rules in force.
    pub(crate) rules: Mutex<Rules>,
    /// Whether any rule is in force, readable without the rules lock: a request takes that
    /// lock only when there is a rule to apply.
    pub(crate) rules_in_force: AtomicBool,
    /// Whether a client quota was ever stored (AlterClientQuotas), readable without the state
    /// lock: until then Produce and Fetch neither measure their size nor take the lock for
    /// quotas. It stays set once set (a reset that drops the quotas leaves only that cost).
    pub client_quotas_set: AtomicBool,
    pub(crate) next_connection_id: AtomicU64,
}

impl Shared {
    /// Locks the cluster state. A panic in another holder poisons nothing that matters here:
    /// the state is still consistent between requests, so the lock is taken regardless.
    ///
    /// Lock order: state, then journal, then rules. A cluster operation journals its entry
    /// under the state lock (so no request answered under the new state is numbered before
    /// it); nothing takes the state lock while holding the journal's.
    pub fn state(&self) -> MutexGuard<'_, ClusterState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Locks the fault rules (the last in the lock order: nothing holds it while taking
    /// another). Add and remove rules with [`Self::change_rules`].
    pub fn rules(&self) -> MutexGuard<'_, Rules> {
        self.rules
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Changes the rules in force, keeping [`Self::rules_in_force`] true to them.
    pub fn change_rules<R>(&self, change: impl FnOnce(&mut Rules) -> R) -> R {
        let mut rules = self.rules();
        let result = change(&mut rules);
        self.rules_in_force.store(rules.any(), Ordering::Release);
        result
    }

    /// Whether any fault rule is in force (without taking the rules lock).
    pub fn rules_in_force(&self) -> bool {
        self.rules_in_force.load(Ordering::Acquire)
    }

    /// A connection id unique within the cluster, from 1.
    pub fn next_connection_id(&self) -> u64 {
        self.next_connection_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Wall-clock now in ms since the Unix epoch (for LogAppendTime).
    pub fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}
