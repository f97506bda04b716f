//! The transaction checks over hand-built journals: `read-committed-saw-aborted`'s violating
//! side (kmock never answers so, so no wire traffic can show it) and the edges of the others.

use serde_json::{json, Value};

use super::{run_journal, Checks, Severity};
use crate::journal::Entry;

/// An entry `seq` on conn `conn` (arrival and answer at `seq` µs) of `api` with `request`.
fn entry(seq: u64, conn: u64, api: &str, request: Value) -> Entry {
    serde_json::from_value(json!({
        "seq": seq, "at_us": seq * 10, "broker": 1, "conn": conn, "peer": "127.0.0.1:1",
        "client_id": null, "api": api, "version": 3, "correlation_id": seq,
        "request": request, "bad_request": null,
        "response": {"at_us": seq * 10 + 1, "error_codes": []}, "faults": []
    }))
    .unwrap()
}

/// A transactional Produce of `count` records from producer 7 epoch 0 to t-0, stored at `offset`.
fn produce(seq: u64, offset: i64, count: i32) -> Entry {
    entry(
        seq,
        1,
        "Produce",
        json!({"produce": {"transactional_id": "tx", "acks": -1,
        "timeout_ms": 1000, "partitions": [{"topic": "t", "partition": 0, "producer_id": 7,
            "producer_epoch": 0, "base_sequence": 0, "record_count": count,
            "base_offset": offset, "error_code": 0}]}}),
    )
}

/// An EndTxn of producer 7 epoch 0 answered NONE.
fn end_txn(seq: u64, committed: bool) -> Entry {
    entry(
        seq,
        2,
        "EndTxn",
        json!({"end_txn": {"transactional_id": "tx", "producer_id": 7,
        "producer_epoch": 0, "committed": committed, "error_code": 0}}),
    )
}

/// A read_committed Fetch of t-0 from `from` answered up to `last`, listing `aborted`
/// (producer id, first offset).
fn fetch(seq: u64, from: i64, last: i64, aborted: &[(i64, i64)]) -> Entry {
    let aborted: Vec<Value> = aborted
        .iter()
        .map(|(p, f)| json!({"producer_id": p, "first_offset": f}))
        .collect();
    entry(
        seq,
        3,
        "Fetch",
        json!({"fetch": {"isolation_level": 1, "max_wait_ms": 500,
        "min_bytes": 1, "max_bytes": 1048576, "partitions": [{"topic": "t", "partition": 0,
            "fetch_offset": from, "high_watermark": last + 2, "records_bytes": 100,
            "last_offset": last, "aborted_transactions": aborted, "error_code": 0}]}}),
    )
}

fn kinds(entries: &[Entry]) -> Vec<String> {
    let report = run_journal(entries, &Checks::default());
    report.violations.iter().map(|v| v.kind.clone()).collect()
}

#[test]
fn aborted_records_answered_without_their_listing_are_read_committed_saw_aborted() {
    // Offsets 0..=2 aborted, their marker at 3; the answer holds 0..=3 and lists nothing.
    let journal = [produce(1, 0, 3), end_txn(2, false), fetch(3, 0, 3, &[])];
    let report = run_journal(&journal, &Checks::default());
    assert_eq!(kinds(&journal), ["read-committed-saw-aborted"], "{report}");
    let v = &report.violations[0];
    assert_eq!(v.key, "t-0");
    let seqs: Vec<u64> = v.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert!(v.message.contains("had aborted"), "{}", v.message);
}

#[test]
fn aborted_records_listed_in_the_answer_or_committed_ones_are_clean() {
    let listed = [
        produce(1, 0, 3),
        end_txn(2, false),
        fetch(3, 0, 3, &[(7, 0)]),
    ];
    assert!(kinds(&listed).is_empty());
    let committed = [produce(1, 0, 3), end_txn(2, true), fetch(3, 0, 3, &[])];
    assert!(kinds(&committed).is_empty());
    // The answer starts past the aborted records: they were not answered.
    let past = [produce(1, 0, 3), end_txn(2, false), fetch(3, 4, 6, &[])];
    assert!(kinds(&past).is_empty());
}

#[test]
fn records_answered_while_their_transaction_was_open_then_aborted_are_named() {
    let journal = [produce(1, 0, 3), fetch(2, 0, 2, &[]), end_txn(3, false)];
    let report = run_journal(&journal, &Checks::default());
    assert_eq!(kinds(&journal), ["read-committed-saw-aborted"], "{report}");
    assert!(
        report.violations[0].message.contains("still open"),
        "{report}"
    );
}

#[test]
fn a_fetch_without_the_answered_fields_of_newer_journals_is_not_judged() {
    let mut old = fetch(3, 0, 3, &[]);
    if let Some(crate::journal::RequestSummary::Fetch(f)) = &mut old.request {
        f.partitions[0].last_offset = None;
        f.partitions[0].aborted_transactions = None;
    }
    assert!(kinds(&[produce(1, 0, 3), end_txn(2, false), old]).is_empty());
}

#[test]
fn an_end_txn_arriving_after_the_answer_began_to_be_sent_is_clean() {
    // The Produce's answer was stamped at 15 µs (after the write), but began to be sent at
    // 11 µs, before the EndTxn arrived at 12 µs: the client may have read it.
    let mut p = produce(1, 0, 1);
    let r = p.response.as_mut().unwrap();
    r.at_us = 15;
    r.sending_us = Some(11);
    let mut end = end_txn(2, true);
    end.at_us = 12;
    assert!(kinds(&[p.clone(), end.clone()]).is_empty());
    p.response.as_mut().unwrap().sending_us = Some(13);
    assert_eq!(
        kinds(&[p.clone(), end.clone()]),
        ["end-txn-with-produce-in-flight"]
    );
    let report = run_journal(&[p.clone(), end.clone()], &Checks::default());
    assert_eq!(
        report.violations[0].severity,
        Severity::Violation,
        "{report}"
    );
    // Never answered: the client may have given up on it (a timeout, then an abort), so only
    // a warning.
    p.response = None;
    let report = run_journal(&[p, end], &Checks::default());
    assert_eq!(report.violations[0].severity, Severity::Warning, "{report}");
}
