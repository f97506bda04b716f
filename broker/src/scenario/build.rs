//! From a parsed scenario to what runs: the cluster builder, the fault rules and the checks.

use std::time::Duration;

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
        if let Some(n) = self.max_stored_bytes {
            b = b.max_stored_bytes(n);
        }
        if let Some(interval) = self.retention_check_interval {
            b = b.retention_check_interval(interval);
        }
        if let Some(g) = &self.consumer_groups {
            b = g.apply(b)?;
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
            ("max_stored_bytes", self.max_stored_bytes.is_some()),
            (
                "retention_check_interval",
                self.retention_check_interval.is_some(),
            ),
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

impl super::ConsumerGroupsSpec {
    /// These settings, each replaced by `other`'s where `other` sets it (`kmock serve`'s
    /// flags over a scenario's section).
    pub fn overridden_by(&self, other: &Self) -> Self {
        Self {
            session_timeout: other.session_timeout.or(self.session_timeout),
            heartbeat_interval: other.heartbeat_interval.or(self.heartbeat_interval),
            assignment_interval: other.assignment_interval.or(self.assignment_interval),
            max_size: other.max_size.or(self.max_size),
            assignors: other.assignors.clone().or_else(|| self.assignors.clone()),
            migration_policy: other.migration_policy.or(self.migration_policy),
        }
    }

    /// `b` with these settings.
    ///
    /// # Errors
    /// [`Error::Config`] for a zero session timeout or heartbeat interval, a heartbeat interval
    /// not below the session timeout (Kafka refuses both at start-up), `max_size: 0`, or bad
    /// assignors.
    pub fn apply(&self, mut b: ClusterBuilder) -> Result<ClusterBuilder, Error> {
        let bad = |m: &str| Err(Error::Config(format!("consumer_groups: {m}")));
        if self.session_timeout.is_some_and(|d| d.is_zero()) {
            return bad("session_timeout must be above zero");
        }
        if self.heartbeat_interval.is_some_and(|d| d.is_zero()) {
            return bad("heartbeat_interval must be above zero");
        }
        let session = self.session_timeout.unwrap_or(Duration::from_secs(45));
        if self.heartbeat_interval.unwrap_or(Duration::from_secs(5)) >= session {
            return bad("heartbeat_interval must be below session_timeout");
        }
        if self.max_size == Some(0) {
            return bad("max_size must be at least 1");
        }
        if let Some(d) = self.session_timeout {
            b = b.consumer_group_session_timeout(d);
        }
        if let Some(d) = self.heartbeat_interval {
            b = b.consumer_group_heartbeat_interval(d);
        }
        if let Some(d) = self.assignment_interval {
            b = b.consumer_group_assignment_interval(d);
        }
        if let Some(n) = self.max_size {
            b = b.consumer_group_max_size(n);
        }
        if let Some(names) = &self.assignors {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            b = b.consumer_group_assignors(&names)?;
        }
        if let Some(p) = self.migration_policy {
            b = b.group_consumer_migration_policy(p);
        }
        Ok(b)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_group_settings_reach_the_cluster_config() {
        let s = Scenario::parse(
            "consumer_groups:\n  session_timeout: 10s\n  heartbeat_interval: 500ms\n  \
             assignment_interval: 0s\n  max_size: 3\n  assignors: [range, uniform]\n",
        )
        .unwrap();
        let c = s.builder().unwrap().config.consumer_groups;
        assert_eq!(
            (
                c.session_timeout,
                c.heartbeat_interval,
                c.assignment_interval,
                c.max_size,
                c.assignors
            ),
            (
                Duration::from_secs(10),
                Duration::from_millis(500),
                Duration::ZERO,
                3,
                &["range", "uniform"][..]
            )
        );
        let defaults = Scenario::parse("brokers: 1\n").unwrap().builder().unwrap();
        assert_eq!(
            defaults.config.consumer_groups.assignors,
            &["uniform", "range"][..]
        );
        assert_eq!(
            defaults.config.consumer_groups.migration_policy,
            crate::MigrationPolicy::Bidirectional
        );
        let s = Scenario::parse("consumer_groups:\n  migration_policy: downgrade\n").unwrap();
        assert_eq!(
            s.builder().unwrap().config.consumer_groups.migration_policy,
            crate::MigrationPolicy::Downgrade
        );
        assert!(Scenario::parse("consumer_groups:\n  migration_policy: sideways\n").is_err());
    }

    #[test]
    fn consumer_group_settings_kafka_would_refuse_are_refused() {
        for (yaml, says) in [
            ("session_timeout: 0s", "session_timeout must be above zero"),
            (
                "heartbeat_interval: 45s",
                "heartbeat_interval must be below session_timeout",
            ),
            ("max_size: 0", "max_size must be at least 1"),
            ("assignors: [sticky]", "name uniform and/or range"),
            ("assignors: [range, range]", "name uniform and/or range"),
        ] {
            let s = Scenario::parse(&format!("consumer_groups:\n  {yaml}\n")).unwrap();
            let err = s.builder().err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(says), "{yaml}: {err}");
        }
    }
}
