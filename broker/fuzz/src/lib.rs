//! What kmock's fuzz targets share: the structured record batch input, the in-process cluster
//! that `broker_path` runs frames against, and the framing of a connection's bytes.
//!
//! The targets are in `fuzz_targets/`; `src/bin/seed_corpus.rs` writes their seed corpora.
//! README.md's "Fuzzing" section says how to run them.

pub mod batch;
pub mod wire;

use std::sync::OnceLock;

use kmock::Cluster;

/// The topic every seed writes to and reads from (created at start, three partitions).
pub const TOPIC: &str = "orders";

/// The broker every `broker_path` input is sent to.
pub const NODE_ID: i32 = 1;

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
    /// connection task; gives what the broker wrote back.
    pub fn serve(&self, input: &[u8]) -> Vec<u8> {
        self.runtime.block_on(async {
            self.cluster.reset();
            kmock::fuzzing::serve_bytes(&self.cluster, NODE_ID, input).await
        })
    }
}
