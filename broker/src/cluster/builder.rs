//! [`ClusterBuilder`]: a cluster's shape and options, and its start.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::Error;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;

use crate::faults::{Rule, Rules};
use crate::journal::{Journal, Sink};

use super::{bootstrap, group_timers, retention_timer, Cluster, Inner};
use crate::shared::{BrokerInfo, Config, KafkaVersion, Shared, TransactionVersion};

/// Builds and starts a [`Cluster`]. Nothing listens until [`ClusterBuilder::start`].
#[derive(Debug, Default)]
#[must_use = "a ClusterBuilder does nothing until .start().await"]
pub struct ClusterBuilder {
    pub(crate) config: Config,
    journal_sink: Option<Sink>,
    /// Whether [`Self::transaction_version`] was called (otherwise the emulated Kafka
    /// version chooses).
    transaction_version_set: bool,
}

impl ClusterBuilder {
    /// For `load` after the start, the group and transaction coordinators answer
    /// COORDINATOR_LOAD_IN_PROGRESS, as Kafka's do while they load their `__consumer_offsets` /
    /// `__transaction_state` partitions after a broker starts (`CoordinatorRuntime`: a shard
    /// not yet loaded refuses its reads and writes with `CoordinatorLoadInProgressException`):
    /// JoinGroup, SyncGroup, LeaveGroup, OffsetCommit, OffsetFetch, TxnOffsetCommit,
    /// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, ConsumerGroupHeartbeat, and the group
    /// coordinator's reads and admin calls (DescribeGroups, ListGroups, DeleteGroups,
    /// OffsetDelete, ConsumerGroupDescribe: `GroupCoordinatorService` runs each through its
    /// runtime), so that a client's retry path runs; a group API's request to a broker that is
    /// not its group's coordinator still gets NOT_COORDINATOR, and one with an empty group id
    /// INVALID_GROUP_ID, as Kafka answers both before its load check. A Heartbeat to the
    /// coordinator is answered NONE meanwhile, as Kafka's `GroupCoordinatorService.heartbeat`
    /// answers it while loading.
    /// FindCoordinator and InitProducerId are answered as usual. The load is fault rules named
    /// `coordinator_load`, journaled as faults and listed with the others; their window is
    /// measured from the cluster's start (a reset does not start another load), and it ends
    /// early when they are removed.
    /// Default: none.
    pub fn coordinator_load(mut self, load: std::time::Duration) -> Self {
        self.config.coordinator_load = Some(load);
        self
    }

    /// Proxy mode: instead of a fake cluster, kmock's listeners, journal, fault rules and
    /// checks in front of the real Kafka cluster at `bootstrap` (`host:port[,host:port…]`,
    /// spoken to in PLAINTEXT; SASL and TLS are out of scope). [`Self::start`] asks it for its
    /// brokers and opens one listener per broker, with the upstream's node ids (on
    /// [`Self::port`], `port + 1`, … in node id order); a broker first seen later gets a
    /// listener on an ephemeral port. Every answer naming brokers is rewritten to the
    /// proxy's listeners. [`Self::brokers`] is then the upstream's count, and the options of
    /// the fake's state (topics, partitions, versions, groups) do not apply; [`Self::topic`]
    /// is refused at the start. The README's "When a fake is not enough" says what else
    /// differs.
    pub fn upstream(mut self, bootstrap: &str) -> Self {
        let addrs = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        self.config.upstream = Some(addrs);
        self
    }

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

    /// The Kafka version to emulate ([`KafkaVersion`]: 2.4 or later). Default
    /// [`KafkaVersion::LATEST`] (4.4).
    ///
    /// ApiVersions advertises the APIs kmock implements at the versions that release's broker
    /// advertised (taken from its own artifacts, see `fixtures/kafka/api-versions/`), and a
    /// request at another version closes its connection as that broker's would; before 4.0
    /// no `transaction.version` feature is listed and the transaction protocol is version 1
    /// (so [`Self::transaction_version`] V2 is refused), and ConsumerGroupHeartbeat and
    /// ConsumerGroupDescribe (listed by 3.7-3.9 KRaft brokers) are answered
    /// UNSUPPORTED_VERSION, as the default `group.coordinator.rebalance.protocols=classic` of
    /// those releases does; before 3.7 `min.insync.replicas` above the replica count refuses
    /// acks=all produces (KAFKA-15583); before 2.5 a producer without state on a partition
    /// whose first batch does not start at sequence 0 gets UNKNOWN_PRODUCER_ID (KIP-360).
    pub fn kafka_version(mut self, version: KafkaVersion) -> Self {
        self.config.kafka_version = version;
        self
    }

    /// The `transaction.version` feature the cluster finalizes ([`TransactionVersion`]).
    /// Default [`TransactionVersion::V2`], as Kafka 4.x finalizes it on a new cluster;
    /// [`TransactionVersion::V1`] emulates Kafka 3.x's transactions. With [`TransactionVersion::V2`], ApiVersions advertises level 2, a
    /// transactional Produce v12+ adds its partition to the transaction, TxnOffsetCommit v5+ its
    /// group (KIP-890 part 2).
    pub fn transaction_version(mut self, version: TransactionVersion) -> Self {
        self.config.transaction_version = version;
        self.transaction_version_set = true;
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

    /// How often members of KIP-848 consumer groups are told to heartbeat (Kafka's
    /// `group.consumer.heartbeat.interval.ms`). Default 5 s; a test may lower it so that
    /// members see new assignments sooner.
    pub fn consumer_group_heartbeat_interval(mut self, interval: Duration) -> Self {
        self.config.consumer_groups.heartbeat_interval = interval;
        self
    }

    /// How long a KIP-848 consumer group member stays without a heartbeat before it is
    /// fenced (Kafka's `group.consumer.session.timeout.ms`). Default 45 s.
    pub fn consumer_group_session_timeout(mut self, timeout: Duration) -> Self {
        self.config.consumer_groups.session_timeout = timeout;
        self
    }

    /// The least time between two target assignments of a KIP-848 consumer group (Kafka 4.4's
    /// `group.consumer.assignment.interval.ms`). Default 1 s, as Kafka; `Duration::ZERO`
    /// computes a new target on the first heartbeat after every change, which makes a
    /// wire-level test's sequence of heartbeats independent of time.
    pub fn consumer_group_assignment_interval(mut self, interval: Duration) -> Self {
        self.config.consumer_groups.assignment_interval = interval;
        self
    }

    /// The server-side assignors KIP-848 members may name, the first the default (Kafka's
    /// `group.consumer.assignors`; default `uniform`, `range`).
    ///
    /// # Errors
    /// [`Error::Config`] unless `names` lists `uniform` and/or `range`, each once.
    pub fn consumer_group_assignors(mut self, names: &[&str]) -> Result<Self, Error> {
        self.config.consumer_groups.assignors =
            crate::state::groups::consumer::assignor_list(names).map_err(Error::Config)?;
        Ok(self)
    }

    /// Which online conversions between a classic group and a KIP-848 consumer group the
    /// coordinator makes (Kafka's `group.consumer.migration.policy`; default
    /// [`MigrationPolicy::Bidirectional`](crate::MigrationPolicy), Kafka 4's).
    pub fn group_consumer_migration_policy(mut self, policy: crate::MigrationPolicy) -> Self {
        self.config.consumer_groups.migration_policy = policy;
        self
    }

    /// Members a KIP-848 consumer group takes before GROUP_MAX_SIZE_REACHED (Kafka's
    /// `group.consumer.max.size`). Default unlimited.
    pub fn consumer_group_max_size(mut self, members: usize) -> Self {
        self.config.consumer_groups.max_size = members;
        self
    }

    /// Entries the journal keeps in memory; when full the oldest go and are counted in
    /// [`JournalSnapshot::evicted`](crate::JournalSnapshot::evicted). Default 1,000,000. 0 keeps
    /// none (a sink still gets all);
    /// 0 without a sink turns the journal off: requests are numbered, not decoded into entries
    /// (fault rules still see an entry).
    pub fn journal_capacity(mut self, entries: usize) -> Self {
        self.config.journal_capacity = entries;
        self
    }

    /// Bytes the journal keeps in memory, as estimated from each entry's heap size when it is
    /// appended and when it is completed (an uncompressed Produce batch's records, held until
    /// their digests are first read, count whole; past the bound they give way to their
    /// digests, oldest first, before any entry goes); past them the oldest entries go and are counted in
    /// [`JournalSnapshot::evicted`](crate::JournalSnapshot::evicted), as past
    /// [`Self::journal_capacity`]. Default
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

    /// How often every partition's retention is checked, deleting the segments that
    /// `retention.ms` and `retention.bytes` (and DeleteRecords) leave behind (Kafka's
    /// `log.retention.check.interval.ms`). Default 5 minutes, as Kafka. `retention.bytes` is also
    /// checked after every append, so that a log's memory stays bounded between checks; a test of
    /// `retention.ms` lowers this, down to [`MIN_RETENTION_CHECK_INTERVAL`] (100 ms): a shorter
    /// interval makes [`Self::start`] fail with [`Error::Config`], since every check walks every
    /// partition under the state lock.
    ///
    /// [`MIN_RETENTION_CHECK_INTERVAL`]: super::MIN_RETENTION_CHECK_INTERVAL
    pub fn retention_check_interval(mut self, interval: Duration) -> Self {
        self.config.retention_check_interval = interval;
        self
    }

    /// A cap on the bytes stored in all partition logs together (record batches as received,
    /// the journal not included), for long runs: a batch that would take the total past it is
    /// refused with KAFKA_STORAGE_ERROR, as Kafka answers when a log directory cannot be
    /// written (a full disk), with a message naming the cap, and is journaled so. Retention
    /// frees bytes again. Default: no cap.
    pub fn max_stored_bytes(mut self, bytes: u64) -> Self {
        self.config.max_stored_bytes = Some(bytes);
        self
    }

    /// Binds every listener, creates the configured topics and starts serving.
    ///
    /// # Errors
    /// [`Error::Config`] for a Kafka version below 2.4 or one before 4.0 with transaction
    /// version 2, default partitions below 1, a replication factor of 0 or above the broker
    /// count, a retention check interval below 100 ms, or an unspecified host (`0.0.0.0`,
    /// `::`: Kafka refuses to advertise those); [`Error::Bind`] when a port cannot be bound;
    /// [`Error::Topic`] when a configured topic is invalid (bad name, fewer than one or more
    /// than 9,999 partitions, given twice). In proxy mode ([`Self::upstream`]), also
    /// [`Error::Upstream`] when no bootstrap address answers Metadata, and [`Error::Config`]
    /// for topics to create or an empty bootstrap.
    pub async fn start(self) -> Result<Cluster, Error> {
        let ClusterBuilder {
            mut config,
            journal_sink,
            transaction_version_set,
        } = self;
        config.kafka_version.check()?;
        if config.kafka_version < KafkaVersion::V4_0 {
            if transaction_version_set && config.transaction_version == TransactionVersion::V2 {
                return Err(Error::Config(format!(
                    "transaction version 2 came with Kafka 4.0; Kafka {} has version 1 only",
                    config.kafka_version
                )));
            }
            config.transaction_version = TransactionVersion::V1;
        }
        let discovered = match &config.upstream {
            None => None,
            Some(bootstrap) => {
                if bootstrap.is_empty() {
                    return Err(Error::Config(
                        "the upstream bootstrap names no address".into(),
                    ));
                }
                if !config.topics.is_empty() {
                    return Err(Error::Config(
                        "a proxy creates no topics: its topics are the upstream cluster's (create them there)".into(),
                    ));
                }
                let brokers = crate::proxy::discover(bootstrap).await?;
                config.brokers = brokers.len();
                config.replication_factor = None;
                Some(brokers)
            }
        };
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
        if config.retention_check_interval < super::MIN_RETENTION_CHECK_INTERVAL {
            return Err(Error::Config(format!(
                "a retention check interval of {:?} is below kmock's floor of {:?} (each check walks every partition under the state lock)",
                config.retention_check_interval,
                super::MIN_RETENTION_CHECK_INTERVAL
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
            let node_id = discovered
                .as_ref()
                .map_or(i as i32 + 1, |upstream| upstream[i].node_id);
            brokers.push(BrokerInfo { node_id, addr });
            listeners.push(listener);
        }
        let state = config.initial_state(brokers.iter().map(|b| b.node_id).collect())?;
        let journal = Journal::new(
            config.journal_capacity,
            config.journal_max_bytes,
            journal_sink,
        );
        let seed = config.seed;
        let rules = coordinator_load_rules(seed, config.coordinator_load)?;
        let in_force = rules.any();
        let shutdown = CancellationToken::new();
        let upstream = discovered.map(|upstream| {
            let addrs: Vec<SocketAddr> = brokers.iter().map(|b| b.addr).collect();
            crate::proxy::Upstream::new(&upstream, &addrs, config.host, shutdown.clone())
        });
        let shared = Arc::new(Shared {
            config,
            brokers,
            upstream,
            state: Mutex::new(state),
            data_arrived: Notify::new(),
            journal,
            rules: Mutex::new(rules),
            rules_in_force: AtomicBool::new(in_force),
            client_quotas_set: AtomicBool::new(false),
            next_connection_id: AtomicU64::new(0),
        });
        let tracker = TaskTracker::new();
        let listeners = listeners
            .into_iter()
            .zip(&shared.brokers)
            .map(|(listener, broker)| {
                crate::server::listen(listener, broker.node_id, &shared, &shutdown)
            })
            .collect();
        tracker.spawn(group_timers(Arc::clone(&shared), shutdown.clone()));
        tracker.spawn(retention_timer(Arc::clone(&shared), shutdown.clone()));
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

/// The APIs a loading coordinator refuses ([`ClusterBuilder::coordinator_load`]); Heartbeat's
/// refusal is answered NONE (`fault_answers`), as Kafka's `GroupCoordinatorService.heartbeat`
/// answers it.
const COORDINATOR_APIS: &[ApiKey] = &[
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::TxnOffsetCommit,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::DeleteGroups,
    ApiKey::OffsetDelete,
    ApiKey::ConsumerGroupDescribe,
    ApiKey::Heartbeat,
];

/// The rules in force at the start: none, or COORDINATOR_LOAD_IN_PROGRESS on every
/// [`COORDINATOR_APIS`] request until `load` after the start; a group API's request only when
/// it reaches the coordinator's load check ([`Rule::at_group_coordinator`]: not on a broker
/// that is not its group's coordinator, nor for an empty group id).
fn coordinator_load_rules(seed: u64, load: Option<std::time::Duration>) -> Result<Rules, Error> {
    let mut rules = Rules::new(seed, crate::handlers::IMPLEMENTED);
    if let Some(load) = load {
        for api in COORDINATOR_APIS {
            let rule = Rule::on(*api)
                .at_group_coordinator()
                .named("coordinator_load")
                .until(load)
                .from_cluster_start()
                .error(ResponseError::CoordinatorLoadInProgress);
            rules.add(rule).map_err(Error::Config)?;
        }
    }
    Ok(rules)
}
