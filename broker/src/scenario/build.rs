//! From a parsed scenario to what runs: the cluster builder, the fault rules and the checks.

use super::Scenario;
use crate::check::{self, Checks};
use crate::cluster::{ClusterBuilder, TransactionVersion};
use crate::error::Error;
use crate::faults::Rule;

impl Scenario {
    /// A cluster builder with the scenario's shape (unset fields keep the builder's defaults,
    /// but the port defaults to 9092 as for `kmock serve`).
    ///
    /// # Errors
    /// [`Error::Config`] for a bad `kafka_version` or `brokers: 0`; with `upstream:`, for a
    /// field of the fake's shape or state (the upstream cluster has its own) or an operation
    /// only a fake can do.
    pub fn builder(&self) -> Result<ClusterBuilder, Error> {
        let mut b = crate::Cluster::builder().port(self.port.unwrap_or(9092));
        if let Some(upstream) = &self.upstream {
            self.check_proxy()?;
            b = b.upstream(upstream);
        }
        match self.brokers {
            Some(0) => return Err(Error::Config("brokers must be at least 1".into())),
            Some(n) => b = b.brokers(n),
            None => {}
        }
        if let Some(n) = self.replication_factor {
            b = b.replication_factor(n);
        }
        if let Some(host) = self.host {
            b = b.host(host);
        }
        if let Some(seed) = self.seed {
            b = b.seed(seed);
        }
        if let Some(v) = &self.kafka_version {
            b = b.kafka_version(v.parse()?);
        }
        if let Some(v) = self.transaction_version {
            b = b.transaction_version(TransactionVersion::from_level(v)?);
        }
        if let Some(on) = self.auto_create_topics {
            b = b.auto_create_topics(on);
        }
        if let Some(n) = self.default_partitions {
            b = b.default_partitions(n);
        }
        if let Some(n) = self.journal_capacity {
            b = b.journal_capacity(n);
        }
        if let Some(idle) = self.connections_max_idle {
            b = b.connections_max_idle(idle);
        }
        if let Some(max) = self.max_connections {
            b = b.max_connections(Some(max));
        }
        if let Some(load) = self.coordinator_load {
            b = b.coordinator_load(load);
        }
        if let Some(n) = self.journal_max_bytes {
            b = b.journal_max_bytes(n);
        }
        for t in &self.topics {
            b = b.topic(&t.name, t.partitions);
        }
        Ok(b)
    }

    /// With `upstream:`, refuses what only a fake has: its shape and state fields, and
    /// operations other than taking a broker's listener down and up.
    fn check_proxy(&self) -> Result<(), Error> {
        let fake_only = [
            ("brokers", self.brokers.is_some()),
            ("topics", !self.topics.is_empty()),
            ("kafka_version", self.kafka_version.is_some()),
            ("transaction_version", self.transaction_version.is_some()),
            ("auto_create_topics", self.auto_create_topics.is_some()),
            ("default_partitions", self.default_partitions.is_some()),
            ("replication_factor", self.replication_factor.is_some()),
            (
                "operations: move_leader",
                self.operations.iter().any(|o| o.move_leader.is_some()),
            ),
            (
                "operations: move_coordinator",
                self.operations.iter().any(|o| o.move_coordinator.is_some()),
            ),
            (
                "operations: move_transaction_coordinator",
                self.operations
                    .iter()
                    .any(|o| o.move_transaction_coordinator.is_some()),
            ),
        ];
        match fake_only.iter().find(|(_, set)| *set) {
            Some((field, _)) => Err(Error::Config(format!(
                "`{field}` is the fake's: with `upstream:` the upstream Kafka cluster decides it"
            ))),
            None => Ok(()),
        }
    }

    /// The rules, built, with `after` and `until` measured from the cluster's start
    /// ([`Rule::from_cluster_start`]).
    ///
    /// # Errors
    /// [`Error::Config`] naming the rule (by name or position) and what is wrong with it.
    pub fn rules(&self) -> Result<Vec<Rule>, Error> {
        self.rules
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                spec.build().map(Rule::from_cluster_start).map_err(|e| {
                    let which = spec.name.clone().unwrap_or_else(|| format!("#{}", i + 1));
                    Error::Config(format!("rule {which}: {e}"))
                })
            })
            .collect()
    }

    /// The checks to run at the end (none when the list is empty; `all` for every one).
    ///
    /// # Errors
    /// [`Error::Config`] for an unknown check name.
    pub fn checks(&self) -> Result<Option<Checks>, Error> {
        match self.checks.as_slice() {
            [] => Ok(None),
            names => {
                let mut checks = Checks::named(names).map_err(Error::Config)?;
                if let Some(n) = self.stuck_after {
                    checks = checks.stuck_after(n);
                }
                if let Some(window) = self.stuck_for {
                    checks = checks.stuck_for(window);
                }
                Ok(Some(checks))
            }
        }
    }
}

/// The checks a scenario asks for, run on a finished cluster: the report, and whether every
/// rule expectation held.
pub fn finish(
    cluster: &crate::Cluster,
    checks: Option<&Checks>,
) -> (Option<check::Report>, Result<(), Error>) {
    (checks.map(|c| cluster.check(c)), cluster.verify())
}
