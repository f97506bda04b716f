//! Helpers for kmock's integration tests with real clients: the fixtures (scenarios and client
//! programs in other languages), a cluster started from a scenario file, and numbered messages
//! produced and read back with librdkafka ([`numbered`]), a real Apache Kafka ([`real_kafka`])
//! and the differential harness that compares kmock with it ([`conformance`]).
#![warn(missing_docs)]

pub mod browser;
pub mod build_cache;
pub mod client_program;
pub mod conformance;
pub mod consumer_group;
pub mod go_client;
pub mod hunting;
pub mod java_client;
pub mod node_client;
pub mod numbered;
pub mod python_client;
pub mod real_kafka;

pub use numbered::{exactly_once_in_order, produce_numbered, read_log, Produced};

use std::path::PathBuf;

use anyhow::{Context, Result};
use kmock::{Checks, Cluster, Scenario};

/// The `kmock` binary of this test run's profile: `target/<profile>/kmock`, the directory above
/// the test executable's (`target/<profile>/deps/…`). `cargo test --workspace` builds it there
/// (the kmock package has integration tests); `cargo test -p kmock-tests` alone does not.
///
/// # Errors
/// It is not there: build it with `cargo build -p kmock --bin kmock`.
pub fn built_kmock() -> Result<PathBuf> {
    let this = std::env::current_exe()?;
    let profile_dir = this
        .parent()
        .and_then(|deps| deps.parent())
        .context("the test executable's profile directory")?;
    let kmock = profile_dir.join(format!("kmock{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(
        kmock.is_file(),
        "no kmock binary at {}: build it with `cargo build -p kmock --bin kmock` (cargo test \
         --workspace does)",
        kmock.display()
    );
    Ok(kmock)
}

/// `fixtures/<path>` of the repository.
pub fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(path)
}

/// A cluster started as `fixtures/scenarios/<name>` says, on free loopback ports, with the
/// scenario's rules in force and its operations scheduled, and the checks the scenario names
/// (all checks if it names none).
///
/// # Errors
/// An unreadable or invalid scenario, or a cluster that does not start.
pub async fn start_scenario(name: &str) -> Result<(Cluster, Checks)> {
    let path = fixture(&format!("scenarios/{name}"));
    let scenario = Scenario::load(&path)?;
    let cluster = scenario.builder()?.port(0).start().await?;
    for rule in scenario.rules()? {
        cluster.add_rule(rule)?;
    }
    tokio::spawn(kmock::schedule::run(
        cluster.clone(),
        scenario.operations.clone(),
    ));
    let checks = scenario.checks()?.unwrap_or_default();
    Ok((cluster, checks))
}

/// How many times a reproduction test runs its scenario: `KMOCK_REPEAT` (default 1), to
/// measure a detection rate, e.g. `KMOCK_REPEAT=10 cargo test -p kmock-tests --test
/// sarama_commit_race -- --nocapture`.
///
/// # Panics
/// When `KMOCK_REPEAT` is set but not a positive number.
pub fn repeat() -> usize {
    match std::env::var("KMOCK_REPEAT") {
        Err(_) => 1,
        Ok(text) => text
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("KMOCK_REPEAT={text:?} is not a positive number"))
            .unwrap(),
    }
}

/// "name fired n of m" for every rule of `cluster`, joined; an error if one never fired (the
/// fault the run was meant to show was not injected).
///
/// # Errors
/// A rule that fired on no request, with every rule's counts.
pub fn rules_fired(cluster: &Cluster) -> Result<String> {
    let rules = cluster.rules();
    let counts = rules
        .iter()
        .map(|r| format!("{} fired {} of {}", r.name, r.fired, r.matched))
        .collect::<Vec<_>>()
        .join(", ");
    anyhow::ensure!(
        rules.iter().all(|r| r.fired > 0),
        "a fault rule never fired: {counts}"
    );
    Ok(counts)
}
