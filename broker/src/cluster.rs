//! The cluster handle and its builder.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::check::{Checks, Report};
use crate::error::Error;
use crate::faults::{Rule, RuleStats, Rules};
use crate::journal::{
    ClusterOperation, Entry, Journal, JournalError, JournalSnapshot, LeaderChange, Sink,
};
use crate::state::{ClusterState, Placement};
use std::io::Write;

/// A broker's identity as clients see it in Metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Node id (1, 2, … in start order).
    pub node_id: i32,
    /// The address its listener is bound to, and advertised.
    pub addr: SocketAddr,
}

/// The Apache Kafka version whose behaviour kmock copies where versions differ.
///
/// Ordered, so `version < KafkaVersion::V2_5` reads as it should. Parsed from `"2.4"` or
/// `"3.7.1"` (the patch level is ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KafkaVersion {
    /// Major version.
    pub major: u16,
    /// Minor version.
    pub minor: u16,
}

impl KafkaVersion {
    /// Kafka 2.5: the first with KIP-360 (no UNKNOWN_PRODUCER_ID for a producer without state).
    pub const V2_5: Self = Self::new(2, 5);
    /// Kafka 3.7: `min.insync.replicas` capped at the replica count (KAFKA-15583).
    pub const V3_7: Self = Self::new(3, 7);
    /// The newest behaviour, kmock's default.
    pub const LATEST: Self = Self::new(4, 1);

    /// `major.minor`.
    pub const fn new(major: u16, minor: u16) -> Self {
        Self { major, minor }
    }
}

impl std::str::FromStr for KafkaVersion {
    type Err = Error;

    /// # Errors
    /// [`Error::Config`] for anything but `MAJOR.MINOR[.PATCH]`.
    fn from_str(s: &str) -> Result<Self, Error> {
        let mut parts = s.split('.').map(str::parse::<u16>);
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(Ok(major)), Some(Ok(minor)), None | Some(Ok(_)), None) => {
                Ok(Self::new(major, minor))
            }
            _ => Err(Error::Config(format!(
                "Kafka version {s:?} is not MAJOR.MINOR, e.g. \"2.4\""
            ))),
        }
    }
}

impl std::fmt::Display for KafkaVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

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
    pub journal_capacity: usize,
    pub journal_max_bytes: usize,
    pub offsets_topic_partitions: i32,
    pub seed: u64,
    /// `None`: 3, or the broker count if smaller.
    pub replication_factor: Option<usize>,
    /// Idle timeout, frame timeout, connection cap.
    pub limits: crate::limits::ConnectionLimits,
}

impl Config {
    /// The default replication factor of new topics.
    pub fn replication_factor(&self) -> usize {
        self.replication_factor.unwrap_or(self.brokers.min(3))
    }

    /// A fresh state: the brokers, the internal topics and the configured topics.
    fn initial_state(&self, nodes: Vec<i32>) -> Result<ClusterState, Error> {
        let placement = Placement {
            default_replication_factor: self.replication_factor(),
            offsets_topic_partitions: self.offsets_topic_partitions,
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
        for (name, partitions) in &self.topics {
            state
                .create_topic(name, *partitions, None, BTreeMap::new())
                .map_err(|e| Error::Topic(e.message))?;
        }
        Ok(state)
    }

    /// [`Self::initial_state`] again, for a reset: the configured topics were created at
    /// start with every broker up, as they are in a fresh state, so this cannot fail.
    fn fresh_state(&self, nodes: Vec<i32>) -> ClusterState {
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
            journal_capacity: crate::journal::DEFAULT_CAPACITY,
            journal_max_bytes: crate::journal::DEFAULT_MAX_BYTES,
            offsets_topic_partitions: crate::state::coordinator::OFFSETS_TOPIC_PARTITIONS,
            seed: 0,
            replication_factor: None,
            limits: crate::limits::ConnectionLimits::default(),
        }
    }
}

/// State shared by every listener and connection of one cluster.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: Config,
    pub brokers: Vec<BrokerInfo>,
    pub state: Mutex<ClusterState>,
    /// Woken on every append, so long-polling Fetch requests can look again.
    pub data_arrived: Notify,
    /// Every request, in arrival order.
    pub journal: Journal,
    /// Fault rules in force.
    rules: Mutex<Rules>,
    /// Whether any rule is in force, readable without the rules lock: a request takes that
    /// lock only when there is a rule to apply.
    rules_in_force: AtomicBool,
    next_connection_id: AtomicU64,
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

/// Builds and starts a [`Cluster`]. Nothing listens until [`ClusterBuilder::start`].
#[derive(Debug, Default)]
#[must_use = "a ClusterBuilder does nothing until .start().await"]
pub struct ClusterBuilder {
    pub(crate) config: Config,
    journal_sink: Option<Sink>,
}

impl ClusterBuilder {
    /// Number of brokers, each with its own listener and node id (1..=n). Default 1.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn brokers(mut self, n: usize) -> Self {
        assert!(n > 0, "a cluster needs at least one broker");
        self.config.brokers = n;
        self
    }

    /// Creates `name` with `partitions` partitions at start. Repeatable. At most 9,999
    /// partitions, as one operation of Kafka's KRaft controller creates (a larger topic is
    /// grown with CreatePartitions); [`Self::start`] fails past that.
    pub fn topic(mut self, name: &str, partitions: i32) -> Self {
        self.config.topics.push((name.to_owned(), partitions));
        self
    }

    /// The address listeners bind to and advertise. Default `127.0.0.1`.
    pub fn host(mut self, host: IpAddr) -> Self {
        self.config.host = host;
        self
    }

    /// Port of the first broker; broker i listens on `port + i`. Default 0: every broker gets
    /// an ephemeral port.
    pub fn port(mut self, port: u16) -> Self {
        self.config.port = port;
        self
    }

    /// Whether Metadata requests create unknown topics (Kafka's `auto.create.topics.enable`,
    /// default true; the client must also allow it). Default true.
    pub fn auto_create_topics(mut self, enabled: bool) -> Self {
        self.config.auto_create_topics = enabled;
        self
    }

    /// Partitions of an auto-created topic, or of CreateTopics with -1 (Kafka's
    /// `num.partitions`). Default 1.
    pub fn default_partitions(mut self, partitions: i32) -> Self {
        self.config.default_partitions = partitions;
        self
    }

    /// Largest request frame accepted, in bytes; a larger one closes the connection (Kafka's
    /// `socket.request.max.bytes`). Default 100 MiB.
    pub fn max_frame_bytes(mut self, bytes: usize) -> Self {
        self.config.max_frame_bytes = bytes;
        self
    }

    /// The cluster id reported in Metadata and DescribeCluster. Default `kmock-cluster`.
    pub fn cluster_id(mut self, id: &str) -> Self {
        self.config.cluster_id = id.to_owned();
        self
    }

    /// The Kafka version whose behaviour to copy where versions differ. Default
    /// [`KafkaVersion::LATEST`]. Before 2.5, a producer without state on a partition whose
    /// first batch does not start at sequence 0 gets UNKNOWN_PRODUCER_ID (as brokers 1.0–2.4).
    pub fn kafka_version(mut self, version: KafkaVersion) -> Self {
        self.config.kafka_version = version;
        self
    }

    /// Seed of the generator behind `Rule::probability`: the same seed gives the same fault
    /// schedule for the same request sequence. Default 0.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = seed;
        self
    }

    /// Replicas of each partition of a topic created without a replication factor (Kafka's
    /// `default.replication.factor`, whose default is 1). Default: 3, or the broker count if
    /// smaller, so that a broker taken down ([`Cluster::broker_down`]) fails over as a
    /// production cluster does. Checked against the broker count at start.
    pub fn replication_factor(mut self, replicas: usize) -> Self {
        self.config.replication_factor = Some(replicas);
        self
    }

    /// Partitions of `__consumer_offsets`, which decide each group's coordinator (Kafka's
    /// `offsets.topic.num.partitions`). Default 50.
    ///
    /// # Panics
    /// If `partitions` is below 1.
    pub fn offsets_topic_partitions(mut self, partitions: i32) -> Self {
        assert!(
            partitions >= 1,
            "__consumer_offsets needs at least one partition"
        );
        self.config.offsets_topic_partitions = partitions;
        self
    }

    /// Entries the journal keeps in memory; when full the oldest go and are counted in
    /// [`JournalSnapshot::evicted`]. Default 1,000,000. 0 keeps none (a sink still gets all);
    /// 0 without a sink turns the journal off: requests are numbered, not decoded into entries
    /// (fault rules still see an entry).
    pub fn journal_capacity(mut self, entries: usize) -> Self {
        self.config.journal_capacity = entries;
        self
    }

    /// Bytes the journal keeps in memory, as estimated from each entry's heap size when it is
    /// appended and when it is completed; past them the oldest entries go and are counted in
    /// [`JournalSnapshot::evicted`], as past [`Self::journal_capacity`]. Default
    /// [`DEFAULT_MAX_BYTES`](crate::journal::DEFAULT_MAX_BYTES), 512 MiB. 0 keeps none, as a
    /// capacity of 0 does.
    pub fn journal_max_bytes(mut self, bytes: usize) -> Self {
        self.config.journal_max_bytes = bytes;
        self
    }

    /// Writes every journal entry, once complete, to `sink` as one JSON line, flushed after
    /// each line (what `kmock serve --journal PATH` does). The bounds of memory never evict from it.
    pub fn journal_jsonl(mut self, sink: impl Write + Send + 'static) -> Self {
        self.journal_sink = Some(Sink(Box::new(sink)));
        self
    }

    /// Binds every listener, creates the configured topics and starts serving.
    ///
    /// # Errors
    /// [`Error::Config`] for default partitions below 1, a replication factor of 0 or above
    /// the broker count, or an unspecified host (`0.0.0.0`, `::`: Kafka refuses to advertise
    /// those); [`Error::Bind`] when a port cannot be bound;
    /// [`Error::Topic`] when a configured topic is invalid (bad name, fewer than one or more
    /// than 9,999 partitions, given twice).
    pub async fn start(self) -> Result<Cluster, Error> {
        let ClusterBuilder {
            config,
            journal_sink,
        } = self;
        if config.default_partitions < 1 {
            return Err(Error::Config(format!(
                "default partitions must be at least 1 (Kafka's num.partitions), not {}",
                config.default_partitions
            )));
        }
        if !(1..=config.brokers).contains(&config.replication_factor()) {
            return Err(Error::Config(format!(
                "replication factor {} is not between 1 and the {} brokers",
                config.replication_factor(),
                config.brokers
            )));
        }
        if config.host.is_unspecified() {
            return Err(Error::Config(format!(
                "{} cannot be advertised to clients; give the address they should connect to",
                config.host
            )));
        }
        config.limits.check()?;
        if !config.host.is_loopback() {
            tracing::warn!(
                host = %config.host,
                "brokers listen on a non-loopback address: anyone who can reach it can use them"
            );
        }
        let mut listeners = Vec::with_capacity(config.brokers);
        let mut brokers = Vec::with_capacity(config.brokers);
        for i in 0..config.brokers {
            let port = match config.port {
                0 => 0,
                first => first.checked_add(i as u16).ok_or(Error::Bind {
                    addr: SocketAddr::new(config.host, first),
                    source: std::io::Error::other("port range passes 65535"),
                })?,
            };
            let addr = SocketAddr::new(config.host, port);
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| Error::Bind { addr, source })?;
            let addr = listener
                .local_addr()
                .map_err(|source| Error::Bind { addr, source })?;
            brokers.push(BrokerInfo {
                node_id: i as i32 + 1,
                addr,
            });
            listeners.push(listener);
        }
        let state = config.initial_state(brokers.iter().map(|b| b.node_id).collect())?;
        let journal = Journal::new(
            config.journal_capacity,
            config.journal_max_bytes,
            journal_sink,
        );
        let seed = config.seed;
        let shared = Arc::new(Shared {
            config,
            brokers,
            state: Mutex::new(state),
            data_arrived: Notify::new(),
            journal,
            rules: Mutex::new(Rules::new(seed)),
            rules_in_force: AtomicBool::new(false),
            next_connection_id: AtomicU64::new(0),
        });
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let listeners = listeners
            .into_iter()
            .zip(&shared.brokers)
            .map(|(listener, broker)| {
                Listening::start(listener, broker.node_id, &shared, &shutdown)
            })
            .collect();
        tracker.spawn(group_timers(Arc::clone(&shared), shutdown.clone()));
        tracing::info!(bootstrap = %bootstrap(&shared.brokers), "kmock cluster started");
        Ok(Cluster {
            inner: Arc::new(Inner {
                verified: std::sync::atomic::AtomicBool::new(false),
                shared,
                shutdown,
                tracker,
                listeners: tokio::sync::Mutex::new(listeners),
            }),
        })
    }
}

/// A running fake Kafka cluster.
///
/// Cheap to clone (every clone is the same cluster) and `Send + Sync`. The cluster stops when
/// [`Cluster::shutdown`] is awaited, or when the last clone is dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), kmock::Error> {
/// let cluster = kmock::Cluster::builder().brokers(3).topic("orders", 6).start().await?;
/// assert_eq!(cluster.bootstrap().split(',').count(), 3);
/// cluster.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Whether `verify()` was called: then the drop does not check again.
    verified: std::sync::atomic::AtomicBool,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    /// Cluster-wide tasks (group timers).
    tracker: TaskTracker,
    /// Each broker's listener and connections, by node id order; also serializes cluster
    /// operations.
    listeners: tokio::sync::Mutex<Vec<Listening>>,
}

/// One broker's accept loop and connections: stopped together when the broker goes down.
#[derive(Debug)]
struct Listening {
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl Listening {
    /// Serves `listener` as broker `node_id` until `stop` (a child of `shutdown`) is cancelled.
    fn start(
        listener: TcpListener,
        node_id: i32,
        shared: &Arc<Shared>,
        shutdown: &CancellationToken,
    ) -> Self {
        let stop = shutdown.child_token();
        let tasks = TaskTracker::new();
        tasks.spawn(crate::server::serve(
            listener,
            node_id,
            Arc::clone(shared),
            stop.clone(),
            tasks.clone(),
        ));
        Self { stop, tasks }
    }

    /// Closes the listener and every connection, and waits until they have ended.
    async fn stop(&self) {
        self.stop.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

impl Drop for Inner {
    /// Stops the cluster, and panics if a rule's expectation is unmet — unless `verify()` was
    /// called (its result was seen) or the thread is already panicking — so a test that forgot
    /// `verify()` still fails. A drop inside a task that the runtime drops on shutdown cannot
    /// fail the test: call `verify()` there.
    fn drop(&mut self) {
        self.shutdown.cancel();
        let verified = self.verified.load(std::sync::atomic::Ordering::Relaxed);
        if !verified && !std::thread::panicking() {
            if let Err(unmet) = self.shared.rules().verify() {
                panic!("kmock fault expectations not met:\n{unmet}");
            }
        }
    }
}

/// A rule in force: read its counters, or remove it.
#[derive(Debug, Clone)]
pub struct RuleHandle {
    id: u64,
    shared: Arc<Shared>,
}

impl RuleHandle {
    /// The rule's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// How often the rule has fired.
    pub fn fired(&self) -> u64 {
        self.shared.rules().stats(self.id).map_or(0, |s| s.fired)
    }

    /// How many requests the rule has matched (fired or not).
    pub fn matched(&self) -> u64 {
        self.shared.rules().stats(self.id).map_or(0, |s| s.matched)
    }

    /// Takes the rule out of force; `false` if it was already removed. Its expectation is
    /// still checked.
    pub fn remove(&self) -> bool {
        self.shared.change_rules(|rules| rules.remove(self.id))
    }
}

impl Cluster {
    /// A builder with the defaults: one broker on an ephemeral loopback port, topic
    /// auto-creation on.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// The `host:port,host:port` bootstrap string a client takes, one entry per broker.
    pub fn bootstrap(&self) -> String {
        bootstrap(&self.inner.shared.brokers)
    }

    /// Node ids and addresses of the brokers, in node id order.
    pub fn brokers(&self) -> &[BrokerInfo] {
        &self.inner.shared.brokers
    }

    /// Creates a topic as CreateTopics would, with Kafka's default configs.
    ///
    /// # Errors
    /// [`Error::Topic`] when the name is invalid or taken, or `partitions` is below 1 or above
    /// 9,999 (Kafka's POLICY_VIOLATION: past 10,000 records for one controller operation).
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<(), Error> {
        self.inner
            .shared
            .state()
            .create_topic(name, partitions, None, BTreeMap::new())
            .map(|_| ())
            .map_err(|e| Error::Topic(e.message))
    }

    /// Node id of the leader of `topic`/`partition` (-1 while offline), if the partition
    /// exists.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        let state = self.inner.shared.state();
        Some(state.topics.get(topic)?.partition(partition)?.leader)
    }

    /// Leader epoch of `topic`/`partition`, if the partition exists.
    pub fn leader_epoch(&self, topic: &str, partition: i32) -> Option<i32> {
        let state = self.inner.shared.state();
        Some(state.topics.get(topic)?.partition(partition)?.leader_epoch)
    }

    /// Node id of `group_id`'s coordinator: the leader of its `__consumer_offsets` partition
    /// (-1 while that partition is offline).
    pub fn coordinator(&self, group_id: &str) -> i32 {
        self.inner.shared.state().group_coordinator(group_id)
    }

    /// Takes broker `node_id` down, as a controlled shutdown does: first it leaves every ISR,
    /// and every partition it led (and every group it coordinated) moves to the first other
    /// in-sync replica, or goes offline if it was the last, each with the leader epoch bumped,
    /// as Kafka's controller fails over; requests waiting there are answered
    /// NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR (the [`LeaderChange`]s are journaled as one
    /// [`ClusterOperation::BrokerDown`] entry). Then its listener and connections close. When
    /// this returns, connecting to it is refused and Metadata no longer lists it.
    ///
    /// # Errors
    /// [`Error::Operation`] when no such broker exists, it is already down, or the cluster
    /// was shut down.
    pub async fn broker_down(&self, node_id: i32) -> Result<(), Error> {
        let listeners = self.inner.listeners.lock().await;
        let changes = self.operate(
            node_id,
            |state, now| state.broker_down(node_id, now),
            |leader_changes| ClusterOperation::BrokerDown {
                node_id,
                leader_changes,
            },
        )?;
        tracing::info!(broker = node_id, leader_changes = changes, "broker down");
        listeners[self.broker_index(node_id)].stop().await;
        Ok(())
    }

    /// Brings broker `node_id` back on its address: it accepts connections again, rejoins the
    /// ISR of every partition it holds a replica of that has a leader, leads again those whose
    /// preferred replica it is, and leads an offline partition whose last in-sync replica it
    /// was (journaled as one [`ClusterOperation::BrokerUp`] entry).
    ///
    /// # Errors
    /// [`Error::Operation`] when no such broker exists, it is not down, or the cluster was
    /// shut down; [`Error::Bind`] when its port has been taken meanwhile (the broker stays
    /// down).
    pub async fn broker_up(&self, node_id: i32) -> Result<(), Error> {
        let mut listeners = self.inner.listeners.lock().await;
        let shared = &self.inner.shared;
        self.check_running()?;
        shared
            .state()
            .check_down(node_id)
            .map_err(Error::Operation)?;
        let index = self.broker_index(node_id);
        let addr = shared.brokers[index].addr;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        listeners[index] = Listening::start(listener, node_id, shared, &self.inner.shutdown);
        let changes = self.operate(
            node_id,
            |state, now| state.broker_up(node_id, now),
            |leader_changes| ClusterOperation::BrokerUp {
                node_id,
                leader_changes,
            },
        )?;
        tracing::info!(broker = node_id, leader_changes = changes, "broker up");
        Ok(())
    }

    /// Makes broker `node_id` the leader of `topic`/`partition`, bumping the leader epoch; the
    /// old leader answers NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH to a request at the
    /// old epoch) from then on, and a Fetch waiting there is answered at once (journaled as
    /// one [`ClusterOperation::MoveLeader`] entry). Nothing changes when it already leads.
    ///
    /// # Errors
    /// [`Error::Operation`] when the partition or broker does not exist, the broker is down or
    /// holds no in-sync replica of the partition, or the cluster was shut down.
    pub fn move_leader(&self, topic: &str, partition: i32, node_id: i32) -> Result<(), Error> {
        self.operate(
            node_id,
            |state, now| state.move_leader(topic, partition, node_id, now),
            |leader_changes| ClusterOperation::MoveLeader {
                topic: topic.to_owned(),
                partition,
                node_id,
                leader_changes,
            },
        )
        .map(|_| ())
    }

    /// Makes broker `node_id` the coordinator of `group_id`, by moving the leader of the
    /// group's `__consumer_offsets` partition (so every group on that partition moves, as in
    /// Kafka); the old coordinator answers NOT_COORDINATOR from then on, and JoinGroup and
    /// SyncGroup requests waiting there are answered NOT_COORDINATOR (journaled as one
    /// [`ClusterOperation::MoveCoordinator`] entry). Nothing changes when it already
    /// coordinates the group.
    ///
    /// # Errors
    /// As [`Cluster::move_leader`].
    pub fn move_coordinator(&self, group_id: &str, node_id: i32) -> Result<(), Error> {
        self.operate(
            node_id,
            |state, now| state.move_coordinator(group_id, node_id, now),
            |leader_changes| ClusterOperation::MoveCoordinator {
                group_id: group_id.to_owned(),
                node_id,
                leader_changes,
            },
        )
        .map(|_| ())
    }

    /// Starts afresh without restarting: the journal in memory is emptied (numbering goes on,
    /// so no seq is given twice; a JSON Lines sink gets a [`ClusterOperation::Reset`] line,
    /// after which `kmock check` starts afresh too), every topic is deleted and the configured
    /// ones created again empty (new topic ids), groups and committed offsets and producers'
    /// sequence state are gone. Listeners, ports, open connections, brokers down, fault rules
    /// and producer id allocation (ids keep counting up) stay as they are.
    pub fn reset(&self) {
        let shared = &self.inner.shared;
        let mut state = shared.state();
        let mut fresh = shared.config.fresh_state(state.nodes.clone());
        let now = tokio::time::Instant::now();
        for &node in &state.down {
            // Cannot fail: the fresh state has every broker up.
            let _ = fresh.broker_down(node, now);
        }
        std::mem::swap(&mut fresh.producers, &mut state.producers);
        *state = fresh;
        shared.journal.clear(ClusterOperation::Reset);
        drop(state);
        shared.data_arrived.notify_waiters();
        tracing::info!("cluster reset");
    }

    /// Runs a cluster operation on the state and journals it under the same lock (so no
    /// request answered under the new state is numbered before it), then wakes waiting
    /// Fetch requests, whose partitions may have changed leader. Gives the number of leader
    /// changes.
    fn operate(
        &self,
        node_id: i32,
        change: impl FnOnce(
            &mut ClusterState,
            tokio::time::Instant,
        ) -> Result<Vec<LeaderChange>, String>,
        operation: impl FnOnce(Vec<LeaderChange>) -> ClusterOperation,
    ) -> Result<usize, Error> {
        self.check_running()?;
        let shared = &self.inner.shared;
        let mut state = shared.state();
        let changes = change(&mut state, tokio::time::Instant::now()).map_err(Error::Operation)?;
        let count = changes.len();
        shared.journal.record_operation(node_id, operation(changes));
        drop(state);
        shared.data_arrived.notify_waiters();
        Ok(count)
    }

    fn check_running(&self) -> Result<(), Error> {
        if self.inner.shutdown.is_cancelled() {
            return Err(Error::Operation("the cluster was shut down".into()));
        }
        Ok(())
    }

    fn broker_index(&self, node_id: i32) -> usize {
        self.brokers()
            .iter()
            .position(|b| b.node_id == node_id)
            .expect("the state knows the broker")
    }

    /// Puts a fault rule in force from the next request on.
    ///
    /// # Errors
    /// [`Error::Config`] for a rule without an action, or an `error` action on an API whose
    /// answers kmock cannot build with an error yet.
    pub fn add_rule(&self, rule: Rule) -> Result<RuleHandle, Error> {
        let id = self
            .inner
            .shared
            .change_rules(|rules| rules.add(rule))
            .map_err(Error::Config)?;
        Ok(RuleHandle {
            id,
            shared: Arc::clone(&self.inner.shared),
        })
    }

    /// Takes the rule with this id out of force; `false` if no rule in force has it. Its
    /// expectation is still checked, as for [`RuleHandle::remove`].
    pub fn remove_rule(&self, id: u64) -> bool {
        self.inner.shared.change_rules(|rules| rules.remove(id))
    }

    /// Takes every rule out of force and returns their ids, in the order they were added.
    /// Their expectations are still checked.
    pub fn remove_rules(&self) -> Vec<u64> {
        self.inner.shared.change_rules(|rules| {
            let ids: Vec<u64> = rules.list().iter().map(|r| r.id).collect();
            for id in &ids {
                rules.remove(*id);
            }
            ids
        })
    }

    /// Locks the cluster state (topics, groups, producer ids): hold it briefly, never across
    /// an `.await`.
    pub(crate) fn state(&self) -> MutexGuard<'_, ClusterState> {
        self.inner.shared.state()
    }

    /// What every listener and connection of this cluster shares (for the fuzz entry point).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// Every rule in force, with how often each matched and fired.
    pub fn rules(&self) -> Vec<RuleStats> {
        self.inner.shared.rules().list()
    }

    /// Checks every rule's `expect(…)`.
    ///
    /// # Errors
    /// [`Error::Expectation`] listing each rule that fired a number of times outside its
    /// expectation, with how often it fired and the journal entries it fired on.
    pub fn verify(&self) -> Result<(), Error> {
        self.inner
            .verified
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.inner
            .shared
            .rules()
            .verify()
            .map_err(Error::Expectation)
    }

    /// Runs the ordering checks over the journal and the partition logs.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), kmock::Error> {
    /// let cluster = kmock::Cluster::builder().start().await?;
    /// // … a client runs against cluster.bootstrap() …
    /// let report = cluster.check(&kmock::Checks::default());
    /// report.assert_clean(); // panics listing every violation
    /// # Ok(())
    /// # }
    /// ```
    pub fn check(&self, checks: &Checks) -> Report {
        let journal = self.journal();
        let mut report = crate::check::run_journal(journal.entries(), checks);
        if journal.evicted() > 0 {
            report.skipped.push(format!(
                "{} journal entries were evicted (journal_capacity, journal_max_bytes): checks saw only the rest",
                journal.evicted()
            ));
        }
        let state = self.inner.shared.state();
        report
            .violations
            .extend(crate::check::logs::check(&state, journal.entries(), checks));
        report
    }

    /// A copy of the journal now: every request received, in arrival order.
    pub fn journal(&self) -> JournalSnapshot {
        self.inner.shared.journal.snapshot()
    }

    /// The journal itself, shared: what the control API pages through without a copy.
    pub(crate) fn journal_store(&self) -> &Journal {
        &self.inner.shared.journal
    }

    /// Waits until the journal holds an entry matching `pred` (one already there counts),
    /// and returns it. Checked on every arrival and every completion.
    ///
    /// # Errors
    /// [`JournalError::Timeout`] after `timeout`, listing the last entries seen.
    pub async fn wait_for(
        &self,
        pred: impl Fn(&Entry) -> bool,
        timeout: std::time::Duration,
    ) -> Result<Entry, JournalError> {
        self.inner.shared.journal.wait_for(pred, timeout).await
    }

    /// Every journal entry completed from now on (a request once answered or given up on, an
    /// operation at once), in completion order: a live view of what [`Cluster::journal`]
    /// shows. A receiver more than [`SUBSCRIBER_BACKLOG`](crate::journal::SUBSCRIBER_BACKLOG)
    /// entries behind gets `RecvError::Lagged` with the count it missed; until it reads, the
    /// entries it has not read stay in memory with it (shared, not copied), whatever the
    /// journal's bounds: read it, or drop it. Nothing arrives while
    /// the journal is off (`journal_capacity(0)` without a sink or rule).
    pub fn subscribe_journal(&self) -> tokio::sync::broadcast::Receiver<Arc<Entry>> {
        self.inner.shared.journal.subscribe()
    }

    /// Stops every listener and connection and waits until they have ended; the ports are free
    /// when this returns. Other clones of the handle see a stopped cluster.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        for listening in self.inner.listeners.lock().await.iter() {
            listening.stop().await;
        }
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
    }
}

/// How often group session and rebalance timeouts are checked.
const GROUP_TIMER_TICK: std::time::Duration = std::time::Duration::from_millis(10);

/// Expires group members and rebalances on Tokio's clock until shutdown.
async fn group_timers(shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(GROUP_TIMER_TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            _ = ticks.tick() => shared.state().tick_groups(tokio::time::Instant::now()),
        }
    }
}

fn bootstrap(brokers: &[BrokerInfo]) -> String {
    brokers
        .iter()
        .map(|b| b.addr.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
