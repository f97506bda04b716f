//! The journal's bounds against hostile traffic: a bound in bytes that evicts the oldest
//! entries, request summaries truncated past `MAX_SUMMARY_ITEMS` partitions (and said so by the
//! checks), and control API readers that page through the journal instead of copying it, so
//! that one that does not read is cut off with a last line saying why.

use std::io::BufRead;
use std::time::Duration;

use kmock::journal::summary::MAX_SUMMARY_ITEMS;
use kmock::journal::RequestSummary;
use kmock::{Checks, Cluster};
use kmock_client::Client;
use serde_json::Value;

mod common;

use common::{open_stream, wide_commit_request, Server, SharedBuffer};

/// Generous hang guard for waiting on the journal, not a speed bound.
const HANG_GUARD: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_over_its_bytes_evicts_the_oldest_entries_and_counts_them() {
    let cluster = Cluster::builder()
        .topic("orders", 1)
        .journal_max_bytes(16 * 1024)
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.bootstrap()).await.unwrap();
    for i in 0..200 {
        let value = format!("value-{i}");
        let records = [kmock_client::record(b"key", value.as_bytes())];
        let answer = client.produce("orders", 0, &records, -1).await.unwrap();
        assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    }
    // The broker completes an entry just after writing its answer, and handles a connection's
    // requests in order: once this one is complete, every Produce is.
    client.metadata(Some(&["orders"])).await.unwrap();
    let last = cluster
        .wait_for(|e| e.is("Metadata") && e.response.is_some(), HANG_GUARD)
        .await
        .unwrap();

    let journal = cluster.journal();
    let seqs: Vec<u64> = journal.entries().iter().map(|e| e.seq).collect();
    assert!(
        !seqs.is_empty() && seqs.len() < 200,
        "16 KiB keeps some of 200 Produce entries, not all: {seqs:?}"
    );
    // The newest are kept, without a gap; every older one was evicted and counted.
    let newest = *seqs.last().unwrap();
    assert_eq!(newest, last.seq);
    let first = newest + 1 - seqs.len() as u64;
    assert_eq!(seqs, (first..=newest).collect::<Vec<_>>());
    assert_eq!(journal.evicted(), first - 1);
    let report = cluster.check(&Checks::default());
    assert!(
        report.skipped.iter().any(|s| s.contains(&format!(
            "{} journal entries were evicted (journal_capacity, journal_max_bytes)",
            first - 1
        ))),
        "the report says the checks saw only the rest: {:?}",
        report.skipped
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_offset_commit_keeps_its_first_partitions_and_the_check_report_says_so() {
    let sink = SharedBuffer::default();
    let cluster = Cluster::builder()
        .topic("orders", 1)
        .journal_jsonl(sink.clone())
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.bootstrap()).await.unwrap();
    let bound = MAX_SUMMARY_ITEMS as i32;
    // As many partitions as the bound: kept whole. Five more: the five last are dropped.
    for partitions in [bound, bound + 5] {
        let request = wide_commit_request("billing", "orders", partitions, 7);
        let answer = client.send(request, 8).await.unwrap();
        assert_eq!(answer.topics[0].partitions.len(), partitions as usize);
    }
    // The first was complete before the second was handled (one connection, in order).
    let answered = |e: &kmock::Entry| e.is("OffsetCommit") && e.response.is_some();
    cluster
        .wait_for(|e| answered(e) && e.dropped() > 0, HANG_GUARD)
        .await
        .unwrap();
    let commits: Vec<kmock::Entry> = cluster.journal().api("OffsetCommit").cloned().collect();
    assert_eq!(commits.len(), 2);
    assert!(commits.iter().all(answered));
    let kept = |e: &kmock::Entry| -> Vec<i32> {
        match &e.request {
            Some(RequestSummary::OffsetCommit(s)) => {
                s.partitions.iter().map(|p| p.partition).collect()
            }
            other => panic!("an OffsetCommit summary expected: {other:?}"),
        }
    };
    assert_eq!(
        (commits[0].dropped(), kept(&commits[0]).len()),
        (0, bound as usize)
    );
    assert_eq!(commits[1].dropped(), 5);
    let second: Vec<i32> = kept(&commits[1]);
    assert_eq!(
        second,
        (0..bound).collect::<Vec<_>>(),
        "the first ones are kept"
    );

    // The same marker in JSON Lines; none on the commit kept whole.
    let written = sink.0.lock().unwrap().clone();
    let lines: Vec<Value> = written
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .filter(|v: &Value| v["api"] == "OffsetCommit")
        .collect();
    let markers: Vec<&Value> = lines
        .iter()
        .map(|v| &v["request"]["offset_commit"]["dropped_partitions"])
        .collect();
    assert_eq!(
        markers,
        [&Value::Null, &Value::from(5)],
        "JSON Lines markers"
    );

    let report = cluster.check(&Checks::only(["offset-commit-regression"]).unwrap());
    let expected = format!(
        "1 journal entries were truncated to their first {bound} partitions (OffsetCommit seq {} dropped 5 partitions)",
        commits[1].seq
    );
    assert!(
        report.skipped.iter().any(|s| s.starts_with(&expected)),
        "the report says which entry was judged truncated: {:?}",
        report.skipped
    );
    // A check that reads no OffsetCommit has nothing to say about it.
    let sequences = cluster.check(&Checks::only(["sequence-gap"]).unwrap());
    assert!(sequences.skipped.is_empty(), "{:?}", sequences.skipped);
}

/// Sends `count` OffsetCommits of `partitions` partitions each, waiting for each answer.
async fn wide_commits(server: &Server, count: usize, partitions: i32) {
    let client = Client::connect(server.addrs()[0]).await.unwrap();
    for offset in 0..count as i64 {
        let request = wide_commit_request("billing", "orders", partitions, offset);
        let answer = client.send(request, 8).await.unwrap();
        assert_eq!(answer.topics[0].partitions.len(), partitions as usize);
    }
}

/// Reads a JSON Lines body to its end.
fn read_lines(mut out: impl BufRead) -> Vec<Value> {
    let mut body = String::new();
    out.read_to_string(&mut body).unwrap();
    body.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?}: {e}")))
        .collect()
}

// About 6 MB of heap and 4 MB of JSON a commit: 30 of them are far more than the journals below
// keep, and than the connection's buffers (sockets, curl, its pipe) absorb from a reader that
// does not read.
const COMMITS: usize = 30;
const PARTITIONS: i32 = 40_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_does_not_read_is_closed_with_a_last_line_saying_why() {
    let server = Server::start(&[
        "--port",
        "0",
        "--topic",
        "orders:1",
        "--journal-max-bytes",
        "16MiB",
    ]);
    // Replays from the start, then live; its output is left unread while the commits come.
    let (mut stalled, out) = open_stream(&server, "?after=0");
    wide_commits(&server, COMMITS, PARTITIONS).await;

    let lines = read_lines(out);
    let status = stalled.wait().unwrap();
    assert!(status.success(), "the server ended the stream: {status}");
    let (last, entries) = lines.split_last().expect("at least the last line");
    let error = last["error"].as_str().unwrap_or_else(|| panic!("{last}"));
    assert!(
        error.starts_with("this stream fell behind: at least ")
            && error.contains("left memory (journal_capacity, journal_max_bytes)"),
        "{error}"
    );
    let commits = entries
        .iter()
        .filter(|e| e["api"] == "OffsetCommit")
        .count();
    assert!(
        commits < COMMITS,
        "{commits} of {COMMITS} commits sent before"
    );

    // The server is well: the journal answers, with what memory holds, and a new stream reads.
    let kept = server.http("GET", "/journal?api=OffsetCommit", None);
    assert_eq!(kept.status, 200, "{}", kept.body);
    let kept = kept.lines();
    assert!(
        !kept.is_empty() && kept.len() < COMMITS,
        "{} kept",
        kept.len()
    );
    assert!(kept.iter().all(|e| e["api"] == "OffsetCommit"));
    let (mut fresh, out) = open_stream(&server, "?after=0&api=OffsetCommit&limit=1");
    let first = read_lines(out);
    assert!(fresh.wait().unwrap().success());
    assert_eq!(first, kept[..1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_answer_not_read_ends_with_the_seqs_it_lost() {
    let server = Server::start(&[
        "--port",
        "0",
        "--topic",
        "orders:1",
        "--journal-max-bytes",
        "64MiB",
    ]);
    // About 40 MB of JSON in memory when asked: more than the buffers absorb.
    wide_commits(&server, 10, PARTITIONS).await;
    // `GET /journal` with its body unread: curl -N stops reading once its pipe is full.
    let (mut stalled, out) = open_journal(&server);
    wide_commits(&server, COMMITS, PARTITIONS).await;

    let lines = read_lines(out);
    assert!(stalled.wait().unwrap().success());
    let (last, entries) = lines.split_last().expect("at least the last line");
    let error = last["error"].as_str().unwrap_or_else(|| panic!("{last}"));
    assert!(
        error.contains(
            "left memory (journal_capacity, journal_max_bytes) before this reader reached them"
        ),
        "{error}"
    );
    // Only entries of the journal as asked: the commits that came later are not in it.
    let commits = entries
        .iter()
        .filter(|e| e["api"] == "OffsetCommit")
        .count();
    assert!(commits < 10, "{commits} commits of the first 10 sent");
}

/// `curl -N control/journal`, once its headers have come; the body is left to read.
fn open_journal(
    server: &Server,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    let url = format!("{}/journal", server.control);
    let mut curl = std::process::Command::new(common::CURL)
        .args(["-sSN", "--max-time", "60", &url])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("curl starts");
    let out = std::io::BufReader::new(curl.stdout.take().expect("stdout is piped"));
    (curl, out)
}
