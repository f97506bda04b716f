//! `kmock check JOURNAL.jsonl` gives the same verdict offline as the in-process checks, with
//! exit status 0 (clean), 1 (violations) or 2 (unreadable input).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kmock::control::ControlApi;
use kmock::{ApiKey, Checks, Cluster, Report, ResponseError, Rule};
use kmock_client::Client;

mod common;

use common::{
    commit_request, http, idempotent_produce, idempotent_produce_values, join_request, kmock_check,
    member_commit_request, sync_request, JournalFile,
};

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

#[tokio::test]
async fn a_clean_verdict_counts_only_the_checks_that_ran_and_names_those_skipped() {
    let path = temp("skipped.jsonl");
    journal_of(&[1, 2], &path).await;
    let (code, stdout, _) = kmock_check(&[path.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    // Offline, out-of-order-write needs the partition logs: it is skipped, not clean.
    let all = kmock::check::ALL.len();
    assert_eq!(
        stdout,
        format!(
            "skipped: out-of-order-write: needs the partition logs (run in process)\n\
             clean: {} of {all} checks (out-of-order-write skipped), no violation\n",
            all - 1
        )
    );
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

/// The checks a journal alone can run, each of which the traffic of
/// [`a_journal_with_every_violation`] trips once.
const JOURNAL_KINDS: [&str; 12] = [
    "offset-commit-regression",
    "commit-for-unassigned-partition",
    "stale-generation-commit",
    "sequence-gap",
    "sequence-reorder",
    "sequence-overlap",
    "epoch-not-reset",
    "epoch-regression",
    "inflight-exceeded",
    "stuck-client",
    "reorder-on-retry",
    "sequence-reused",
];
/// The checks that read the partition logs in process (`POST /check`); `kmock check` reads
/// `duplicate-write` and `lost-write` from the Produce answers and skips `out-of-order-write`
/// (a correct kmock never stores what they catch, so they stay clean).
const LOG_KINDS: [&str; 3] = ["duplicate-write", "out-of-order-write", "lost-write"];

/// `(producer epoch, first sequence, record count)` of an idempotent batch.
type Batch = (i16, i32, usize);

/// Puts one violation of each of [`JOURNAL_KINDS`] on the wire, through a cluster that writes
/// its journal to `file` and serves its control API: returns both (shut them down).
async fn a_journal_with_every_violation(file: &JournalFile) -> (Cluster, ControlApi) {
    let cluster = Cluster::builder()
        .topic("t", 9)
        .auto_create_topics(false)
        .journal_jsonl(std::fs::File::create(file.path()).unwrap())
        .start()
        .await
        .unwrap();
    let api = ControlApi::start(cluster.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = cluster.brokers()[0].addr;
    let (a, b) = (
        Client::connect(addr).await.unwrap(),
        Client::connect(addr).await.unwrap(),
    );
    // offset-commit-regression: t-0 committed 12, then 11, from outside group management.
    for offset in [12, 11] {
        a.send(commit_request("billing", "t", offset), 8)
            .await
            .unwrap();
    }
    // commit-for-unassigned-partition: member m of g holds t-1 and commits t-2.
    let joined = a.send(join_request("g", ""), 3).await.unwrap();
    assert_eq!(joined.error_code, 0, "JoinGroup");
    let (generation, m) = (joined.generation_id, joined.member_id.to_string());
    let synced = a
        .send(
            sync_request("g", generation, &m, "t", &[(m.as_str(), &[1][..])]),
            3,
        )
        .await
        .unwrap();
    assert_eq!(synced.error_code, 0, "SyncGroup");
    a.send(member_commit_request("g", generation, &m, "t", 2, 5), 8)
        .await
        .unwrap();
    // stale-generation-commit: a second member joins (its JoinGroup waits), m rejoins, and m
    // then commits in the generation before.
    let (rejoined, _) = tokio::join!(
        async {
            cluster
                .wait_for(
                    |e| e.is("JoinGroup") && e.response.is_none(),
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            a.send(join_request("g", &m), 3).await.unwrap()
        },
        b.send(join_request("g", ""), 3)
    );
    assert_eq!(rejoined.generation_id, generation + 1, "the rebalance");
    a.send(member_commit_request("g", generation, &m, "t", 1, 6), 8)
        .await
        .unwrap();
    // The sequence checks, one partition each (producer 7): `(epoch, first, count)` batches.
    let cases: [(i32, &[Batch]); 5] = [
        (2, &[(0, 0, 5), (0, 7, 1)]),  // sequence-gap
        (3, &[(0, 10, 5), (0, 0, 5)]), // sequence-reorder
        (4, &[(0, 0, 5), (0, 2, 5)]),  // sequence-overlap
        (5, &[(0, 0, 5), (1, 3, 1)]),  // epoch-not-reset
        (6, &[(1, 0, 5), (0, 5, 1)]),  // epoch-regression
    ];
    for (partition, batches) in cases {
        for &(epoch, first, count) in batches {
            a.send(
                idempotent_produce("t", partition, 7, epoch, first, count),
                9,
            )
            .await
            .unwrap();
        }
    }
    // sequence-reused: producer 9 sends other records under the sequence of a batch stored,
    // and is answered as for a retry (NONE, the first batch's offset).
    for value in [&b"first"[..], b"second"] {
        let answer = a
            .send(idempotent_produce_values("t", 0, 9, 0, 0, &[value]), 9)
            .await
            .unwrap();
        let p = &answer.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (0, 0),
            "both answered offset 0"
        );
    }
    // inflight-exceeded (at a limit of 2): three batches of producer 8 pipelined on one
    // connection, each held 100 ms by a rule taken out of force afterwards.
    let hold = cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .partition(7)
                .delay(Duration::from_millis(100)),
        )
        .unwrap();
    let sends = (0..3).map(|i| b.send(idempotent_produce("t", 7, 8, 0, i, 1), 9));
    for answer in futures::future::join_all(sends).await {
        assert_eq!(
            answer.unwrap().responses[0].partition_responses[0].error_code,
            0
        );
    }
    assert!(hold.remove(), "the rule was in force");
    // stuck-client (at a limit of 1): a commit refused NOT_COORDINATOR, sent twice more
    // without a FindCoordinator.
    let moved = cluster
        .add_rule(
            Rule::on(ApiKey::OffsetCommit)
                .group("moved")
                .error(ResponseError::NotCoordinator),
        )
        .unwrap();
    for offset in [1, 2, 3] {
        let answer = a
            .send(commit_request("moved", "t", offset), 8)
            .await
            .unwrap();
        assert_eq!(
            answer.topics[0].partitions[0].error_code, 16,
            "NOT_COORDINATOR"
        );
    }
    assert!(moved.remove(), "the rule was in force");
    // reorder-on-retry: on t-8, a batch refused with NOT_LEADER_OR_FOLLOWER, a later one
    // stored, then the refused records (same timestamps) stored again.
    cluster
        .add_rule(
            Rule::on(ApiKey::Produce)
                .partition(8)
                .nth(1)
                .error(kmock::ResponseError::NotLeaderOrFollower),
        )
        .unwrap();
    let stamped = |from: i64, n: i64| -> Vec<_> {
        (from..from + n)
            .map(|i| kafka_protocol::records::Record {
                // In the past: `message.timestamp.after.max.ms` refuses more than an hour ahead.
                timestamp: 1_700_000_000_000 + i,
                ..kmock_client::record(b"k", b"v")
            })
            .collect()
    };
    for (from, n, expected) in [(0, 3, 6), (3, 2, 0), (0, 3, 0)] {
        let answer = a.produce("t", 8, &stamped(from, n), -1).await.unwrap();
        assert_eq!(
            answer.responses[0].partition_responses[0].error_code,
            expected
        );
    }
    (cluster, api)
}

/// `(kind, key)` of each violation of `report`, sorted.
fn named(report: &Report) -> Vec<(String, String)> {
    let mut named: Vec<_> = report
        .violations
        .iter()
        .map(|v| (v.kind.clone(), v.key.clone()))
        .collect();
    named.sort();
    named
}

/// `kmock check` (offline, over the JSON Lines file) and `POST /check` (in process, with the
/// logs) name the same violations, one of each journal check, with the same options; with its
/// default in-flight limit (5) `kmock check` does not name the three requests outstanding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_journal_check_is_named_alike_by_kmock_check_and_post_check() {
    let file = JournalFile::new("every-check");
    let (cluster, api) = a_journal_with_every_violation(&file).await;

    let (code, stdout, stderr) = kmock_check(&[
        file.path(),
        "--format",
        "json",
        "--max-in-flight",
        "2",
        "--stuck-after",
        "1",
        // The stuck client never recovers: named whatever the window.
        "--stuck-for",
        "1h",
    ]);
    assert_eq!(code, 1, "stdout: {stdout}\nstderr: {stderr}");
    let offline: Report = serde_json::from_str(&stdout).unwrap();
    let kinds: BTreeSet<&str> = offline.violations.iter().map(|v| v.kind.as_str()).collect();
    assert_eq!(
        kinds,
        JOURNAL_KINDS.into_iter().collect(),
        "one violation of each journal check:\n{offline}"
    );
    assert_eq!(offline.violations.len(), JOURNAL_KINDS.len(), "{offline}");
    // Without the logs, kmock check reads duplicate-write and lost-write from the answers.
    for log_kind in LOG_KINDS {
        let skipped = offline.skipped.iter().any(|s| s.starts_with(log_kind));
        assert_eq!(
            skipped,
            log_kind == "out-of-order-write",
            "kmock check skipped {log_kind}? {:?}",
            offline.skipped
        );
        assert!(
            offline.checks.iter().any(|c| c == log_kind),
            "{log_kind} listed"
        );
    }

    let answer = http(
        "POST",
        &format!("{}/check", api.url()),
        Some((
            "application/json",
            r#"{"max_in_flight": 2, "stuck_after": 1, "stuck_for": "1h"}"#,
        )),
    );
    let over_http: Report = serde_json::from_value(answer.expect(200)).unwrap();
    assert_eq!(named(&over_http), named(&offline), "{over_http}");
    assert_eq!(
        over_http.violations, offline.violations,
        "the same entries and messages"
    );
    for log_kind in LOG_KINDS {
        assert!(
            over_http.checks.iter().any(|c| c == log_kind),
            "POST /check ran {log_kind}: {:?}",
            over_http.checks
        );
    }

    // The default limits, 5 in flight and 10 retries, let three requests in flight and two
    // retries through.
    let (_, stdout, _) = kmock_check(&[file.path(), "--format", "json"]);
    let default_limit: Report = serde_json::from_str(&stdout).unwrap();
    let kinds: BTreeSet<&str> = default_limit
        .violations
        .iter()
        .map(|v| v.kind.as_str())
        .collect();
    let mut expected: BTreeSet<&str> = JOURNAL_KINDS.into_iter().collect();
    expected.remove("inflight-exceeded");
    expected.remove("stuck-client");
    assert_eq!(kinds, expected, "{default_limit}");

    // Each check alone, through both, names only its own violation.
    for kind in JOURNAL_KINDS {
        let (code, stdout, _) = kmock_check(&[
            file.path(),
            "--format",
            "json",
            "--max-in-flight",
            "2",
            "--stuck-after",
            "1",
            "--check",
            kind,
        ]);
        // The stale-generation commit was refused (ILLEGAL_GENERATION): a warning, exit 0.
        let expected = if kind == "stale-generation-commit" {
            0
        } else {
            1
        };
        assert_eq!(code, expected, "{kind}: {stdout}");
        let alone: Report = serde_json::from_str(&stdout).unwrap();
        let body = format!(r#"{{"checks": ["{kind}"], "max_in_flight": 2, "stuck_after": 1}}"#);
        let answer = http(
            "POST",
            &format!("{}/check", api.url()),
            Some(("application/json", &body)),
        );
        let alone_http: Report = serde_json::from_value(answer.expect(200)).unwrap();
        for report in [&alone, &alone_http] {
            let kinds: Vec<&str> = report.violations.iter().map(|v| v.kind.as_str()).collect();
            assert_eq!(kinds, [kind], "{kind} alone:\n{report}");
        }
    }
    api.shutdown().await;
    cluster.shutdown().await;
}

/// `--commit-scope group` compares every commit to the group, as `POST /check`'s
/// `commit_scope` does: t-0 committed 12 by member x, then 11 by member y (both from outside
/// group management, stored while the group is Empty) moved the group's offset back but
/// neither member's own.
#[tokio::test]
async fn commit_scope_group_names_a_regression_across_members_that_member_scope_does_not() {
    let file = JournalFile::new("commit-scope");
    let cluster = Cluster::builder()
        .topic("t", 1)
        .journal_jsonl(std::fs::File::create(file.path()).unwrap())
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    for (member, offset) in [("x", 12), ("y", 11)] {
        let request = member_commit_request("billing", -1, member, "t", 0, offset);
        let answer = client.send(request, 8).await.unwrap();
        assert_eq!(
            answer.topics[0].partitions[0].error_code, 0,
            "{member}'s commit of {offset} is stored"
        );
    }
    cluster.shutdown().await;

    for scope in [None, Some("member")] {
        let mut args = vec![file.path(), "--check", "offset-commit-regression"];
        args.extend(scope.iter().flat_map(|s| ["--commit-scope", *s]));
        let (code, stdout, stderr) = kmock_check(&args);
        assert_eq!(
            (code, stdout.as_str()),
            (0, "clean: 1 checks, no violation\n"),
            "scope {scope:?}; stderr: {stderr}"
        );
    }
    let (code, stdout, stderr) = kmock_check(&[
        file.path(),
        "--check",
        "offset-commit-regression",
        "--commit-scope",
        "group",
    ]);
    assert_eq!(
        (code, stdout.as_str()),
        (
            1,
            "offset-commit-regression [billing/t-0]: OffsetCommit seq 2 (conn 1) set billing/t-0 \
             to 11 after seq 1 (conn 1) had set it to 12: the committed offset moved backwards\n\
             1 violation(s)\n"
        ),
        "stderr: {stderr}"
    );
    let (code, _, stderr) = kmock_check(&[file.path(), "--commit-scope", "everyone"]);
    assert_eq!(code, 2, "an unknown scope is refused: {stderr}");
    assert!(
        stderr.contains("member") && stderr.contains("group"),
        "{stderr}"
    );
}
