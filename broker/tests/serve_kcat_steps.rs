//! kcat (librdkafka's command-line client, Debian's package) against `kmock serve`, the steps
//! issue 19 asks of every client: metadata as JSON (`-L -J`), 10,000 keyed messages produced
//! with acks=all and consumed back in per-partition order, and a `-G` group consumer that
//! resumes from what the one before it committed (exactly the new messages, none re-delivered),
//! a transactional produce read back by a read_committed reader; and the journal's checks
//! clean. kcat has no admin calls and joins a group one process at a time with `-e`, so the
//! two-member group is left to the library clients.

mod common;

use std::collections::BTreeMap;

use kmock::{Checks, Entry};

use common::{at_bootstrap, kcat_within, JournalFile, Server};

/// Hang guard for each kcat run: generous, it only catches a run that never ends.
const KCAT_S: u32 = 180;

/// `count` lines `key-{i % 100}:{i}` from `start`: each key's values increase in send order.
fn keyed(count: usize, start: usize) -> Vec<(String, usize)> {
    (start..start + count)
        .map(|i| (format!("key-{}", i % 100), i))
        .collect()
}

/// One consumed message, from kcat's `-f '%p %o %k %s\n'`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Consumed {
    partition: i32,
    offset: i64,
    key: String,
    value: usize,
}

fn parse(out: &str) -> Vec<Consumed> {
    out.lines()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let parsed = (f.len() == 4).then(|| {
                Some(Consumed {
                    partition: f[0].parse().ok()?,
                    offset: f[1].parse().ok()?,
                    key: f[2].to_owned(),
                    value: f[3].parse().ok()?,
                })
            });
            parsed
                .flatten()
                .unwrap_or_else(|| panic!("unreadable kcat line {line:?}"))
        })
        .collect()
}

/// Every sent message arrived exactly once; within each partition the offsets continue from
/// `from` (the partition's first offset read, 0 when absent) with no gap or repeat, and each
/// key stayed on one partition with its values in send order.
fn assert_in_order(got: &[Consumed], sent: &[(String, usize)], from: &BTreeMap<i32, i64>) {
    let mut received: Vec<(&str, usize)> = got.iter().map(|m| (m.key.as_str(), m.value)).collect();
    received.sort_unstable();
    let mut expected: Vec<(&str, usize)> = sent.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    expected.sort_unstable();
    assert!(
        received == expected,
        "{} received, {} sent, or different ones",
        got.len(),
        sent.len()
    );
    let mut next = from.clone();
    let mut partition_of = BTreeMap::new();
    let mut last_value = BTreeMap::new();
    for m in got {
        let expected_offset = next.entry(m.partition).or_insert(0);
        assert_eq!(m.offset, *expected_offset, "offset gap or repeat at {m:?}");
        *expected_offset += 1;
        let p = *partition_of.entry(m.key.clone()).or_insert(m.partition);
        assert_eq!(p, m.partition, "{} moved partitions at {m:?}", m.key);
        let last = last_value.insert(m.key.clone(), m.value);
        assert!(last < Some(m.value), "{} out of order at {m:?}", m.key);
    }
}

/// The lines kcat -P -K: reads for `pairs`.
fn lines(pairs: &[(String, usize)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k}:{v}\n")).collect()
}

#[test]
fn kcat_lists_metadata_keeps_keyed_order_resumes_a_group_and_commits_a_transaction() {
    let journal = JournalFile::new("kcat-steps");
    let mut server = Server::start(&[
        "--port",
        "0",
        "--brokers",
        "3",
        "--topic",
        "orders:6",
        "--topic",
        "grouped:4",
        "--topic",
        "txn:3",
        "--journal",
        journal.path(),
    ]);
    let bootstrap = server.bootstrap.clone();
    let kcat = |args: &[&str], stdin: &str| {
        let args = at_bootstrap(&bootstrap, args);
        kcat_within(KCAT_S, &args, stdin, String::new)
    };

    // Metadata as JSON: three brokers, every partition led by one of them, three replicas.
    let meta: serde_json::Value = serde_json::from_str(&kcat(&["-L", "-J"], "")).unwrap();
    let mut brokers: Vec<i64> = meta["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_i64().unwrap())
        .collect();
    brokers.sort_unstable();
    assert_eq!(brokers, [1, 2, 3], "{meta}");
    let topics: BTreeMap<&str, &serde_json::Value> = meta["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["topic"].as_str().unwrap(), &t["partitions"]))
        .collect();
    assert_eq!(
        topics.keys().copied().collect::<Vec<_>>(),
        ["grouped", "orders", "txn"]
    );
    for (topic, count) in [("orders", 6), ("grouped", 4), ("txn", 3)] {
        let partitions = topics[topic].as_array().unwrap();
        assert_eq!(partitions.len(), count, "{topic}: {meta}");
        for p in partitions {
            assert!(brokers.contains(&p["leader"].as_i64().unwrap()), "{p}");
            assert_eq!(p["replicas"].as_array().unwrap().len(), 3, "{p}");
        }
    }

    // 10,000 keyed messages, acks=all, read back from the beginning.
    let sent = keyed(10_000, 0);
    kcat(
        &["-P", "-t", "orders", "-K:", "-X", "acks=all"],
        &lines(&sent),
    );
    let format = ["-f", "%p %o %k %s\n"];
    let read = |args: &[&str]| parse(&kcat(&[args, &format[..]].concat(), ""));
    let got = read(&["-C", "-t", "orders", "-e", "-q", "-o", "beginning"]);
    assert_in_order(&got, &sent, &BTreeMap::new());
    let used: std::collections::BTreeSet<i32> = got.iter().map(|m| m.partition).collect();
    assert_eq!(used.len(), 6, "100 keys spread over every partition");

    // A -G member reads the first 1,000 and commits at its end; the next member of the group
    // resumes there: exactly the 500 produced since, each partition from the committed offset.
    let first = keyed(1_000, 0);
    kcat(
        &["-P", "-t", "grouped", "-K:", "-X", "acks=all"],
        &lines(&first),
    );
    let group = ["-G", "resuming", "grouped", "-e", "-q"];
    let got_first = read(&[&group[..], &["-X", "auto.offset.reset=earliest"]].concat());
    assert_in_order(&got_first, &first, &BTreeMap::new());
    let mut ends: BTreeMap<i32, i64> = BTreeMap::new();
    for m in &got_first {
        ends.insert(m.partition, m.offset + 1);
    }
    let second = keyed(500, 1_000);
    kcat(
        &["-P", "-t", "grouped", "-K:", "-X", "acks=all"],
        &lines(&second),
    );
    let got_second = read(&[&group[..], &["-X", "auto.offset.reset=earliest"]].concat());
    assert_in_order(&got_second, &second, &ends);

    // A transactional producer (kcat sends all its input in one transaction and commits it),
    // read back by a read_committed reader: the records, with offsets skipping each
    // partition's commit marker.
    let txn = keyed(300, 0);
    let args = ["-P", "-t", "txn", "-K:", "-X", "transactional.id=kcat-txn"];
    kcat(&args, &lines(&txn));
    let committed = ["-X", "isolation.level=read_committed"];
    let got_txn = read(
        &[
            &["-C", "-t", "txn", "-e", "-q", "-o", "beginning"][..],
            &committed,
        ]
        .concat(),
    );
    assert_in_order(&got_txn, &txn, &BTreeMap::new());

    server.stop();
    let entries = journal.read();
    let of = |api: &str| -> Vec<&Entry> { entries.iter().filter(|e| e.is(api)).collect() };
    let produces = of("Produce");
    assert!(!produces.is_empty());
    for e in &produces {
        let json = serde_json::to_value(e).unwrap();
        assert_eq!(json["request"]["produce"]["acks"], -1, "{json}");
        assert_eq!(
            json["response"]["error_codes"],
            serde_json::json!([]),
            "{json}"
        );
    }
    let commits: Vec<serde_json::Value> = of("OffsetCommit")
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert!(commits.len() >= 2, "each member commits: {commits:?}");
    assert!(commits
        .iter()
        .all(|c| c["response"]["error_codes"] == serde_json::json!([])));
    let ends: Vec<serde_json::Value> = of("EndTxn")
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["request"]["end_txn"]["committed"], true, "{ends:?}");
    assert_eq!(ends[0]["response"]["error_codes"], serde_json::json!([]));
    let report = kmock::check::run(&entries, &Checks::default());
    assert!(report.is_clean(), "{report}");
}
