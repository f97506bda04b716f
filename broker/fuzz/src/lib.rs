//! What kmock's fuzz targets share: the structured record batch input, the in-process cluster
//! that `broker_path` runs frames against, and the framing of a connection's bytes.
//!
//! The targets are in `fuzz_targets/`; `src/bin/seed_corpus/` writes their seed corpora.
//! README.md's "Fuzzing" section says how to run them.

pub mod batch;
pub mod wire;

use std::sync::OnceLock;

use kmock::Cluster;

/// The topic every seed writes to and reads from (created at start, three partitions).
pub const TOPIC: &str = "orders";

/// The broker every `broker_path` input is sent to.
pub const NODE_ID: i32 = 1;

/// How long, on the paused clock, one execution may run. A request may rightly wait days (a
/// Fetch with `max_wait_ms` 2^30, as Kafka honours it), but the clock only jumps from timer to
/// timer and the group timers tick every 10 ms, so such a wait would take minutes of real time.
pub const VIRTUAL_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// One cluster per process, on a current-thread runtime whose clock is paused: a long poll or a
/// rebalance wait ends as soon as nothing else can run (the clock jumps to the next timer), so a
/// Fetch asking to wait 2^31 ms costs no wall time.
pub struct Fixture {
    /// Runs every execution.
    pub runtime: tokio::runtime::Runtime,
    /// Three brokers, topic [`TOPIC`], journal on, no fault rule.
    pub cluster: Cluster,
}

impl Fixture {
    /// The process's fixture, started on first use.
    pub fn get() -> &'static Fixture {
        static FIXTURE: OnceLock<Fixture> = OnceLock::new();
        FIXTURE.get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .expect("a current-thread runtime");
            let cluster = runtime
                .block_on(
                    Cluster::builder()
                        .brokers(3)
                        .topic(TOPIC, 3)
                        .journal_capacity(4096)
                        .start(),
                )
                .expect("the fuzz cluster starts");
            Fixture { runtime, cluster }
        })
    }

    /// Resets the cluster (empty journal and logs, configured topics only, no group) and runs
    /// `input`, the bytes a client writes on one connection, through broker [`NODE_ID`]'s
    /// connection task; gives what the broker wrote back. A connection still open after
    /// [`VIRTUAL_TIME_LIMIT`] is dropped, as by a client that gives up, and gives nothing.
    pub fn serve(&self, input: &[u8]) -> Vec<u8> {
        self.runtime.block_on(async {
            self.cluster.reset();
            let serve = kmock::fuzzing::serve_bytes(&self.cluster, NODE_ID, input);
            tokio::time::timeout(VIRTUAL_TIME_LIMIT, serve)
                .await
                .unwrap_or_default()
        })
    }
}
