//! Cluster operations: brokers taken down and brought back, partition leaders and group and
//! transaction coordinators moved, a reset; each journaled under the state's lock.

use tokio::net::TcpListener;

use super::Cluster;
use crate::error::Error;
use crate::journal::{ClusterOperation, LeaderChange};
use crate::state::ClusterState;

impl Cluster {
    /// Node id of `group_id`'s coordinator: the leader of its `__consumer_offsets` partition
    /// (-1 while that partition is offline).
    pub fn coordinator(&self, group_id: &str) -> i32 {
        self.inner.shared.state().group_coordinator(group_id)
    }

    /// Node id of `transactional_id`'s transaction coordinator: the leader of its
    /// `__transaction_state` partition (Kafka's hash of the id over its 50 partitions; -1
    /// while that partition is offline).
    pub fn transaction_coordinator(&self, transactional_id: &str) -> i32 {
        self.inner
            .shared
            .state()
            .transaction_coordinator(transactional_id)
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
        listeners[index] = crate::server::listen(listener, node_id, shared, &self.inner.shutdown);
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
    /// holds no in-sync replica of the partition, or the cluster was shut down; in proxy mode
    /// always (the upstream cluster decides its leaders).
    pub fn move_leader(&self, topic: &str, partition: i32, node_id: i32) -> Result<(), Error> {
        self.fake_only("moving a partition leader")?;
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
    /// As [`Cluster::move_leader`]; refused in proxy mode.
    pub fn move_coordinator(&self, group_id: &str, node_id: i32) -> Result<(), Error> {
        self.fake_only("moving a group coordinator")?;
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

    /// Makes broker `node_id` the transaction coordinator of `transactional_id`, by moving the
    /// leader of the id's `__transaction_state` partition (so every transactional id on that
    /// partition moves, as in Kafka, where the new leader loads their state from the log); the
    /// old coordinator answers NOT_COORDINATOR to the transaction APIs from then on (journaled
    /// as one [`ClusterOperation::MoveTransactionCoordinator`] entry). Open transactions go on
    /// at the new coordinator. Nothing changes when it already coordinates the id.
    ///
    /// # Errors
    /// As [`Cluster::move_leader`].
    pub fn move_transaction_coordinator(
        &self,
        transactional_id: &str,
        node_id: i32,
    ) -> Result<(), Error> {
        self.fake_only("moving a transaction coordinator")?;
        self.operate(
            node_id,
            |state, now| state.move_transaction_coordinator(transactional_id, node_id, now),
            |leader_changes| ClusterOperation::MoveTransactionCoordinator {
                transactional_id: transactional_id.to_owned(),
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
    ///
    /// In proxy mode only the journal is emptied: the topics, groups and producers are the
    /// upstream cluster's.
    pub fn reset(&self) {
        let shared = &self.inner.shared;
        if shared.upstream.is_some() {
            shared.journal.clear(ClusterOperation::Reset);
            tracing::info!("journal reset (proxy mode: the upstream keeps its state)");
            return;
        }
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
        if shared.upstream.is_some() {
            // A proxy's brokers are listeners: no leader moves with them (the upstream's
            // broker runs on), and the fake's state is not theirs.
            let up = shared.brokers.iter().any(|b| b.node_id == node_id);
            let down = state.down.contains(&node_id);
            let operation = operation(Vec::new());
            match (&operation, up, down) {
                (_, false, _) => {
                    return Err(Error::Operation(format!(
                        "no broker {node_id} among the proxy's listeners from the start"
                    )))
                }
                (ClusterOperation::BrokerDown { .. }, _, true) => {
                    return Err(Error::Operation(format!(
                        "broker {node_id} is already down"
                    )))
                }
                (ClusterOperation::BrokerUp { .. }, _, false) => {
                    return Err(Error::Operation(format!("broker {node_id} is not down")))
                }
                (ClusterOperation::BrokerDown { .. }, ..) => {
                    state.down.insert(node_id);
                }
                _ => {
                    state.down.remove(&node_id);
                }
            }
            shared.journal.record_operation(node_id, operation);
            return Ok(0);
        }
        let changes = change(&mut state, tokio::time::Instant::now()).map_err(Error::Operation)?;
        let count = changes.len();
        shared.journal.record_operation(node_id, operation(changes));
        drop(state);
        shared.data_arrived.notify_waiters();
        Ok(count)
    }

    /// Refuses `what` in proxy mode, where only the upstream cluster can do it.
    pub(crate) fn fake_only(&self, what: &str) -> Result<(), Error> {
        if self.inner.shared.upstream.is_some() {
            return Err(Error::Operation(format!(
                "{what} is a fake-only operation: in proxy mode the upstream Kafka cluster decides it"
            )));
        }
        Ok(())
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
}
