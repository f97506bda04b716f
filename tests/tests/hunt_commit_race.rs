//! `kmock hunt` (`kmock::hunt`) over Sarama's consumer group (`fixtures/clients/go/consumer`),
//! from a base scenario with only the shape of `commit-race.yaml` (9 brokers, topic `orders`
//! with 8 partitions, the commit checks; no rules): the hunt learns the workload's traffic,
//! draws seeded schedules over it, and must find `offset-commit-regression` for Sarama v1.43.2
//! (IBM/sarama#2940) and shrink it to at most 3 faults that reproduce it in at least half of
//! the re-runs; v1.43.3 gives no finding of the checks with the same budget and seed.
//!
//! On this shape the race needs no fault: the coordinator (broker 9) leads no partition, so
//! the commits have a connection of their own, and v1.43.2's commits, built by 8 goroutines and
//! sent one at a time, cross in the fault-free run itself (in every run measured): the hunt's
//! finding is the fault-free run's, with no fault to shrink. On 3 brokers (each one leading
//! partitions) a run takes about a minute (a commit waits for a fetch's 500 ms max wait on the
//! shared connection) and the race still shows without faults.
//!
//! The workload is a user's shell command: kcat fills each partition with 250 messages, then
//! the consumer reads all 2000 and commits after every message; it fails when it does not
//! handle them all in 60 s (a client error it recovered from, such as Sarama reporting the
//! OffsetFetch answered COORDINATOR_LOAD_IN_PROGRESS as "response did not contain all the
//! expected topic/partition blocks" and retrying, is printed, not a failure). The budget:
//! `KMOCK_HUNT_RUNS` schedules (default 8: a run takes 5–12 s on a loaded machine), seed
//! `KMOCK_HUNT_SEED` (default 1), `KMOCK_HUNT_BROKERS` brokers (default 9).
//! `KMOCK_HUNT_SEEDS=N` (opt-in) hunts v1.43.2 with seeds 1..=N instead and prints, for each,
//! the schedules and seconds to the first finding (the figures of the closing note).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use kmock::hunt::{self, Options, Workload};
use kmock::{Checks, Scenario};
use kmock_tests::go_client;
use kmock_tests::hunting::{env_or, out_dir};

const TOPIC: &str = "orders";
const GROUP: &str = "shipping";
const KIND: &str = "offset-commit-regression";
/// The checks of `fixtures/scenarios/commit-race.yaml`.
const CHECKS: [&str; 3] = [
    KIND,
    "stale-generation-commit",
    "commit-for-unassigned-partition",
];
/// One hunt at a time: each runs a 9-broker cluster, kcat and the consumer, and two side by
/// side on a 2-core machine only add load that neither is about.
static ONE_HUNT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
/// A hang guard only: the consumer gives up by itself after 60 s.
const DEADLINE: Duration = Duration::from_secs(120);

/// The base scenario: the shape, no rules.
fn base() -> Scenario {
    Scenario::parse(&format!(
        "brokers: {}\nport: 0\ntopics:\n  - {{ name: {TOPIC}, partitions: 8 }}\nchecks: [{}]\n",
        env_or("KMOCK_HUNT_BROKERS", 9),
        CHECKS.join(", ")
    ))
    .expect("the base scenario parses")
}

/// Fill with kcat (an idempotent librdkafka producer, 250 messages a partition), then consume
/// all 2000 with the consumer at `binary`, committing after each.
fn workload(binary: &Path) -> Workload {
    let script = format!(
        "set -e; for p in 0 1 2 3 4 5 6 7; do seq 250 | kcat -P -b \"$KAFKA_BOOTSTRAP_SERVERS\" \
         -t {TOPIC} -p $p -X enable.idempotence=true; done; exec \"$0\" -brokers \
         \"$KAFKA_BOOTSTRAP_SERVERS\" -topic {TOPIC} -group {GROUP} -messages 2000 -timeout 60s -errors-fail=false"
    );
    Workload::command(
        "sh",
        [OsStr::new("-c"), OsStr::new(&script), binary.as_os_str()],
    )
}

/// The hunt of the test with `seed` and `runs` schedules.
fn options(out: PathBuf, seed: u64, runs: usize) -> Result<Options> {
    let mut options = Options::new(base());
    options.checks = Checks::named(&CHECKS).map_err(anyhow::Error::msg)?;
    options.check_names = CHECKS.iter().map(|c| (*c).to_owned()).collect();
    options.runs = Some(runs);
    options.seed = seed;
    options.out = out;
    options.deadline = DEADLINE;
    options.reruns = 2;
    options.shrink_tries = 10;
    options.max_findings = Some(1);
    Ok(options)
}

fn budget() -> Result<usize> {
    Ok(usize::try_from(env_or("KMOCK_HUNT_RUNS", 8))?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hunt_finds_sarama_v1_43_2_commit_regressions_and_shrinks_them() -> Result<()> {
    let _one = ONE_HUNT.lock().await;
    let binary = go_client::build("consumer", "v1.43.2")?;
    let seeds = env_or("KMOCK_HUNT_SEEDS", 0);
    if seeds > 0 {
        return measure(&binary, seeds).await;
    }
    let out = out_dir("hunt-commit-v1.43.2")?;
    let options = options(out.clone(), env_or("KMOCK_HUNT_SEED", 1), budget()?)?;
    let summary = hunt::hunt(&options, &workload(&binary), &mut |l| println!("{l}")).await?;
    print!("{}", hunt::table(&summary));
    let finding = summary
        .findings
        .iter()
        .find(|f| f.kind == KIND)
        .with_context(|| {
            format!(
                "no {KIND} in {} schedules (seed {}): {:?}",
                summary.runs, options.seed, summary.findings
            )
        })?;
    ensure!(
        finding.after.len() <= 3,
        "shrunk to {} faults: {:?}",
        finding.after.len(),
        finding.after
    );
    let (hits, of) = finding.reproduced;
    ensure!(
        2 * hits >= of,
        "the shrunk schedule reproduced {hits} of {of}"
    );
    for file in &finding.files {
        ensure!(file.is_file(), "{} was not written", file.display());
    }
    std::fs::remove_dir_all(&out)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_hunt_finds_nothing_in_sarama_v1_43_3() -> Result<()> {
    let _one = ONE_HUNT.lock().await;
    let binary = go_client::build("consumer", "v1.43.3")?;
    let out = out_dir("hunt-commit-v1.43.3")?;
    let options = options(out.clone(), env_or("KMOCK_HUNT_SEED", 1), budget()?)?;
    let summary = hunt::hunt(&options, &workload(&binary), &mut |l| println!("{l}")).await?;
    print!("{}", hunt::table(&summary));
    let reports: Vec<String> = summary
        .findings
        .iter()
        .map(|f| std::fs::read_to_string(&f.files[1]).unwrap_or_default())
        .collect();
    // The verdict is the checks': a check's finding fails the test. A workload that failed or
    // hung (Sarama stalls for seconds under REQUEST_TIMED_OUT on a loaded machine) ends the
    // hunt early with its own finding, printed here; the schedules tried before it are judged.
    let violations = summary
        .findings
        .iter()
        .filter(|f| CHECKS.contains(&f.kind.as_str()))
        .count();
    ensure!(
        violations == 0,
        "v1.43.3: {violations} findings of the checks:\n{}",
        reports.join("\n")
    );
    if summary.findings.is_empty() {
        ensure!(
            summary.runs == options.runs.unwrap_or(0),
            "{} schedules tried",
            summary.runs
        );
    } else {
        println!(
            "v1.43.3: the workload's own finding ended the hunt after {} schedules:\n{}",
            summary.runs,
            reports.join("\n")
        );
    }
    std::fs::remove_dir_all(&out)?;
    Ok(())
}

/// The figures: for seeds 1..=`seeds`, the schedules and seconds to the first finding of
/// v1.43.2 (budget `KMOCK_HUNT_RUNS`), then their medians.
async fn measure(binary: &Path, seeds: u64) -> Result<()> {
    let (mut runs, mut secs) = (Vec::new(), Vec::new());
    for seed in 1..=seeds {
        let out = out_dir(&format!("hunt-commit-measure-{seed}"))?;
        let options = options(out.clone(), seed, budget()?)?;
        let started = Instant::now();
        let (mut baseline, mut first) = (None, None);
        let summary = hunt::hunt(&options, &workload(binary), &mut |l| {
            println!("seed {seed}: {l}");
            if l.starts_with("hunt: fault-free run") {
                baseline = Some(started.elapsed());
            }
            if first.is_none() && l.contains(&format!("{KIND}: shrinking")) {
                first = Some(started.elapsed());
            }
        })
        .await?;
        print!("{}", hunt::table(&summary));
        let found = summary.findings.iter().find(|f| f.kind == KIND);
        // A finding of the fault-free run is known when that run ends.
        if found.is_some_and(|f| f.run == 0) {
            first = baseline;
        }
        println!(
            "seed {seed}: first finding at schedule {:?} after {:.1?}; shrunk {:?}",
            found.map(|f| f.run),
            first,
            found.map(|f| (f.before.len(), f.after.len(), f.reproduced))
        );
        if let (Some(f), Some(t)) = (found, first) {
            runs.push(f.run);
            secs.push(t.as_secs_f64());
        }
        std::fs::remove_dir_all(&out)?;
    }
    runs.sort_unstable();
    secs.sort_by(f64::total_cmp);
    println!(
        "{} of {seeds} seeds found {KIND}; median schedules {:?}, median seconds {:?}",
        runs.len(),
        runs.get(runs.len() / 2),
        secs.get(secs.len() / 2)
    );
    Ok(())
}
