//! The `kmock serve` binary with kcat in balanced-consumer mode (`-G`, librdkafka's consumer
//! groups): one consumer reads everything and commits, the next in the same group reads
//! nothing, and SIGTERM still stops the server with status 0.

mod common;

use std::time::Instant;

use common::{at_bootstrap, kcat_with, JournalFile, Server};

const LINES: usize = 300;

/// The group requests of the journal, one line each, for failure messages (tolerant of a
/// journal still being written).
fn group_traffic(journal: &JournalFile) -> String {
    let Ok(text) = std::fs::read_to_string(journal.path()) else {
        return "  (no journal)".to_owned();
    };
    let entries = match kmock::journal::read_jsonl(text.as_bytes()) {
        Ok(entries) => entries,
        Err(e) => return format!("  (journal unreadable: {e})"),
    };
    let group_apis = [
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "OffsetCommit",
        "OffsetFetch",
    ];
    entries
        .iter()
        .filter(|e| group_apis.iter().any(|api| e.is(api)))
        .map(|e| {
            format!(
                "  seq {} broker {} conn {} {} v{} -> {:?}",
                e.seq,
                e.broker,
                e.conn,
                e.api.as_deref().unwrap_or("?"),
                e.version.unwrap_or(-1),
                e.response.as_ref().map(|r| &r.error_codes)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_kcat_group_consumer_commits_what_it_read_and_the_next_one_in_the_group_reads_nothing() {
    let journal = JournalFile::new("kcat-groups");
    let mut server = Server::start(&[
        "--port",
        "0",
        "--brokers",
        "3",
        "--topic",
        "orders:3",
        "--journal",
        journal.path(),
    ]);
    let bootstrap = server.bootstrap.clone();
    let kcat = |args: &[&str], stdin: &str| {
        let args = at_bootstrap(&bootstrap, args);
        kcat_with(&args, stdin, || {
            format!("group requests:\n{}", group_traffic(&journal))
        })
    };
    let sent: Vec<String> = (0..LINES)
        .map(|i| format!("key-{}:line {i:03} of {LINES}", i % 10))
        .collect();
    kcat(&["-P", "-t", "orders", "-K:"], &(sent.join("\n") + "\n"));

    // The first member of group grp: everything from the beginning, then exit at the end.
    let started = Instant::now();
    let out = kcat(
        &[
            "-G",
            "grp",
            "orders",
            "-e",
            "-q",
            "-o",
            "beginning",
            "-f",
            "%k:%s\n",
        ],
        "",
    );
    let first_took = started.elapsed();
    let mut got: Vec<&str> = out.lines().collect();
    got.sort_unstable();
    let mut expected: Vec<&str> = sent.iter().map(String::as_str).collect();
    expected.sort_unstable();
    let missing: Vec<&&str> = expected
        .iter()
        .filter(|s| got.binary_search(s).is_err())
        .collect();
    assert!(
        got == expected,
        "kcat -G grp read {} lines, expected the {LINES} produced (as a multiset); missing \
         {missing:?}\ngroup requests:\n{}",
        got.len(),
        group_traffic(&journal)
    );

    // The next member of grp starts from the offsets the first committed when it closed. With
    // auto.offset.reset=earliest it would read everything again if there were none.
    let started = Instant::now();
    let again = kcat(
        &[
            "-G",
            "grp",
            "orders",
            "-e",
            "-q",
            "-X",
            "auto.offset.reset=earliest",
            "-f",
            "%k:%s\n",
        ],
        "",
    );
    let second_took = started.elapsed();
    assert!(
        again.is_empty(),
        "a second kcat -G grp read {} lines, expected none (the first committed its offsets): \
         {:?}\ngroup requests:\n{}",
        again.lines().count(),
        again.lines().take(5).collect::<Vec<_>>(),
        group_traffic(&journal)
    );
    eprintln!(
        "kcat -G read {LINES} lines in {first_took:?}; the next one read none in {second_took:?}"
    );

    server.stop();
}
