//! Cluster operations on a schedule: a scenario's `operations:`, run while the cluster serves.
//!
//! ```yaml
//! operations:
//!   - at: 500ms          # when, after the schedule starts
//!     every: 1s          # optional: again every second until the cluster stops
//!     broker_down: 1     # exactly one of: broker_down, broker_up (a node id),
//!                        #   move_leader: { topic, partition, broker },
//!                        #   move_coordinator: { group, broker },
//!                        #   move_transaction_coordinator: { transactional_id, broker }
//!   - { at: 800ms, every: 1s, broker_up: 1 }
//! ```
//!
//! Operations run one at a time in time order (ties in file order), each as the
//! [`Cluster`] method of the same name; an operation the cluster refuses at that moment (a
//! broker already down, say) is logged and skipped, and the schedule goes on.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::error::Error;

/// One scheduled cluster operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationSpec {
    /// When, after the schedule starts.
    #[serde(with = "humantime_serde_required")]
    pub at: Duration,
    /// Repeat period; `None` runs it once.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_optional"
    )]
    pub every: Option<Duration>,
    /// Take this broker down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_down: Option<i32>,
    /// Bring this broker back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_up: Option<i32>,
    /// Move a partition's leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_leader: Option<MoveLeader>,
    /// Move a group's coordinator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_coordinator: Option<MoveCoordinator>,
    /// Move a transactional id's transaction coordinator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_transaction_coordinator: Option<MoveTransactionCoordinator>,
}

/// Where to move a partition's leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveLeader {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The new leader's node id.
    pub broker: i32,
}

/// Where to move a group's coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveCoordinator {
    /// Group id.
    pub group: String,
    /// The new coordinator's node id.
    pub broker: i32,
}

/// Where to move a transactional id's transaction coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveTransactionCoordinator {
    /// Transactional id.
    pub transactional_id: String,
    /// The new coordinator's node id.
    pub broker: i32,
}

impl OperationSpec {
    /// Checks that exactly one operation is given and a repeat period is not zero.
    ///
    /// # Errors
    /// A sentence saying what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let given = [
            self.broker_down.is_some(),
            self.broker_up.is_some(),
            self.move_leader.is_some(),
            self.move_coordinator.is_some(),
            self.move_transaction_coordinator.is_some(),
        ]
        .iter()
        .filter(|&&g| g)
        .count();
        match given {
            0 => Err(
                "no operation: give one of broker_down, broker_up, move_leader, move_coordinator, move_transaction_coordinator"
                    .into(),
            ),
            1 if self.every == Some(Duration::ZERO) => {
                Err("every: 0s would repeat forever at once".into())
            }
            1 => Ok(()),
            _ => Err("more than one operation: give exactly one per item".into()),
        }
    }

    /// Runs the operation on `cluster`.
    async fn run(&self, cluster: &Cluster) -> Result<(), Error> {
        if let Some(node) = self.broker_down {
            cluster.broker_down(node).await
        } else if let Some(node) = self.broker_up {
            cluster.broker_up(node).await
        } else if let Some(m) = &self.move_leader {
            cluster.move_leader(&m.topic, m.partition, m.broker)
        } else if let Some(m) = &self.move_coordinator {
            cluster.move_coordinator(&m.group, m.broker)
        } else if let Some(m) = &self.move_transaction_coordinator {
            cluster.move_transaction_coordinator(&m.transactional_id, m.broker)
        } else {
            Ok(())
        }
    }
}

/// Runs `operations` on `cluster` from now, in time order (ties in list order), until every
/// one-off operation has run and, when some repeat, forever: spawn it, and drop or abort the
/// task to stop. Refused operations are logged (`tracing` warn) and skipped.
pub async fn run(cluster: Cluster, operations: Vec<OperationSpec>) {
    let start = tokio::time::Instant::now();
    let mut due: BinaryHeap<Reverse<(Duration, usize)>> = operations
        .iter()
        .enumerate()
        .map(|(i, op)| Reverse((op.at, i)))
        .collect();
    while let Some(Reverse((at, i))) = due.pop() {
        tokio::time::sleep_until(start + at).await;
        let op = &operations[i];
        match op.run(&cluster).await {
            Ok(()) => tracing::debug!(operation = i + 1, "scheduled operation done"),
            Err(e) => tracing::warn!(operation = i + 1, "scheduled operation skipped: {e}"),
        }
        if let Some(every) = op.every {
            due.push(Reverse((at + every, i)));
        }
    }
}

mod humantime_serde_required {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// `500ms`, `1s 500ms`: as read.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "bad duration {text:?} ({e}); write e.g. 500ms or 2s"
            ))
        })
    }
}

mod humantime_serde_optional {
    use std::time::Duration;

    use serde::{Deserializer, Serializer};

    /// Only called for `Some` (the field skips `None`).
    #[allow(clippy::ref_option)]
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::humantime_serde_required::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        super::humantime_serde_required::deserialize(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(yaml: &str) -> Vec<OperationSpec> {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn exactly_one_operation_per_item() {
        let none = ops("- { at: 1s }");
        assert!(none[0].validate().unwrap_err().contains("no operation"));
        let two = ops("- { at: 1s, broker_down: 1, broker_up: 1 }");
        assert!(two[0].validate().unwrap_err().contains("more than one"));
        let zero = ops("- { at: 1s, every: 0s, broker_down: 1 }");
        assert!(zero[0].validate().unwrap_err().contains("forever"));
        let moved = ops("- { at: 1s, move_leader: { topic: t, partition: 0, broker: 2 } }");
        assert!(moved[0].validate().is_ok());
    }

    #[test]
    fn a_bad_duration_or_field_is_named() {
        let bad = serde_yaml::from_str::<Vec<OperationSpec>>("- { at: soon, broker_down: 1 }");
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("bad duration \"soon\""));
        let typo = serde_yaml::from_str::<Vec<OperationSpec>>("- { at: 1s, broker_dwn: 1 }");
        assert!(typo.unwrap_err().to_string().contains("broker_dwn"));
    }

    #[tokio::test(start_paused = true)]
    async fn operations_run_in_time_order_and_repeat() {
        let cluster = Cluster::builder().brokers(2).start().await.unwrap();
        let schedule = ops("- { at: 300ms, every: 1s, broker_up: 2 }\n\
             - { at: 100ms, every: 1s, broker_down: 2 }\n\
             - { at: 150ms, broker_down: 2 }\n");
        let task = tokio::spawn(run(cluster.clone(), schedule));
        tokio::time::sleep(Duration::from_millis(2_200)).await;
        task.abort();
        let done: Vec<String> = cluster
            .journal()
            .entries()
            .iter()
            .filter_map(|e| e.operation.as_ref())
            .map(|op| {
                format!("{op:?}")
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        // Down at 100, 1100 and 2100 ms, up at 300 and 1300 ms (2300 is past the end); the
        // one-off broker_down at 150 ms is refused (already down) and skipped.
        assert_eq!(
            done,
            [
                "BrokerDown",
                "BrokerUp",
                "BrokerDown",
                "BrokerUp",
                "BrokerDown"
            ]
        );
        cluster.shutdown().await;
    }
}
