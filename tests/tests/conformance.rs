//! The differential harness (`kmock_tests::conformance`): every case against kmock, compared with
//! what Apache Kafka 4.4.0 answered (`fixtures/conformance/<case>.txt`), and against a real Kafka
//! to check that the recordings still hold.
//!
//! The real broker is the one `.ci/run` started (`KMOCK_KAFKA_BOOTSTRAP`), or one this binary
//! starts with `fixtures/kafka/kafka.sh` (Java 17+ and Maven). Re-record against a fresh broker:
//! `KMOCK_CONFORMANCE_RECORD=1 cargo test -p kmock-tests --test conformance` (without
//! `KMOCK_KAFKA_BOOTSTRAP`, so that no topic of an earlier run is there).

use anyhow::{ensure, Result};
use kmock::Cluster;
use kmock_tests::conformance::{self, Case, Lines};
use kmock_tests::real_kafka::RealKafka;

const RECORD_ENV: &str = "KMOCK_CONFORMANCE_RECORD";

/// The cases to run: all, or those whose name contains `KMOCK_CONFORMANCE_CASE`.
fn cases() -> Vec<Case> {
    let only = std::env::var("KMOCK_CONFORMANCE_CASE").unwrap_or_default();
    conformance::all()
        .into_iter()
        .filter(|c| c.name.contains(only.as_str()))
        .collect()
}

fn recording_mode() -> bool {
    std::env::var_os(RECORD_ENV).is_some_and(|v| v != "0" && !v.is_empty())
}

/// `got` against `recorded` as a line diff (longest common subsequence): `- ` a recorded line
/// kmock did not print, `+ ` a line it printed instead, `  ` a line both have.
fn diff(recorded: &Lines, got: &Lines) -> String {
    let (n, m) = (recorded.len(), got.len());
    // common[i][j]: length of the longest common subsequence of recorded[i..] and got[j..].
    let mut common = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            common[i][j] = if recorded[i] == got[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < n || j < m {
        if i < n && j < m && recorded[i] == got[j] {
            out.push_str(&format!("      {}\n", recorded[i]));
            (i, j) = (i + 1, j + 1);
        } else if j < m && (i == n || common[i][j + 1] >= common[i + 1][j]) {
            out.push_str(&format!("    + {}\n", got[j]));
            j += 1;
        } else {
            out.push_str(&format!("    - {}\n", recorded[i]));
            i += 1;
        }
    }
    out
}

#[tokio::test]
async fn kmock_answers_as_kafka_did_except_where_a_case_says_it_differs() -> Result<()> {
    if recording_mode() {
        // The other test is rewriting the recordings this one would compare with.
        eprintln!("{RECORD_ENV} is set: only recording, not comparing kmock");
        return Ok(());
    }
    // As the real broker is configured (fixtures/kafka/kafka.sh): one node, node id 1, one
    // `__consumer_offsets` partition, `transaction.version` 2 finalized (Kafka 4.x's default
    // on a new cluster).
    let cluster = Cluster::builder()
        .offsets_topic_partitions(1)
        .transaction_version(kmock::TransactionVersion::V2)
        .start()
        .await?;
    let addr = cluster.brokers()[0].addr.to_string();
    let run = conformance::run_id();
    let cases = cases();
    let (mut identical, mut expected) = (0, 0);
    let mut failures = Vec::new();
    for case in &cases {
        let recorded = conformance::recording(case.name)?;
        let got = match conformance::run(case, &addr, &run).await {
            Ok(lines) => lines,
            Err(e) => {
                failures.push(format!("{}: {e:#}", case.name));
                continue;
            }
        };
        match (case.differs, got == recorded) {
            (None, true) => identical += 1,
            (None, false) => failures.push(format!(
                "{}: kmock differs from Kafka\n{}",
                case.name,
                diff(&recorded, &got)
            )),
            (Some(reason), false) => {
                expected += 1;
                println!(
                    "{}: expected difference ({reason})\n{}",
                    case.name,
                    diff(&recorded, &got)
                );
            }
            (Some(reason), true) => failures.push(format!(
                "{}: marked as differing ({reason}) but kmock now answers as Kafka: remove the mark",
                case.name
            )),
        }
    }
    println!(
        "{} cases: {identical} identical, {expected} expected differences, {} failed",
        cases.len(),
        failures.len()
    );
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn the_recordings_hold_against_a_real_kafka() -> Result<()> {
    let kafka = RealKafka::start()?;
    let run = conformance::run_id();
    let record = recording_mode();
    let cases = cases();
    let mut failures = Vec::new();
    for case in &cases {
        let got = match conformance::run(case, kafka.bootstrap(), &run).await {
            Ok(lines) => lines,
            Err(e) => {
                failures.push(format!("{}: {e:#}", case.name));
                continue;
            }
        };
        if record {
            conformance::record(case.name, &got)?;
            continue;
        }
        let recorded = conformance::recording(case.name)?;
        if got != recorded {
            failures.push(format!(
                "{}: Kafka no longer answers as recorded\n{}",
                case.name,
                diff(&recorded, &got)
            ));
        }
    }
    println!(
        "{} cases against Kafka at {}: {} {}",
        cases.len(),
        kafka.bootstrap(),
        if record { "recorded" } else { "compared" },
        failures.len()
    );
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// Every case has a recording and no two cases share a name.
#[test]
fn every_case_has_a_recording_and_a_name_of_its_own() -> Result<()> {
    let cases: Vec<Case> = conformance::all();
    let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    ensure!(names.len() == cases.len(), "two cases share a name");
    if !recording_mode() {
        for case in &cases {
            conformance::recording(case.name)?;
        }
    }
    Ok(())
}
