//! librdkafka around `Cluster::reset`: resets during an idempotent producer's run, and resets
//! while a consumer fetches by topic id. Each reset starts only once the client's traffic is
//! seen in the journal; the journal then shows a Produce answered without error between every
//! two resets, the checks (which start afresh at each reset) are clean, and nothing deadlocks.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Result};
use common::cluster_ops::{cluster, versions, PARTITIONS, TOPIC};
use common::groups::answered_ok;
use common::jsonl::JsonlBuffer;
use kmock::journal::ClusterOperation;
use kmock::{Checks, Cluster, Entry};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureProducer;

const MESSAGES: usize = 3_000;
/// Hang guard for each wait: generous, it only catches a run that never gets there.
const SETTLE: Duration = Duration::from_secs(60);

/// Runs every check over the journal and the logs, printing the versions librdkafka used.
fn assert_checks_clean(cluster: &Cluster) {
    let journal = cluster.journal();
    let report = cluster.check(&Checks::default());
    eprintln!(
        "Fetch versions {:?}, Produce versions {:?}, OffsetCommit versions {:?}; {} violations",
        versions(&journal, "Fetch"),
        versions(&journal, "Produce"),
        versions(&journal, "OffsetCommit"),
        report.violations.len()
    );
    report.assert_clean();
}

/// Each reset lands while the idempotent producer's requests are being answered: the journal
/// (its JSON Lines copy, which keeps what came before each reset) holds a Produce answered
/// without error between every two resets and after the last one, and the checks, which start
/// afresh at each reset, are clean over the whole run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_during_an_idempotent_producer_run_leave_the_checks_clean() -> Result<()> {
    const RESETS: usize = 3;
    let sink = JsonlBuffer::default();
    let cluster = cluster(Some(sink.clone())).await?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .create()?;
    let producing = tokio::spawn(async move {
        kmock_tests::produce_numbered(
            &producer,
            TOPIC,
            PARTITIONS,
            MESSAGES * 3,
            (100, Duration::from_millis(20)),
        )
        .await
    });
    let is_reset = |e: &Entry| matches!(e.operation, Some(ClusterOperation::Reset));
    let mut last_reset = 0;
    for _ in 0..RESETS {
        // The journal in memory holds only what came after the last reset.
        cluster
            .wait_for(
                |e| e.seq > last_reset && e.is("Produce") && answered_ok(e),
                SETTLE,
            )
            .await?;
        cluster.reset();
        last_reset = sink
            .entries()
            .iter()
            .rev()
            .find(|e| is_reset(e))
            .expect("the sink got the reset line")
            .seq;
    }
    cluster
        .wait_for(
            |e| e.seq > last_reset && e.is("Produce") && answered_ok(e),
            SETTLE,
        )
        .await?;
    let produced = producing.await??;
    let entries = sink.entries();
    let resets: Vec<u64> = entries
        .iter()
        .filter(|e| is_reset(e))
        .map(|e| e.seq)
        .collect();
    ensure!(resets.len() == RESETS, "reset lines at seqs {resets:?}");
    let bounds: Vec<u64> = std::iter::once(0)
        .chain(resets.iter().copied())
        .chain(std::iter::once(u64::MAX))
        .collect();
    for span in bounds.windows(2) {
        ensure!(
            entries
                .iter()
                .any(|e| e.seq > span[0] && e.seq < span[1] && e.is("Produce") && answered_ok(e)),
            "no Produce answered without error between seq {} and {}: the resets did not \
             land among the producer's requests",
            span[0],
            span[1]
        );
    }
    eprintln!(
        "{} messages delivered across resets at seqs {resets:?}",
        produced.delivered.len()
    );
    kmock::check::run(&entries, &Checks::default()).assert_clean();
    assert_checks_clean(&cluster);
    cluster.shutdown().await;
    Ok(())
}

/// librdkafka 2.12 fetches with Fetch v16, naming topics by id, so every Fetch it sends reads
/// the cluster state while it is journaled, and `Cluster::reset` empties the journal under the
/// state lock: resets while a consumer fetches must not deadlock. The runtime is built by hand
/// so that a deadlock fails the test instead of hanging it.
#[test]
fn resets_while_librdkafka_fetches_do_not_deadlock() {
    const RESETS: usize = 100;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = runtime.handle().clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let result = handle.block_on(async {
            let cluster = cluster(None).await?;
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", cluster.bootstrap())
                .set("group.id", "fetcher")
                .set("enable.auto.commit", "false")
                .set("fetch.wait.max.ms", "1")
                .create()?;
            let mut assignment = rdkafka::TopicPartitionList::new();
            for p in 0..PARTITIONS {
                assignment.add_partition_offset(TOPIC, p, rdkafka::Offset::Beginning)?;
            }
            consumer.assign(&assignment)?;
            let stop = Arc::new(AtomicBool::new(false));
            let polling = std::thread::spawn({
                let stop = stop.clone();
                move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _ = consumer.poll(Duration::from_millis(10));
                    }
                }
            });
            let mut fetches = 0;
            let mut by_topic_id = 0;
            for _ in 0..RESETS {
                // A Fetch since the last reset (the journal in memory holds nothing older):
                // each reset races librdkafka's fetching.
                cluster
                    .wait_for(|e| e.is("Fetch"), Duration::from_secs(10))
                    .await?;
                let journal = cluster.journal();
                fetches += journal.api("Fetch").count();
                by_topic_id += journal
                    .api("Fetch")
                    .filter(|e| e.version.is_some_and(|v| v >= 13))
                    .count();
                cluster.reset();
            }
            stop.store(true, Ordering::Relaxed);
            if let Err(panic) = polling.join() {
                std::panic::resume_unwind(panic);
            }
            cluster.shutdown().await;
            // The deadlock needed Fetch v13+ (topics named by id): the test says nothing
            // without them.
            anyhow::ensure!(
                by_topic_id > 0,
                "librdkafka sent no Fetch v13+ among {fetches}"
            );
            anyhow::Ok(fetches)
        });
        let _ = done_tx.send(result);
    });
    // A hang guard, not a speed bound: only a deadlock takes this long.
    match done_rx.recv_timeout(Duration::from_secs(120)) {
        Ok(result) => eprintln!(
            "{RESETS} resets while librdkafka sent {} Fetch requests: no deadlock",
            result.unwrap()
        ),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("the test's thread panicked (its message is above)")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            runtime.shutdown_background();
            panic!(
                "no progress for 120 s: Cluster::reset (state lock, then journal lock) and the \
                 journaling of a librdkafka Fetch v16 (journal lock, then state lock to name \
                 its topic id) deadlocked"
            );
        }
    }
}
