//! A real Apache Kafka 4.4.0 for tests that compare kmock with it or put a proxy in front of it:
//! the one `.ci/run` started (its bootstrap in `KMOCK_KAFKA_BOOTSTRAP`, or
//! `KMOCK_KAFKA3_BOOTSTRAP` for the three-node cluster), or one started here with
//! `fixtures/kafka/kafka.sh` (Java 17+ and Maven needed; see README, "A real Kafka") and stopped
//! when the [`RealKafka`] is dropped.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{ensure, Context, Result};

use crate::fixture;

/// Clusters this process started, so that each gets a state directory of its own.
static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The environment variable naming the bootstrap (`host:port`) of a real Kafka already running.
pub const BOOTSTRAP_ENV: &str = "KMOCK_KAFKA_BOOTSTRAP";

/// The environment variable naming the bootstrap (`host:port,host:port,host:port`) of a
/// three-node Kafka already running (`fixtures/kafka/kafka.sh start --nodes 3`).
pub const BOOTSTRAP3_ENV: &str = "KMOCK_KAFKA3_BOOTSTRAP";

/// A real Kafka node: borrowed from `KMOCK_KAFKA_BOOTSTRAP`, or started by [`RealKafka::start`]
/// and stopped (process group killed, data removed) on drop.
#[derive(Debug)]
pub struct RealKafka {
    bootstrap: String,
    /// The `KMOCK_KAFKA_STATE` directory of a node this value started, `None` if borrowed.
    owned_state: Option<PathBuf>,
}

impl RealKafka {
    /// The node named by `KMOCK_KAFKA_BOOTSTRAP` if set and not empty, otherwise a new single KRaft node
    /// (broker and controller in one process) on free loopback ports, started by
    /// `fixtures/kafka/kafka.sh start` in a state directory of its own. Starting takes about
    /// 5–10 s once the jars are fetched (the first start fetches them with Maven).
    ///
    /// # Errors
    /// The script failing: no Java or Maven, the fetch failing, or the node not listing its
    /// broker in time (the script's message says which).
    pub fn start() -> Result<RealKafka> {
        Self::borrow_or_start(BOOTSTRAP_ENV, 1)
    }

    /// The three-node cluster named by `KMOCK_KAFKA3_BOOTSTRAP` if set and not empty,
    /// otherwise a new one started by `fixtures/kafka/kafka.sh start --nodes 3`: node 1 broker
    /// and controller, nodes 2 and 3 brokers, internal topics with one replica. Starting takes
    /// about 30 s on a loaded 2-core machine; tests that need one each start their own unless
    /// the variable is set (as `.ci/run` does).
    ///
    /// # Errors
    /// As [`RealKafka::start`].
    pub fn start_three_nodes() -> Result<RealKafka> {
        Self::borrow_or_start(BOOTSTRAP3_ENV, 3)
    }

    fn borrow_or_start(env: &str, nodes: u32) -> Result<RealKafka> {
        if let Some(bootstrap) = std::env::var(env).ok().filter(|b| !b.is_empty()) {
            return Ok(RealKafka {
                bootstrap,
                owned_state: None,
            });
        }
        let state = std::env::temp_dir().join(format!(
            "kmock-kafka{nodes}-test-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let output = script("start", &state)
            .args(["--nodes", &nodes.to_string()])
            .output()
            .context("running fixtures/kafka/kafka.sh start")?;
        let this = RealKafka {
            bootstrap: String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            owned_state: Some(state),
        };
        ensure!(
            output.status.success() && !this.bootstrap.is_empty(),
            "fixtures/kafka/kafka.sh start failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(this)
    }

    /// The bootstrap, `127.0.0.1:PORT` (comma-separated, one per node, for several nodes).
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }
}

impl Drop for RealKafka {
    fn drop(&mut self) {
        if let Some(state) = &self.owned_state {
            if let Err(e) = script("stop", state).status() {
                eprintln!("fixtures/kafka/kafka.sh stop failed: {e}");
            }
        }
    }
}

fn script(command: &str, state: &PathBuf) -> Command {
    let mut script = Command::new(fixture("kafka/kafka.sh"));
    script.arg(command).env("KMOCK_KAFKA_STATE", state);
    script
}
