//! The cluster handle and its builder.

use std::collections::BTreeMap;
use std::sync::{Arc, MutexGuard};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::check::{Checks, Report};
use crate::error::Error;
use crate::faults::{Rule, RuleStats};
use crate::journal::{Entry, Journal, JournalError, JournalSnapshot};
use crate::state::ClusterState;

mod builder;
mod limits;
mod operations;

use crate::listening::Listening;
use crate::shared::Shared;
pub use crate::shared::{
    BrokerInfo, KafkaVersion, TransactionVersion, MIN_RETENTION_CHECK_INTERVAL,
};
pub use builder::ClusterBuilder;

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

    /// Node ids and addresses of the brokers of the start, in node id order: in proxy mode,
    /// the listeners opened at the start for the upstream's brokers, with its node ids. Those
    /// opened later for brokers first seen in an answer are in [`Cluster::all_brokers`] (and
    /// [`Cluster::late_brokers`]); broker operations act on the brokers of the start.
    pub fn brokers(&self) -> &[BrokerInfo] {
        &self.inner.shared.brokers
    }

    /// Every broker listener, in node id order: those of the start ([`Cluster::brokers`]) and,
    /// in proxy mode, those opened later for upstream brokers first seen in an answer
    /// ([`Cluster::late_brokers`]). A fake's are its brokers.
    pub fn all_brokers(&self) -> Vec<BrokerInfo> {
        let mut all = self.brokers().to_vec();
        all.extend(self.late_brokers());
        all.sort_by_key(|b| b.node_id);
        all
    }

    /// Whether this is a proxy in front of a real Kafka cluster
    /// ([`ClusterBuilder::upstream`]).
    pub fn is_proxy(&self) -> bool {
        self.inner.shared.upstream.is_some()
    }

    /// In proxy mode, the upstream brokers first seen after the start, each with the listener
    /// opened for it then, in node id order; empty for a fake.
    pub fn late_brokers(&self) -> Vec<BrokerInfo> {
        let Some(upstream) = &self.inner.shared.upstream else {
            return Vec::new();
        };
        let known: Vec<i32> = self.brokers().iter().map(|b| b.node_id).collect();
        upstream
            .late_brokers(&known)
            .into_iter()
            .map(|(node_id, addr)| BrokerInfo { node_id, addr })
            .collect()
    }

    /// Creates a topic as CreateTopics would, with Kafka's default configs.
    ///
    /// # Errors
    /// [`Error::Topic`] when the name is invalid or taken, or `partitions` is below 1 or above
    /// 9,999 (Kafka's POLICY_VIOLATION: past 10,000 records for one controller operation);
    /// [`Error::Operation`] in proxy mode (create it in the upstream cluster).
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<(), Error> {
        self.fake_only("creating a topic")?;
        self.inner
            .shared
            .state()
            .create_topic(name, partitions, None, BTreeMap::new())
            .map(|_| ())
            .map_err(|e| Error::Topic(e.message))
    }

    /// Runs Kafka's retention check on every partition now, as the timer does every
    /// [`ClusterBuilder::retention_check_interval`] (`retention.ms`, `retention.bytes`, and
    /// segments wholly below a DeleteRecords' log start offset), so that a test need not wait
    /// for the timer. Each partition it deletes from is journaled
    /// ([`crate::journal::ClusterOperation::Retention`]). Returns how many partitions' log start
    /// offsets moved.
    pub fn check_retention(&self) -> usize {
        check_retention(&self.inner.shared)
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

    /// Runs the ordering checks over the journal and the partition logs. In proxy mode,
    /// which has no partition logs, `duplicate-write` and `lost-write` read where batches were
    /// written from the Produce answers, as `kmock check` does offline, and
    /// `out-of-order-write` is reported as skipped.
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
        let proxy = self.inner.shared.upstream.is_some();
        let mut report = if proxy {
            // No partition logs of its own: as offline, where batches were written is read
            // from the Produce answers, and out-of-order-write cannot run.
            let mut report = crate::check::run(journal.entries(), checks);
            for skipped in &mut report.skipped {
                if skipped.starts_with("out-of-order-write") {
                    *skipped = "out-of-order-write: needs the partition logs, and in proxy mode \
                                they are the upstream's"
                        .to_owned();
                }
            }
            report
        } else {
            crate::check::run_journal(journal.entries(), checks)
        };
        if journal.evicted() > 0 {
            report.skipped.push(format!(
                "{} journal entries were evicted (journal_capacity, journal_max_bytes): checks saw only the rest",
                journal.evicted()
            ));
        }
        if proxy {
            return report;
        }
        let state = self.inner.shared.state();
        report
            .violations
            .extend(crate::check::logs::check(&state, journal.entries(), checks));
        report
    }

    /// Waits (at most half a second) until every answer whose write to its socket had begun
    /// has its journal entry complete. An entry is completed just after its answer is written,
    /// so a client can hold an answer whose entry still says it waits for one; await this
    /// before [`Self::check`] or [`Self::journal`] when the test's last step was a client
    /// reading an answer. The control API's `/check` and `/journal` do.
    pub async fn settled(&self) {
        self.inner.shared.journal.settled().await;
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
        if let Some(upstream) = &self.inner.shared.upstream {
            upstream.stop_late().await;
        }
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
    }
}

/// How often group session and rebalance timeouts are checked.
const GROUP_TIMER_TICK: std::time::Duration = std::time::Duration::from_millis(10);

/// Expires group members and rebalances, and aborts transactions past their timeout, on
/// Tokio's clock until shutdown.
async fn group_timers(shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(GROUP_TIMER_TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            _ = ticks.tick() => {
                let now = tokio::time::Instant::now();
                let mut state = shared.state();
                state.tick_groups(now);
                let conversions = state.groups.take_conversions();
                // Transactions open past their timeout are aborted, as Kafka's coordinator does.
                let aborted = state.abort_timed_out_transactions(now, shared.now_ms());
                let coordinators: Vec<i32> = conversions
                    .iter()
                    .map(|c| state.group_coordinator(&c.group_id))
                    .collect();
                drop(state);
                for (c, node) in conversions.into_iter().zip(coordinators) {
                    crate::handlers::consumer_group_heartbeat::journal_conversions(
                        &shared,
                        node,
                        vec![c],
                    );
                }
                if !aborted.is_empty() {
                    shared.data_arrived.notify_waiters();
                }
            }
        }
    }
}

/// Kafka's retention check (`LogManager.cleanupLogs`), every
/// [`ClusterBuilder::retention_check_interval`], first one interval after the start (Kafka waits
/// 30 s before its first).
async fn retention_timer(shared: Arc<Shared>, shutdown: CancellationToken) {
    let period = shared.config.retention_check_interval;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            _ = ticks.tick() => {
                let moved = check_retention(&shared);
                if moved > 0 {
                    tracing::debug!(partitions = moved, "retention moved log start offsets");
                }
            }
        }
    }
}

/// Kafka's retention check on every partition at the wall clock now, each partition it deleted
/// from journaled while the state is still locked (so no request answered after the deletion
/// is numbered before it). Returns how many partitions' log start offsets moved.
fn check_retention(shared: &Shared) -> usize {
    let now_ms = shared.now_ms();
    let mut state = shared.state();
    let deleted = state.delete_old_segments(now_ms);
    for (topic, partition, leader, d) in &deleted {
        let operation = crate::journal::ClusterOperation::retention(topic, *partition, *d);
        shared.journal.record_operation(*leader, operation);
    }
    drop(state);
    deleted.iter().filter(|(.., d)| d.moved).count()
}

fn bootstrap(brokers: &[BrokerInfo]) -> String {
    brokers
        .iter()
        .map(|b| b.addr.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
