//! Topics, their partitions, leaders and configs.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::batch::ValidBatch;
use super::log::{Appended, PartitionLog};
use super::producer_state::{ProducerStates, Verdict, WithoutState};
use super::segments::StoredTotal;
use super::topic_configs::{effective, ParsedConfigs};
pub use super::topic_configs::{validate_configs, INTERNAL_SEGMENT_BYTES, TOPIC_CONFIG_DEFAULTS};

/// What one retention check deleted from a partition's log ([`Partition::delete_old_segments`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted {
    /// The log start offset after the deletion.
    pub log_start_offset: i64,
    /// Whether the log start offset moved; it does not when the segments deleted lay wholly
    /// below the log start offset a DeleteRecords had set.
    pub moved: bool,
    /// Bytes of record batches deleted.
    pub bytes: u64,
}

/// One partition: its replicas, leader, leader epoch history and log.
#[derive(Debug)]
pub struct Partition {
    /// Node ids of the brokers holding a replica, the preferred leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas, in replica order: every replica on a live broker while the
    /// partition has a leader (followers catch up at once); while it is offline, the last one
    /// that was in sync, whose return it waits for ([`super::failover`]).
    pub isr: Vec<i32>,
    /// Node id of the leader broker; -1 while every replica's broker is down (offline).
    pub leader: i32,
    /// Current leader epoch (0 at creation, bumped on every leader change).
    pub leader_epoch: i32,
    /// `(leader epoch, start offset)` of every epoch, oldest first.
    pub epoch_starts: Vec<(i32, i64)>,
    /// The records.
    pub log: PartitionLog,
    /// Idempotent producers' sequence state.
    pub producers: ProducerStates,
}

impl Partition {
    /// A new partition on `replicas`, led by the first.
    pub fn new(replicas: Vec<i32>) -> Self {
        Self {
            leader: replicas.first().copied().unwrap_or(-1),
            isr: replicas.clone(),
            replicas,
            leader_epoch: 0,
            epoch_starts: vec![(0, 0)],
            log: PartitionLog::default(),
            producers: ProducerStates::default(),
        }
    }

    /// Appends a validated batch after Kafka's producer state checks
    /// ([`super::producer_state`]); a duplicate is not appended and answers with where the
    /// original went. With `max_stored_bytes`, a batch that would take the cluster's stored
    /// bytes past it is not appended either. `now_ms` is the wall clock (ms since the Unix
    /// epoch) the Produce request read once, which the segment roll goes by (as does the
    /// `retention.bytes` check the Produce handler runs after the append,
    /// [`Self::delete_old_segments`]).
    ///
    /// # Errors
    /// The Kafka error and the rule broken, when the producer state refuses the batch;
    /// KAFKA_STORAGE_ERROR past `max_stored_bytes` (what Kafka answers when the log directory
    /// cannot be written, e.g. a full disk, where the append fails after the producer state
    /// checks).
    pub fn append(
        &mut self,
        batch: ValidBatch,
        log_append_time_ms: Option<i64>,
        without_state: WithoutState,
        max_stored_bytes: Option<u64>,
        now_ms: i64,
    ) -> Result<Appended, (ResponseError, String)> {
        let info = batch.info;
        match self.producers.check(&info, without_state) {
            Verdict::Append => {
                if let Some(cap) = max_stored_bytes {
                    let stored = self.log.stored_total();
                    if stored.saturating_add(batch.size() as u64) > cap {
                        return Err((
                            ResponseError::KafkaStorageError,
                            format!(
                                "kmock's cap on stored bytes is reached: {stored} bytes are stored, the cap is {cap} (max_stored_bytes), and this batch is {} bytes",
                                batch.size()
                            ),
                        ));
                    }
                }
                let appended =
                    self.log
                        .append(batch, self.leader_epoch, log_append_time_ms, now_ms);
                self.producers
                    .record(&info, appended.base_offset, appended.log_append_time_ms);
                Ok(appended)
            }
            Verdict::Duplicate {
                base_offset,
                log_append_time_ms,
            } => {
                tracing::debug!(
                    producer_id = info.producer_id,
                    producer_epoch = info.producer_epoch,
                    base_sequence = info.base_sequence,
                    base_offset,
                    "duplicate batch: not appended, answered with the original offset"
                );
                Ok(Appended {
                    base_offset,
                    log_append_time_ms,
                })
            }
            Verdict::Reject { error, reason } => {
                tracing::debug!(
                    producer_id = info.producer_id,
                    producer_epoch = info.producer_epoch,
                    base_sequence = info.base_sequence,
                    "batch refused with {error:?}: {reason}"
                );
                Err((error, reason))
            }
        }
    }

    /// Makes `leader` (-1: none) the leader, bumping the leader epoch as Kafka's controller
    /// does on every leader change; the new epoch starts at the log end offset.
    pub fn set_leader(&mut self, leader: i32) {
        self.leader = leader;
        self.leader_epoch += 1;
        self.epoch_starts
            .push((self.leader_epoch, self.log.log_end_offset()));
    }

    /// Deletes the records before `offset` (DeleteRecords; -1 means the high watermark), as
    /// Kafka's `Partition.deleteRecordsOnLeader`: the log start offset moves up to it (never
    /// down), and the leader epoch history forgets what starts below it (the last epoch
    /// starting at or below the new log start offset now starts there, as Kafka's
    /// `LeaderEpochFileCache.truncateFromStart`). Returns the log start offset after it (the
    /// answer's low watermark). The caller checks leadership first.
    ///
    /// # Errors
    /// OFFSET_OUT_OF_RANGE for an offset below -1 or past the high watermark.
    pub fn delete_records(&mut self, offset: i64) -> Result<i64, ResponseError> {
        let offset = if offset == -1 {
            self.log.high_watermark()
        } else {
            offset
        };
        if offset < 0 {
            return Err(ResponseError::OffsetOutOfRange);
        }
        if self.log.delete_records_before(offset)? {
            self.truncate_epochs_from_start();
        }
        Ok(self.log.log_start_offset())
    }

    /// Runs Kafka's retention check on this partition's log at wall-clock `now_ms`
    /// ([`PartitionLog::delete_old_segments`]; `size_only`: the `retention.bytes` pass alone),
    /// and when the log start offset moved, the leader epoch history forgets what starts below
    /// it, as after DeleteRecords. Returns whether it moved.
    ///
    /// kmock runs the `retention.bytes` pass after every append, and every pass on a timer
    /// (`ClusterBuilder::retention_check_interval`, Kafka's `log.retention.check.interval.ms`).
    /// Returns what it deleted, `None` when nothing.
    pub fn delete_old_segments(&mut self, now_ms: i64, size_only: bool) -> Option<Deleted> {
        let size = self.log.size();
        let moved = self.log.delete_old_segments(now_ms, size_only).is_some();
        if moved {
            self.truncate_epochs_from_start();
        }
        let bytes = size - self.log.size();
        (moved || bytes > 0).then(|| Deleted {
            log_start_offset: self.log.log_start_offset(),
            moved,
            bytes,
        })
    }

    /// The leader epoch history forgets what starts below the log start offset: the last
    /// epoch starting at or below it now starts there (`LeaderEpochFileCache
    /// .truncateFromStart`).
    fn truncate_epochs_from_start(&mut self) {
        let start = self.log.log_start_offset();
        let below = self.epoch_starts.partition_point(|(_, s)| *s <= start);
        if below > 0 {
            let (epoch, _) = self.epoch_starts[below - 1];
            self.epoch_starts.drain(..below);
            self.epoch_starts.insert(0, (epoch, start));
        }
    }

    /// Checks that broker `node` may answer for this partition as its leader, in Kafka's order
    /// (`ReplicaManager.getPartitionOrException`, then `Partition.getLocalLog`): a broker
    /// holding no replica answers NOT_LEADER_OR_FOLLOWER; one holding a replica first checks
    /// the client's `current_leader_epoch` ([`Self::check_leader_epoch`]), then that it leads.
    ///
    /// # Errors
    /// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH.
    pub fn check_leader(&self, node: i32, current_leader_epoch: i32) -> Result<(), ResponseError> {
        if !self.replicas.contains(&node) {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        self.check_leader_epoch(current_leader_epoch)?;
        if self.leader != node {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        Ok(())
    }

    /// Checks a client's `current_leader_epoch` against this partition's, as Kafka's
    /// `Partition.checkCurrentLeaderEpoch`: -1 skips the check.
    ///
    /// # Errors
    /// FENCED_LEADER_EPOCH for an older epoch, UNKNOWN_LEADER_EPOCH for a newer one.
    pub fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<(), ResponseError> {
        match current_leader_epoch {
            -1 => Ok(()),
            e if e < self.leader_epoch => Err(ResponseError::FencedLeaderEpoch),
            e if e > self.leader_epoch => Err(ResponseError::UnknownLeaderEpoch),
            _ => Ok(()),
        }
    }

    /// The end offset of `leader_epoch` (OffsetForLeaderEpoch), as Kafka's
    /// `LeaderEpochFileCache.endOffsetFor`: the current epoch ends at the log end offset; an
    /// older one where the next epoch starts, answered with the largest known epoch not above
    /// it (or the asked epoch itself when it is older than every known one); an epoch above the
    /// current one, or -1, gets `(-1, -1)`.
    pub fn end_offset_for(&self, leader_epoch: i32) -> (i32, i64) {
        if leader_epoch == -1 {
            return (-1, -1);
        }
        if leader_epoch == self.leader_epoch {
            return (leader_epoch, self.log.log_end_offset());
        }
        let Some(&(_, next_start)) = self.epoch_starts.iter().find(|(e, _)| *e > leader_epoch)
        else {
            return (-1, -1);
        };
        let floor = self
            .epoch_starts
            .iter()
            .rev()
            .find(|(e, _)| *e <= leader_epoch);
        (floor.map_or(leader_epoch, |&(e, _)| e), next_start)
    }
}

/// A topic.
#[derive(Debug)]
pub struct Topic {
    /// Topic name.
    pub name: String,
    /// Topic id (KIP-516), new for every creation of the name.
    pub id: Uuid,
    /// Replicas per partition.
    pub replication_factor: usize,
    /// Partitions, indexed by partition number.
    pub partitions: Vec<Partition>,
    /// Config overrides (of [`TOPIC_CONFIG_DEFAULTS`]), as strings.
    configs: BTreeMap<String, String>,
    /// What Produce reads of them, parsed once when they are set.
    parsed: ParsedConfigs,
    /// The cluster's total of stored bytes, which every partition's log counts in.
    stored: StoredTotal,
}

impl Topic {
    /// A topic with `partitions` partitions of `replication_factor` replicas each, placed on
    /// `nodes` by [`replicas_for`], their logs counting their bytes in `stored`.
    pub fn new(
        name: &str,
        id: Uuid,
        partitions: i32,
        replication_factor: usize,
        nodes: &[i32],
        configs: BTreeMap<String, String>,
        stored: StoredTotal,
    ) -> Self {
        let mut topic = Self {
            name: name.to_owned(),
            id,
            replication_factor,
            partitions: Vec::new(),
            parsed: ParsedConfigs::parse(&configs),
            configs,
            stored,
        };
        topic.add_partitions(partitions, nodes);
        topic
    }

    /// Grows the topic to `count` partitions, placed on `nodes` (the live brokers) as
    /// [`replicas_for`] continues from the last partition.
    pub fn add_partitions(&mut self, count: i32, nodes: &[i32]) {
        for p in self.partitions.len()..count.max(0) as usize {
            let replicas = replicas_for(p, self.replication_factor, nodes);
            let mut partition = Partition::new(replicas);
            partition.log = PartitionLog::new(self.stored.clone(), self.parsed.log_policy);
            self.partitions.push(partition);
        }
    }

    /// The topic's config overrides (of [`TOPIC_CONFIG_DEFAULTS`]), as strings: set at
    /// creation, changed by AlterConfigs and IncrementalAlterConfigs.
    pub fn configs(&self) -> &BTreeMap<String, String> {
        &self.configs
    }

    /// Replaces the topic's config overrides (checked by [`validate_configs`] first); what
    /// Produce reads of them takes effect from the next request.
    pub fn set_configs(&mut self, configs: BTreeMap<String, String>) {
        self.parsed = ParsedConfigs::parse(&configs);
        self.configs = configs;
        for partition in &mut self.partitions {
            partition.log.set_policy(self.parsed.log_policy);
        }
    }

    /// The effective value of a config: the override, else Kafka's default.
    pub fn config(&self, name: &str) -> Option<&str> {
        effective(&self.configs, name)
    }

    /// `max.message.bytes`: the largest record batch accepted.
    pub fn max_message_bytes(&self) -> usize {
        self.parsed.max_message_bytes
    }

    /// `min.insync.replicas`.
    pub fn min_insync_replicas(&self) -> i64 {
        self.parsed.min_insync_replicas
    }

    /// Whether `cleanup.policy` includes `compact` (every record then needs a key).
    pub fn compacted(&self) -> bool {
        self.parsed.compacted
    }

    /// Whether `cleanup.policy` includes `delete` (DeleteRecords is refused otherwise).
    pub fn deletes(&self) -> bool {
        self.parsed.deletes
    }

    /// Whether the broker stamps batches with LogAppendTime.
    pub fn log_append_time(&self) -> bool {
        self.parsed.log_append_time
    }

    /// How far before and after the broker's clock, in ms, a CreateTime record's timestamp may
    /// be (`message.timestamp.before.max.ms`, `message.timestamp.after.max.ms`, Kafka 3.6+,
    /// KIP-937; before unbounded and after one hour by default, as Kafka 4.4).
    pub fn timestamp_bounds_ms(&self) -> (i64, i64) {
        self.parsed.timestamp_bounds_ms
    }

    /// The partition, if it exists.
    pub fn partition(&self, index: i32) -> Option<&Partition> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }

    /// The partition, mutably, if it exists.
    pub fn partition_mut(&mut self, index: i32) -> Option<&mut Partition> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get_mut(i))
    }
}

/// The replicas of partition `p`: `replication_factor` brokers of `nodes` taken round-robin
/// from `nodes[p % nodes.len()]`, the preferred leader first, so leaders spread evenly (Kafka's
/// `AdminUtils.assignReplicasToBrokers` without its random start and rack awareness). Needs
/// `1 <= replication_factor <= nodes.len()`.
pub fn replicas_for(p: usize, replication_factor: usize, nodes: &[i32]) -> Vec<i32> {
    (0..replication_factor.min(nodes.len()))
        .map(|i| nodes[(p + i) % nodes.len()])
        .collect()
}

/// Whether `name` is one of Kafka's internal topics (`Topic.isInternal`: `__consumer_offsets`,
/// `__transaction_state`, `__share_group_state`): listed as internal in Metadata, and refused
/// to a client's Produce with INVALID_TOPIC_EXCEPTION.
pub fn is_internal(name: &str) -> bool {
    matches!(
        name,
        "__consumer_offsets" | "__transaction_state" | "__share_group_state"
    )
}

/// Checks a topic name as Kafka's `Topic.validate`: 1 to 249 characters of `[a-zA-Z0-9._-]`,
/// not `.` or `..`.
///
/// # Errors
/// A sentence saying what is wrong (answered as INVALID_TOPIC_EXCEPTION).
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name cannot be \"{name}\""));
    }
    if name.len() > 249 {
        return Err(format!(
            "topic name is {} characters, more than 249",
            name.len()
        ));
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        Some(c) => Err(format!(
            "topic name {name:?} holds {c:?}; only [a-zA-Z0-9._-] are legal"
        )),
        None => Ok(()),
    }
}
