//! YAML scenarios: a cluster's shape, its fault rules and the checks to run at the end, in one
//! file for `kmock serve --config FILE`.
//!
//! ```yaml
//! brokers: 3                # default 1
//! port: 9092                # first broker's port; 0 picks free ones (default 9092)
//! host: 127.0.0.1           # default 127.0.0.1
//! seed: 7                   # seeds `probability` rules (default 0)
//! kafka_version: "2.8"      # Kafka release to emulate, 2.4 or later (default: 4.4)
//! transaction_version: 2    # the transaction.version feature finalized, 1 or 2 (default 2)
//! auto_create_topics: true  # default true
//! default_partitions: 1     # default 1
//! replication_factor: 3     # replicas of new topics' partitions (default 3, or fewer brokers)
//! journal_capacity: 1000000 # default 1,000,000 entries
//! connections_max_idle: 10m # Kafka's connections.max.idle.ms, or off (default 10m)
//! max_connections: 1000     # Kafka's max.connections, per broker (default unlimited)
//! coordinator_load: 2s      # group and transaction coordinators answer
//!                           # COORDINATOR_LOAD_IN_PROGRESS this long after the start (default none)
//! control_token: s3cret     # kmock serve's control API requires `Authorization: Bearer s3cret`
//! journal_max_bytes: 536870912 # estimated heap bytes kept (default 512 MiB)
//! max_stored_bytes: 1073741824  # cap on record bytes stored in all partitions; past it
//!                           # Produce gets KAFKA_STORAGE_ERROR (default no cap)
//! retention_check_interval: 5m # Kafka's log.retention.check.interval.ms (default 5m,
//!                           # at least 100ms: a shorter one fails the start)
//! consumer_groups:          # KIP-848 groups (group.protocol=consumer), Kafka's broker configs
//!   session_timeout: 45s    # group.consumer.session.timeout.ms (default 45s)
//!   heartbeat_interval: 5s  # group.consumer.heartbeat.interval.ms (default 5s)
//!   assignment_interval: 1s # group.consumer.assignment.interval.ms (default 1s)
//!   max_size: 100           # group.consumer.max.size (default unlimited)
//!   assignors: [uniform, range] # group.consumer.assignors, the first the default
//!   migration_policy: bidirectional # group.consumer.migration.policy (default
//!                           # bidirectional; upgrade, downgrade, disabled)
//! topics:
//!   - { name: orders, partitions: 6 }
//! rules:
//!   - name: slow-commits    # optional
//!     api: OffsetCommit     # Kafka's API name
//!     group: billing        # matchers: versions ("3..=7"), broker, connection, client_id,
//!                           # topic, partition, group, transactional_id, producer_id
//!     every: 2              # count, at most one of: nth, first, every, probability, times ("3..")
//!     after: 1s             # optional window: in force from 1 s after the cluster started
//!     until: 2500ms         # ... until 2.5 s after it (excluded); outside it the rule
//!                           # neither matches nor counts
//!     delay: 40ms           # action, exactly one of: delay, delay_response, throttle
//!                           # (durations: 40ms, 2s), disconnect, disconnect_after_apply,
//!                           # silence (true), error (a Kafka error name: NOT_COORDINATOR)
//!     expect: "1.."         # optional: a number or a range of firings
//! checks: [offset-commit-regression]  # run when kmock serve stops; "all" for every check
//! stuck_after: 10          # stuck-client: retries without the recovery step (default 10)
//! stuck_for: 5s            # stuck-client: named only if not recovered this soon (default 5s)
//! operations:               # cluster operations while serving (crate::schedule)
//!   - { at: 500ms, every: 1s, broker_down: 1 }
//!   - { at: 800ms, every: 1s, broker_up: 1 }
//! ```
//!
//! Unknown fields are refused; a bad file fails with the file, line and column, and what is
//! wrong.

mod build;
mod rules;

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use build::finish;
pub use rules::{api_named, parse_rule, RuleSpec};

use crate::cluster::{KafkaVersion, TransactionVersion};
use crate::error::Error;

/// A scenario file. Serializes to YAML `Scenario::parse` reads back (unset fields left out):
/// `kmock hunt` writes its findings so.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Proxy mode: the bootstrap (`host:port[,host:port…]`) of the real Kafka cluster to put
    /// kmock in front of ([`crate::ClusterBuilder::upstream`]); run with `kmock proxy
    /// --config`. The fake's shape and state fields are then refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// Brokers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers: Option<usize>,
    /// First broker's port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Address to listen on and advertise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<std::net::IpAddr>,
    /// Seed of `probability` rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Kafka version whose behaviour to copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_version: Option<String>,
    /// The `transaction.version` feature finalized: 1 or 2 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_version: Option<i64>,
    /// Whether Metadata creates unknown topics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_create_topics: Option<bool>,
    /// Partitions of an auto-created topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_partitions: Option<i32>,
    /// Replicas of each partition of a new topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_factor: Option<usize>,
    /// Journal entries kept in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_capacity: Option<usize>,
    /// Kafka's `connections.max.idle.ms`: a duration, or `off` (`Some(None)`) to keep idle
    /// connections open however long.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "idle_or_off")]
    pub connections_max_idle: Option<Option<Duration>>,
    /// How long after the start the coordinators answer COORDINATOR_LOAD_IN_PROGRESS
    /// ([`crate::ClusterBuilder::coordinator_load`]), e.g. `2s`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub coordinator_load: Option<Duration>,
    /// Kafka's `max.connections`, per broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<usize>,
    /// The bearer token `kmock serve`'s control API requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_token: Option<String>,
    /// Estimated heap bytes of journal kept in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_max_bytes: Option<usize>,
    /// The cap on bytes of record batches stored in all partitions together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stored_bytes: Option<u64>,
    /// How often every partition's retention is checked; at least 100 ms (a shorter one makes
    /// the start fail, [`crate::MIN_RETENTION_CHECK_INTERVAL`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub retention_check_interval: Option<Duration>,
    /// Settings of KIP-848 consumer groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_groups: Option<ConsumerGroupsSpec>,
    /// Topics created at start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<TopicSpec>,
    /// Fault rules in force from the start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleSpec>,
    /// Checks to run when the cluster stops.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// `stuck-client`'s limit: retries without the recovery step
    /// ([`Checks::stuck_after`](crate::check::Checks::stuck_after)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck_after: Option<usize>,
    /// `stuck-client`'s window: how soon a client must recover not to be named
    /// ([`Checks::stuck_for`](crate::check::Checks::stuck_for)), e.g. `5s`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub stuck_for: Option<Duration>,
    /// Cluster operations to run while serving ([`crate::schedule`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<crate::schedule::OperationSpec>,
}

/// The KIP-848 consumer group settings of a scenario, Kafka's broker configs of the same
/// names ([`crate::ClusterBuilder::consumer_group_session_timeout`] and the others); unset ones
/// keep Kafka's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerGroupsSpec {
    /// `group.consumer.session.timeout.ms`, e.g. `45s`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub session_timeout: Option<Duration>,
    /// `group.consumer.heartbeat.interval.ms`, e.g. `5s`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub heartbeat_interval: Option<Duration>,
    /// `group.consumer.assignment.interval.ms`, e.g. `1s` (`0s`: a target on every change).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_opt"
    )]
    pub assignment_interval: Option<Duration>,
    /// `group.consumer.max.size`: members per group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<usize>,
    /// `group.consumer.assignors`: `uniform` and/or `range`, the first the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignors: Option<Vec<String>>,
    /// `group.consumer.migration.policy`: `bidirectional` (default), `upgrade`, `downgrade` or
    /// `disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_policy: Option<crate::MigrationPolicy>,
}

/// A topic of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicSpec {
    /// Name.
    pub name: String,
    /// Partitions.
    pub partitions: i32,
}

/// `connections_max_idle`: a duration other than zero (which would close every connection at
/// once), or `off`.
mod idle_or_off {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<Duration>>, D::Error> {
        let text = String::deserialize(d)?;
        if text.eq_ignore_ascii_case("off") {
            return Ok(Some(None));
        }
        match humantime::parse_duration(&text) {
            Ok(idle) if !idle.is_zero() => Ok(Some(Some(idle))),
            Ok(_) => Err(serde::de::Error::custom(
                "connections_max_idle of zero would close every connection at once; write `off` \
                 to keep idle connections open",
            )),
            Err(e) => Err(serde::de::Error::custom(format!(
                "bad connections_max_idle {text:?} ({e}); write e.g. 10m, 30s or off"
            ))),
        }
    }

    pub fn serialize<S: Serializer>(
        idle: &Option<Option<Duration>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match idle {
            Some(Some(d)) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            Some(None) => s.serialize_str("off"),
            None => s.serialize_none(),
        }
    }
}

/// Durations written as `40ms`, `2s`, `1m 30s`.
pub(crate) mod humantime_serde_opt {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map(Some).map_err(|e| {
            serde::de::Error::custom(format!(
                "bad duration {text:?} ({e}); write e.g. 40ms or 2s"
            ))
        })
    }

    /// `40ms`, `1s 500ms`: as read. Only called for `Some` (fields skip `None`).
    #[allow(clippy::ref_option)]
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_none(),
        }
    }
}

impl Scenario {
    /// Reads a scenario file.
    ///
    /// # Errors
    /// [`Error::Config`] naming the file, and the line, column and problem.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        Self::parse(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }

    /// Parses scenario YAML.
    ///
    /// # Errors
    /// A sentence with the line and column of the problem, or naming the bad rule.
    pub fn parse(text: &str) -> Result<Self, String> {
        let scenario: Self = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        if scenario.brokers == Some(0) {
            return Err("brokers must be at least 1".into());
        }
        scenario.rules().map_err(|e| e.to_string())?;
        scenario.checks().map_err(|e| e.to_string())?;
        for (i, op) in scenario.operations.iter().enumerate() {
            op.validate()
                .map_err(|e| format!("operation {} (at {:?}): {e}", i + 1, op.at))?;
        }
        if let Some(v) = &scenario.kafka_version {
            let version = v.parse::<KafkaVersion>().map_err(|e| e.to_string())?;
            version.check().map_err(|e| e.to_string())?;
        }
        if let Some(v) = scenario.transaction_version {
            TransactionVersion::from_level(v).map_err(|e| e.to_string())?;
        }
        Ok(scenario)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::Rule;
    use kafka_protocol::messages::ApiKey;
    use kafka_protocol::ResponseError;

    #[test]
    fn a_typo_in_a_field_name_is_refused_with_its_line() {
        let err =
            Scenario::parse("brokers: 3\ntopics:\n  - name: t\n    partitons: 3\n").unwrap_err();
        assert!(err.contains("partitons") && err.contains("line 4"), "{err}");
    }

    #[test]
    fn every_fixture_scenario_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/scenarios");
        let mut loaded = 0;
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                if let Err(e) = Scenario::load(&path) {
                    panic!("{e}");
                }
                loaded += 1;
            }
        }
        assert!(loaded >= 4, "only {loaded} scenarios in {}", dir.display());
    }

    #[test]
    fn a_rule_needs_exactly_one_action() {
        let none = Scenario::parse("rules:\n  - api: Produce\n").unwrap_err();
        assert!(none.contains("no action"), "{none}");
        let two = Scenario::parse("rules:\n  - api: Produce\n    silence: true\n    delay: 1s\n")
            .unwrap_err();
        assert!(two.contains("more than one action"), "{two}");
    }

    #[test]
    fn a_rule_that_could_never_fire_is_refused_naming_its_matcher_and_api() {
        for (rule, says) in [
            (
                "api: Produce\ngroup: g\nsilence: true",
                "the `group` matcher can never match Produce: Produce requests carry no group",
            ),
            (
                "api: FindCoordinator\npartition: 0\nsilence: true",
                "the `partition` matcher can never match FindCoordinator",
            ),
            (
                "api: Metadata\npartition: 0\nsilence: true",
                "Metadata requests carry no partition",
            ),
            (
                "api: DescribeGroups\ngroup: g\nsilence: true",
                "kmock does not read the group of DescribeGroups requests yet",
            ),
            (
                "api: Produce\nversions: \"0..=2\"\nsilence: true",
                "kmock implements Produce 3–13",
            ),
            (
                "api: DescribeAcls\nsilence: true",
                "kmock does not implement DescribeAcls",
            ),
            (
                "api: Metadata\ntransactional_id: t\nsilence: true",
                "Metadata requests carry no transactional_id",
            ),
            (
                "api: Fetch\nafter: 2s\nuntil: 1s\nsilence: true",
                "an empty window",
            ),
            (
                "api: Produce\nfirst: 0\nsilence: true",
                "numbered Included(1) to Included(0): no number",
            ),
            (
                "api: Produce\ntimes: \"3..3\"\nsilence: true",
                "numbered Included(3) to Excluded(3): no number",
            ),
            (
                "api: Produce\nprobability: 0.0\nsilence: true",
                "probability 0: it would never fire",
            ),
        ] {
            let err = Scenario::parse(&format!("rules:\n  - {}\n", rule.replace('\n', "\n    ")))
                .unwrap_err();
            assert!(
                err.contains(says) && err.contains("rule #1"),
                "{rule}: {err}"
            );
        }
        for possible in [
            "api: Produce\ntimes: \"3..=3\"\nsilence: true",
            "api: Produce\ntimes: \"3..4\"\nsilence: true",
            "api: Metadata\ntopic: t\nsilence: true",
            "api: DeleteTopics\ntopic: t\nsilence: true",
            "api: OffsetFetch\ngroup: g\nsilence: true",
            "api: InitProducerId\nproducer_id: 3\nsilence: true",
            "api: ApiVersions\nversions: \"5..\"\nsilence: true",
            "api: Fetch\nuntil: 1s\nsilence: true",
        ] {
            if let Err(e) = parse_rule(possible) {
                panic!("{possible}: refused: {e}");
            }
        }
    }

    #[test]
    fn connections_max_idle_is_a_duration_or_off_never_zero() {
        let idle = |text: &str| Scenario::parse(&format!("connections_max_idle: {text}\n"));
        assert_eq!(
            idle("30s").unwrap().connections_max_idle,
            Some(Some(Duration::from_secs(30)))
        );
        assert_eq!(idle("off").unwrap().connections_max_idle, Some(None));
        assert_eq!(Scenario::parse("{}").unwrap().connections_max_idle, None);
        for text in ["30s", "off"] {
            let written = serde_yaml::to_string(&idle(text).unwrap()).unwrap();
            assert_eq!(written, format!("connections_max_idle: {text}\n"));
        }
        assert!(idle("0s").unwrap_err().contains("write `off`"));
        assert!(idle("soon")
            .unwrap_err()
            .contains("bad connections_max_idle"));
    }

    #[test]
    fn names_durations_errors_and_ranges_are_read() {
        let s = Scenario::parse(
            "rules:\n  - api: OffsetCommit\n    times: \"2..=3\"\n    error: NOT_COORDINATOR\n    expect: \"1..\"\n  - api: Fetch\n    delay: 40ms\n    after: 1s\n    until: 2500ms\n",
        )
        .unwrap();
        let rules = s.rules().unwrap();
        // A scenario's windows count from the cluster's start.
        assert_eq!(
            rules[1],
            Rule::on(ApiKey::Fetch)
                .delay(Duration::from_millis(40))
                .after(Duration::from_secs(1))
                .until(Duration::from_millis(2500))
                .from_cluster_start()
        );
        assert_eq!(
            rules[0],
            Rule::on(ApiKey::OffsetCommit)
                .times(2..=3)
                .error(ResponseError::NotCoordinator)
                .expect(1..)
                .from_cluster_start()
        );
        assert!(
            Scenario::parse("rules:\n  - api: Produce\n    delay: fast\n")
                .unwrap_err()
                .contains("bad duration")
        );
        assert!(
            Scenario::parse("rules:\n  - api: Produse\n    silence: true\n")
                .unwrap_err()
                .contains("unknown API")
        );
        assert!(Scenario::parse("checks: [nope]\n")
            .unwrap_err()
            .contains("unknown check"));
    }
}
