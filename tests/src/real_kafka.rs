//! A real Apache Kafka 4.4.0 broker for tests that compare kmock with it: the one `.ci/run`
//! started (its bootstrap in `KMOCK_KAFKA_BOOTSTRAP`), or one started here with
//! `fixtures/kafka/kafka.sh` (Java 17+ and Maven needed; see README, "A real Kafka") and stopped
//! when the [`RealKafka`] is dropped.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{ensure, Context, Result};

use crate::fixture;

/// The environment variable naming the bootstrap (`host:port`) of a real Kafka already running.
pub const BOOTSTRAP_ENV: &str = "KMOCK_KAFKA_BOOTSTRAP";

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
        if let Some(bootstrap) = std::env::var(BOOTSTRAP_ENV).ok().filter(|b| !b.is_empty()) {
            return Ok(RealKafka {
                bootstrap,
                owned_state: None,
            });
        }
        let state = std::env::temp_dir().join(format!("kmock-kafka-test-{}", std::process::id()));
        let output = script("start", &state)
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

    /// The node's bootstrap, `127.0.0.1:PORT`.
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
