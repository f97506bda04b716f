//! `kmock::hunt` with an in-process workload (`Workload::in_process`: an async closure over
//! each run's `Cluster`), through the same hunt loop as `kmock hunt -- COMMAND`: its fault-free
//! run teaches the traffic, an error, a panic or a hang is a finding, shrunk and written with
//! the workload's error chain as its output. The workloads send real requests with
//! kmock-client; their verdicts depend on the drawn schedule alone (the rules in force, as the
//! cluster lists them), not on what the faults did to their requests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kmock::hunt::{self, Options, Workload};
use kmock::{Cluster, Scenario};
use kmock_client::Client;

/// The shape: one broker, one topic.
fn base() -> Scenario {
    Scenario::parse("topics:\n  - { name: t, partitions: 2 }\n").unwrap()
}

fn scratch(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kmock-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Asks the cluster's metadata over a real connection: what happened, in words (a fault
/// drawn on Metadata may refuse or cut it; the verdicts below do not depend on it).
async fn ask_metadata(cluster: &Cluster) -> String {
    let addr = cluster.bootstrap().split(',').next().unwrap().to_owned();
    match Client::connect(addr.as_str()).await {
        Ok(client) => match client.metadata(Some(&["t"])).await {
            Ok(m) => format!("metadata answered with {} topics", m.topics.len()),
            Err(e) => format!("metadata failed: {e}"),
        },
        Err(e) => format!("no connection: {e}"),
    }
}

/// A workload that fails (an error with a cause) when two or more rules are in force: the
/// hunt finds it, shrinks the schedule to exactly two rules, and writes the error chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_workload_that_fails_is_found_shrunk_and_written() {
    let out = scratch("hunt-in-process-fails");
    let mut options = Options::new(base());
    (options.runs, options.seed, options.reruns) = (Some(6), 3, 1);
    options.shrink_tries = 6;
    options.max_findings = Some(1);
    options.out.clone_from(&out);
    let workload = Workload::in_process("two rules fail it", |cluster: Cluster| async move {
        let asked = ask_metadata(&cluster).await;
        let rules = cluster.rules().len();
        if rules >= 2 {
            let cause = anyhow::anyhow!("{asked}");
            return Err(cause.context(format!("{rules} rules in force")));
        }
        Ok(())
    });
    let mut lines = Vec::new();
    let summary = hunt::hunt(&options, &workload, &mut |l| lines.push(l.to_owned()))
        .await
        .unwrap();
    print!("{}\n{}", lines.join("\n"), hunt::table(&summary));
    assert!(
        lines[0].starts_with("hunt: fault-free run: ") && lines[0].contains("Metadata"),
        "{lines:?}"
    );
    assert_eq!(summary.findings.len(), 1, "{lines:?}");
    let finding = &summary.findings[0];
    assert_eq!(finding.kind, hunt::WORKLOAD_FAILED);
    assert!(finding.before.len() >= 2, "{:?}", finding.before);
    assert_eq!(finding.after.len(), 2, "{:?}", finding.after);
    assert_eq!(finding.reproduced, (1, 1));
    let text = std::fs::read_to_string(out.join("finding-1.txt")).unwrap();
    assert!(
        text.contains("Workload: in-process: two rules fail it")
            && text.contains("Workload: returned an error after")
            && text.contains("  | error: 2 rules in force")
            && text.contains("  | caused by: metadata "),
        "{text}"
    );
    // Served on free ports, as the hunt's runs were: the base named no port.
    let yaml = std::fs::read_to_string(out.join("finding-1.yaml")).unwrap();
    let scenario = Scenario::parse(&yaml).unwrap();
    assert_eq!(scenario.port, Some(0), "{yaml}");
    assert_eq!(scenario.rules.len(), 2, "{yaml}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// Counts the drops of what a hung workload holds: its task was aborted.
struct Held(Arc<AtomicUsize>, Arc<tokio::sync::Notify>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.notify_one();
    }
}

/// A workload that hangs when a rule is in force is stopped at the deadline (its task aborted,
/// what it held dropped) and found `workload-hung`; one that panics is `workload-failed` with
/// the panic's message as its output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_workload_that_hangs_or_panics_is_a_finding() {
    let out = scratch("hunt-in-process-hangs");
    let mut options = Options::new(base());
    (options.runs, options.seed, options.reruns) = (Some(1), 5, 1);
    options.shrink_tries = 2;
    options.out.clone_from(&out);
    // What the test is about: a workload that never ends is stopped at it. The others (one
    // metadata request) end long before it.
    options.deadline = Duration::from_secs(3);
    let (hung, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let notify = Arc::new(tokio::sync::Notify::new());
    let workload = Workload::in_process("hangs under faults", {
        let (hung, dropped, notify) = (hung.clone(), dropped.clone(), notify.clone());
        move |cluster: Cluster| {
            let (hung, dropped, notify) = (hung.clone(), dropped.clone(), notify.clone());
            async move {
                if !cluster.rules().is_empty() {
                    let _held = Held(dropped, notify);
                    hung.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<()>().await;
                }
                let asked = ask_metadata(&cluster).await;
                anyhow::ensure!(asked.starts_with("metadata answered"), "{asked}");
                Ok(())
            }
        }
    });
    let summary = hunt::hunt(&options, &workload, &mut |l| println!("{l}"))
        .await
        .unwrap();
    print!("{}", hunt::table(&summary));
    assert_eq!(summary.findings.len(), 1);
    assert_eq!(summary.findings[0].kind, hunt::WORKLOAD_HUNG);
    // Every workload that hung was aborted: what it held is dropped. A hang guard only.
    let hung = hung.load(Ordering::SeqCst);
    assert!(hung >= 1);
    tokio::time::timeout(Duration::from_secs(60), async {
        while dropped.load(Ordering::SeqCst) < hung {
            notify.notified().await;
        }
    })
    .await
    .expect("every hung workload's task was aborted");
    std::fs::remove_dir_all(&out).unwrap();

    let workload = Workload::in_process("panics under faults", |cluster: Cluster| async move {
        let asked = ask_metadata(&cluster).await;
        assert!(cluster.rules().is_empty(), "a rule in force ({asked})");
        Ok::<_, anyhow::Error>(())
    });
    let summary = hunt::hunt(&options, &workload, &mut |l| println!("{l}"))
        .await
        .unwrap();
    assert_eq!(summary.findings.len(), 1);
    assert_eq!(summary.findings[0].kind, hunt::WORKLOAD_FAILED);
    let text = std::fs::read_to_string(out.join("finding-1.txt")).unwrap();
    assert!(
        text.contains("Workload: panicked after") && text.contains("  | panic: a rule in force ("),
        "{text}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

/// With one job, a shrinking candidate's k re-runs go one after another and the first that
/// does not reproduce ends its judging: a workload that fails only the first time faults are in
/// force is found, then no candidate reproduces, so each costs exactly one run (the k runs
/// measuring the reproduction rate are all made).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_job_a_candidate_stops_at_its_first_run_that_does_not_reproduce() {
    let out = scratch("hunt-in-process-reruns");
    let mut options = Options::new(base());
    (options.runs, options.seed, options.reruns) = (Some(1), 3, 3);
    options.shrink_tries = 6;
    options.out.clone_from(&out);
    let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
    // Runs started: one aborted before its end would be started but not counted as run.
    let started = Arc::new(AtomicUsize::new(0));
    let workload = Workload::in_process("fails once under faults", {
        let started = started.clone();
        move |cluster: Cluster| {
            let (first, started) = (first.clone(), started.clone());
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                let asked = ask_metadata(&cluster).await;
                let faulted = !cluster.rules().is_empty();
                anyhow::ensure!(
                    !(faulted && first.swap(false, Ordering::SeqCst)),
                    "the first run under faults ({asked})"
                );
                Ok(())
            }
        }
    });
    let summary = hunt::hunt(&options, &workload, &mut |l| println!("{l}"))
        .await
        .unwrap();
    print!("{}", hunt::table(&summary));
    assert_eq!(summary.findings.len(), 1);
    let finding = &summary.findings[0];
    assert_eq!(finding.kind, hunt::WORKLOAD_FAILED);
    // Two faults drawn (seed 3): ddmin tried both halves at least.
    assert_eq!(finding.before.len(), 2, "{:?}", finding.before);
    assert!(finding.tried >= 2, "{} candidates", finding.tried);
    assert_eq!(finding.after, finding.before);
    assert_eq!(finding.reproduced, (0, 3));
    // The fault-free run, the schedule, one run a candidate, three for the rate.
    assert_eq!(summary.total_runs, 2 + finding.tried + 3);
    assert_eq!(started.load(Ordering::SeqCst), summary.total_runs);
    std::fs::remove_dir_all(&out).unwrap();
}
