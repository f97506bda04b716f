//! `kmock check JOURNAL.jsonl` gives the same verdict offline as the in-process checks, with
//! exit status 0 (clean), 1 (violations) or 2 (unreadable input).

use std::path::{Path, PathBuf};

use kmock::{Checks, Cluster, Report};
use kmock_client::Client;

mod common;

use common::{commit_request, kmock_check};

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("kmock-check-{}-{name}", std::process::id()))
}

/// Commits `offsets` in order with a JSON Lines journal written to `path`; returns the
/// in-process verdict of the journal checks.
async fn journal_of(offsets: &[i64], path: &Path) -> Report {
    let file = std::fs::File::create(path).unwrap();
    let cluster = Cluster::builder()
        .topic("t", 1)
        .journal_jsonl(file)
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    for &offset in offsets {
        client
            .send(commit_request("billing", "t", offset), 8)
            .await
            .unwrap();
    }
    let entries = cluster.journal().entries().to_vec();
    cluster.shutdown().await;
    kmock::check::run(&entries, &Checks::default())
}

#[tokio::test]
async fn a_regression_in_an_exported_journal_exits_1_with_the_same_report_as_in_process() {
    let path = temp("regression.jsonl");
    let in_process = journal_of(&[12, 11], &path).await;
    assert_eq!(in_process.violations.len(), 1, "{in_process}");
    let (code, stdout, stderr) = kmock_check(&[path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 1, "stdout: {stdout}\nstderr: {stderr}");
    let offline: Report = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        offline, in_process,
        "the offline verdict matches the in-process one"
    );
    let (code, text, _) = kmock_check(&[path.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        text.starts_with("offset-commit-regression [billing/t-0]"),
        "{text}"
    );
    std::fs::remove_file(path).unwrap();
}

#[tokio::test]
async fn a_clean_journal_exits_0() {
    let path = temp("clean.jsonl");
    journal_of(&[1, 2, 3], &path).await;
    let (code, stdout, _) = kmock_check(&[
        path.to_str().unwrap(),
        "--check",
        "offset-commit-regression",
    ]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("clean: 1 checks, no violation"), "{stdout}");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn an_unreadable_journal_exits_2_naming_the_line() {
    let path = temp("bad.jsonl");
    std::fs::write(&path, "\n{\"seq\": 1}\n").unwrap();
    let (code, _, stderr) = kmock_check(&[path.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("line 2"), "{stderr}");
    let (code, _, stderr) = kmock_check(&[path.to_str().unwrap(), "--check", "no-such-check"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown check"), "{stderr}");
    std::fs::remove_file(path).unwrap();
}
