//! Cluster operations: brokers going down and coming back, leaders and coordinators moved.
//!
//! As Kafka's KRaft controller (`ReplicationControlManager`, `PartitionChangeBuilder`, unclean
//! leader election off): a broker that goes down leaves the ISR of its partitions, and every
//! partition it led gets the first in-sync replica as leader, with the leader epoch bumped.
//! When the last in-sync replica goes down, the partition is offline (leader -1) and its ISR
//! keeps that replica: only its return brings the partition back, however many other replicas
//! return first. Group and transaction coordinators follow the leaders of `__consumer_offsets`
//! and `__transaction_state`, which fail over the same way. Each change is a
//! [`LeaderChange`], journaled with the operation.
//!
//! Deviations from Apache Kafka: followers are never behind, so a replica on a live broker of a
//! partition with a leader is always in the ISR (no `replica.lag.time.max.ms`, no eligible
//! leader replicas); a broker that comes back leads again at once the partitions whose
//! preferred leader it is, where Kafka's `auto.leader.rebalance.enable` does so within
//! `leader.imbalance.check.interval.seconds` (300 s) and only past a 10 % imbalance.

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::coordinator::partition_for;
use super::topics::Partition;
use super::ClusterState;

/// Name of the internal topic whose partition leaders coordinate groups.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";
/// Name of the internal topic whose partition leaders coordinate transactions.
pub const TRANSACTION_STATE: &str = "__transaction_state";

/// One partition's change of leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderChange {
    /// Topic name (`__consumer_offsets` for a group coordinator).
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Node id of the old leader (-1: none).
    pub from: i32,
    /// Node id of the new leader (-1: none, the partition is offline).
    pub to: i32,
    /// The new leader epoch.
    pub leader_epoch: i32,
}

impl ClusterState {
    /// Node ids of the brokers that are up, in order.
    pub fn live_nodes(&self) -> Vec<i32> {
        self.nodes
            .iter()
            .copied()
            .filter(|n| !self.down.contains(n))
            .collect()
    }

    /// Whether broker `node` exists and is up.
    pub fn is_up(&self, node: i32) -> bool {
        self.nodes.contains(&node) && !self.down.contains(&node)
    }

    /// The group coordinator of `group_id`: the leader of its `__consumer_offsets` partition
    /// (-1 while that partition is offline).
    pub fn group_coordinator(&self, group_id: &str) -> i32 {
        let p = partition_for(group_id, self.consumer_offsets.len() as i32);
        self.consumer_offsets[p as usize].leader
    }

    /// The transaction coordinator of `transactional_id`: the leader of its
    /// `__transaction_state` partition (-1 while that partition is offline).
    pub fn transaction_coordinator(&self, transactional_id: &str) -> i32 {
        let p = partition_for(transactional_id, self.transaction_state.len() as i32);
        self.transaction_state[p as usize].leader
    }

    /// Runs the group timers ([`super::groups::Groups::tick`]) of the groups whose coordinator
    /// is up.
    pub fn tick_groups(&mut self, now: Instant) {
        let Self {
            groups,
            consumer_offsets,
            ..
        } = self;
        let partitions = consumer_offsets.len() as i32;
        groups.tick(now, |g| {
            consumer_offsets[partition_for(g, partitions) as usize].leader != -1
        });
    }

    /// Takes broker `node` down: it leaves every ISR, and each partition it led goes to its
    /// first other in-sync replica, or offline when it was the last. The caller closes the
    /// broker's connections.
    ///
    /// # Errors
    /// A sentence when the broker does not exist or is already down.
    pub fn broker_down(&mut self, node: i32, now: Instant) -> Result<Vec<LeaderChange>, String> {
        self.known(node)?;
        if !self.down.insert(node) {
            return Err(format!("broker {node} is already down"));
        }
        Ok(self.elect(now, |_, _, p| {
            (p.leader == node).then(|| p.isr.iter().copied().find(|&r| r != node).unwrap_or(-1))
        }))
    }

    /// Brings broker `node` back: it rejoins the ISR of every partition with a leader, leads
    /// again the partitions whose preferred replica it is, and brings back the offline
    /// partitions whose last in-sync replica it was.
    ///
    /// # Errors
    /// A sentence when the broker does not exist or is not down.
    pub fn broker_up(&mut self, node: i32, now: Instant) -> Result<Vec<LeaderChange>, String> {
        self.check_down(node)?;
        self.down.remove(&node);
        Ok(self.elect(now, |_, _, p| {
            let preferred = p.leader != -1 && p.replicas.first() == Some(&node) && p.leader != node;
            let last_in_sync = p.leader == -1 && p.isr == [node];
            (preferred || last_in_sync).then_some(node)
        }))
    }

    /// Makes broker `node` the leader of `topic`/`partition` (a preferred-replica election
    /// towards `node`); nothing changes when it already leads.
    ///
    /// # Errors
    /// A sentence when the partition or broker does not exist, the broker is down, or it
    /// holds no replica of the partition (Kafka elects only replicas).
    pub fn move_leader(
        &mut self,
        topic: &str,
        partition: i32,
        node: i32,
        now: Instant,
    ) -> Result<Vec<LeaderChange>, String> {
        let found = self
            .topics
            .get(topic)
            .and_then(|t| t.partition(partition))
            .ok_or_else(|| format!("partition {topic}-{partition} does not exist"))?;
        self.check_target(found, &format!("{topic}-{partition}"), node)?;
        Ok(self.elect(now, |t, i, p| {
            (t == topic && i == partition && p.leader != node).then_some(node)
        }))
    }

    /// Moves the coordinator of `group_id` to broker `node` by electing `node` leader of the
    /// group's `__consumer_offsets` partition; every group on that partition moves with it, as
    /// in Kafka. Nothing changes when `node` already coordinates the group.
    ///
    /// # Errors
    /// As [`Self::move_leader`].
    pub fn move_coordinator(
        &mut self,
        group_id: &str,
        node: i32,
        now: Instant,
    ) -> Result<Vec<LeaderChange>, String> {
        let index = partition_for(group_id, self.consumer_offsets.len() as i32);
        let found = &self.consumer_offsets[index as usize];
        self.check_target(found, &format!("{CONSUMER_OFFSETS}-{index}"), node)?;
        Ok(self.elect(now, |t, i, p| {
            (t == CONSUMER_OFFSETS && i == index && p.leader != node).then_some(node)
        }))
    }

    /// Moves the transaction coordinator of `transactional_id` to broker `node` by electing
    /// `node` leader of the id's `__transaction_state` partition (Kafka's hash of the id over
    /// its 50 partitions); every transactional id on that partition moves with it, as in
    /// Kafka. Nothing changes when `node` already coordinates the id.
    ///
    /// # Errors
    /// As [`Self::move_leader`].
    pub fn move_transaction_coordinator(
        &mut self,
        transactional_id: &str,
        node: i32,
        now: Instant,
    ) -> Result<Vec<LeaderChange>, String> {
        let index = partition_for(transactional_id, self.transaction_state.len() as i32);
        let found = &self.transaction_state[index as usize];
        self.check_target(found, &format!("{TRANSACTION_STATE}-{index}"), node)?;
        Ok(self.elect(now, |t, i, p| {
            (t == TRANSACTION_STATE && i == index && p.leader != node).then_some(node)
        }))
    }

    /// Checks that broker `node` exists and is down (so it can be brought up).
    ///
    /// # Errors
    /// A sentence saying which is not so.
    pub fn check_down(&self, node: i32) -> Result<(), String> {
        self.known(node)?;
        if !self.down.contains(&node) {
            return Err(format!("broker {node} is not down"));
        }
        Ok(())
    }

    fn known(&self, node: i32) -> Result<(), String> {
        if self.nodes.contains(&node) {
            Ok(())
        } else {
            Err(format!(
                "broker {node} does not exist (brokers: {:?})",
                self.nodes
            ))
        }
    }

    fn check_target(&self, p: &Partition, name: &str, node: i32) -> Result<(), String> {
        self.known(node)?;
        if self.down.contains(&node) {
            return Err(format!("broker {node} is down"));
        }
        if !p.replicas.contains(&node) {
            return Err(format!(
                "broker {node} holds no replica of {name} (replicas: {:?})",
                p.replicas
            ));
        }
        if !p.isr.contains(&node) {
            return Err(format!(
                "broker {node}'s replica of {name} is not in sync (ISR: {:?}); Kafka elects no \
                 such replica with unclean leader election off",
                p.isr
            ));
        }
        Ok(())
    }

    /// Gives every partition for which `choose(topic, index, partition)` names a leader that
    /// leader, bumping its epoch; brings every ISR up to date ([`sync_isr`]); then tells the
    /// groups whose coordinator changed.
    fn elect(
        &mut self,
        now: Instant,
        choose: impl Fn(&str, i32, &Partition) -> Option<i32>,
    ) -> Vec<LeaderChange> {
        let mut changes = Vec::new();
        let down = &self.down;
        let mut elect = |topic: &str, partitions: &mut [Partition]| {
            for (index, p) in partitions.iter_mut().enumerate() {
                if let Some(to) = choose(topic, index as i32, p) {
                    let from = p.leader;
                    p.set_leader(to);
                    changes.push(LeaderChange {
                        topic: topic.to_owned(),
                        partition: index as i32,
                        from,
                        to,
                        leader_epoch: p.leader_epoch,
                    });
                }
                sync_isr(p, down);
            }
        };
        for (name, topic) in &mut self.topics {
            elect(name, &mut topic.partitions);
        }
        elect(CONSUMER_OFFSETS, &mut self.consumer_offsets);
        elect(TRANSACTION_STATE, &mut self.transaction_state);
        let moved: Vec<i32> = changes
            .iter()
            .filter(|c| c.topic == CONSUMER_OFFSETS)
            .map(|c| c.partition)
            .collect();
        if !moved.is_empty() {
            let partitions = self.consumer_offsets.len() as i32;
            self.groups
                .coordinator_moved(|g| moved.contains(&partition_for(g, partitions)), now);
        }
        for c in &changes {
            tracing::debug!(
                topic = c.topic,
                partition = c.partition,
                from = c.from,
                to = c.to,
                leader_epoch = c.leader_epoch,
                "leader changed"
            );
        }
        changes
    }
}

/// A partition with a leader has every replica on a live broker in sync (followers catch up
/// at once); an offline one keeps the last replica that was in sync.
fn sync_isr(p: &mut Partition, down: &std::collections::BTreeSet<i32>) {
    if p.leader != -1 {
        p.isr = p
            .replicas
            .iter()
            .copied()
            .filter(|r| !down.contains(r))
            .collect();
    }
}
