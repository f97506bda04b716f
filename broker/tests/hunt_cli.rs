//! The `kmock hunt` binary: its exit statuses, its summary table, and a finding's scenario that
//! `kmock serve --config` accepts. The workloads are shell commands (with kcat, librdkafka's
//! command-line client, for traffic) whose verdict does not depend on the faults drawn.

use std::path::PathBuf;
use std::process::Command;

mod common;

use common::{Server, CURL, KCAT};

/// A fresh directory for `test`'s files.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kmock-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `kmock hunt ARGS`: exit status, stdout, stderr.
fn hunt(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kmock"))
        .arg("hunt")
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("kmock runs");
    (
        out.status.code().expect("kmock exits"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_workload_that_sends_nothing_is_bad_input() {
    let dir = scratch("hunt-nothing");
    let out = dir.join("out");
    let (status, _, stderr) = hunt(&["--runs", "1", "--out", out.to_str().unwrap(), "--", "true"]);
    assert_eq!(status, 2, "{stderr}");
    assert!(
        stderr.contains("the workload sent no request in its fault-free run"),
        "{stderr}"
    );
    let (status, _, stderr) = hunt(&["--runs", "1", "--", "/nonexistent/workload"]);
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.contains("cannot start the workload"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failing_workload_is_a_finding_written_as_a_scenario_kmock_serve_accepts() {
    let dir = scratch("hunt-failing");
    let base = dir.join("base.yaml");
    std::fs::write(&base, "port: 0\ntopics:\n  - { name: t, partitions: 2 }\n").unwrap();
    let out = dir.join("out");
    // Lists the cluster's metadata, then fails whatever happened.
    let script = format!(
        "{KCAT} -b \"$KAFKA_BOOTSTRAP_SERVERS\" -L -m 5 >/dev/null 2>&1; echo listed; exit 3"
    );
    let (status, stdout, stderr) = hunt(&[
        "--config",
        base.to_str().unwrap(),
        "--runs",
        "2",
        "--reruns",
        "1",
        "--seed",
        "4",
        "--out",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(status, 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The fault-free run failed: finding 1, with no fault to shrink; both schedules after it
    // failed again.
    assert!(
        stdout.contains("workload-failed") && stdout.contains("0 → 0") && stdout.contains("1/1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 findings in 2 schedules (4 runs in all")
            && stdout.contains("seen again: workload-failed 2"),
        "{stdout}"
    );
    assert!(stderr.contains("hunt: fault-free run: "), "{stderr}");
    assert!(stderr.contains("hunt: run 2/2"), "{stderr}");
    let text = std::fs::read_to_string(out.join("finding-1.txt")).unwrap();
    assert!(
        text.contains("exit status: 3") && text.contains("  | listed"),
        "{text}"
    );
    let journal = std::fs::read_to_string(out.join("finding-1.journal.jsonl")).unwrap();
    assert!(journal.contains("\"api\":\"Metadata\""), "{journal}");
    // The same journal as a timeline report: the page with the entries embedded.
    let html = std::fs::read_to_string(out.join("finding-1.html")).unwrap();
    assert!(
        html.contains("<title>kmock hunt: finding 1 (workload-failed)</title>")
            && html.contains("\"api\":\"Metadata\""),
        "finding-1.html: {}",
        &html[..html.len().min(400)]
    );
    let yaml = out.join("finding-1.yaml");
    let scenario = std::fs::read_to_string(&yaml).unwrap();
    assert!(
        scenario.starts_with("# kmock hunt, finding 1: workload-failed, reproduced in 1 of 1 runs")
            && scenario.contains("seed: 4"),
        "{scenario}"
    );
    let (mut server, json) = Server::start_json(&["--config", yaml.to_str().unwrap()]);
    assert_eq!(json["brokers"].as_array().map(Vec::len), Some(1), "{json}");
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The lines of a hunt's stdout and stderr that must not depend on `--jobs`: each run's
/// verdict and each finding (times and the output directory cut off), and the closing count.
fn verdicts(stdout: &str, stderr: &str, out: &str) -> Vec<String> {
    let runs = stderr
        .lines()
        .filter(|l| l.starts_with("hunt: run ") || l.starts_with("hunt: finding "))
        .map(|l| l.split(" findings, ").next().unwrap_or(l).to_owned());
    let table = stdout
        .lines()
        .map(|l| l.replace(out, "OUT"))
        .map(|l| l.split(" runs in all").next().unwrap_or(&l).to_owned());
    runs.chain(table).collect()
}

/// `scenario` without the lines that give a time learned from the workload's own run.
fn without_times(scenario: &str) -> Vec<&str> {
    scenario
        .lines()
        .filter(|l| {
            let key = l.trim_start().trim_start_matches("- ");
            !["after:", "until:", "at:"]
                .iter()
                .any(|k| key.starts_with(k))
        })
        .collect()
}

/// Schedules drawn up front from the seed and judged in the order of their numbers: two
/// clusters at once give the same verdicts, findings and finding scenario as one. The workload's
/// verdict depends on its schedule alone: it fails when two or more rules are in force (as
/// the control API lists them), whatever they did to its metadata request.
#[test]
fn two_jobs_find_what_one_job_finds() {
    let dir = scratch("hunt-jobs");
    let script = format!(
        "{KCAT} -b \"$KAFKA_BOOTSTRAP_SERVERS\" -L -m 5 >/dev/null 2>&1; \
         n=$({CURL} -s \"$KMOCK_CONTROL/rules\" | grep -o '\"name\"' | wc -l); [ \"$n\" -lt 2 ]"
    );
    let mut seen = Vec::new();
    for jobs in ["1", "2"] {
        let out = dir.join(format!("out-{jobs}"));
        let (status, stdout, stderr) = hunt(&[
            "--runs",
            "6",
            "--seed",
            "3",
            "--reruns",
            "1",
            "--shrink-tries",
            "6",
            "--jobs",
            jobs,
            "--out",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ]);
        assert_eq!(
            status, 1,
            "--jobs {jobs}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        let lines = verdicts(&stdout, &stderr, out.to_str().unwrap());
        let scenario = std::fs::read_to_string(out.join("finding-1.yaml")).unwrap();
        println!("--jobs {jobs}:\n{}\n{scenario}", lines.join("\n"));
        seen.push((lines, scenario));
    }
    let (one, two) = (&seen[0], &seen[1]);
    assert!(
        one.0
            .iter()
            .any(|l| l.contains("workload-failed: shrinking")),
        "{:?}",
        one.0
    );
    assert_eq!(one.0, two.0, "the verdicts differ between --jobs 1 and 2");
    // Times in the scenario (a rule's `after`/`until`, an operation's `at`) are drawn within
    // the span each hunt learned from its own fault-free run, which varies by milliseconds
    // from run to run: the rest of the scenario must be the same.
    assert_eq!(
        without_times(&one.1),
        without_times(&two.1),
        "finding-1.yaml differs between --jobs 1 and 2"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
