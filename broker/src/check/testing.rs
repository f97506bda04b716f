//! Journal entries for the checks' unit tests.

use crate::journal::Entry;

/// A Produce entry `seq` on conn 1 of one batch to t-0 from producer `pid` (epoch 0):
/// `(base sequence, record count)`, answered NONE at `offset`, with one digest per
/// record, all `digest`.
pub fn produce(seq: u64, pid: i64, batch: (i32, i32), offset: i64, digest: u64) -> Entry {
    let (base_sequence, record_count) = batch;
    let digests: Vec<String> = (0..record_count)
        .map(|_| format!("{digest:016x}"))
        .collect();
    serde_json::from_value(serde_json::json!({
        "seq": seq, "at_us": seq, "broker": 1, "conn": 1, "peer": "127.0.0.1:1",
        "client_id": null, "api": "Produce", "version": 9, "correlation_id": seq,
        "request": {"produce": {"transactional_id": null, "acks": -1, "timeout_ms": 1000,
            "partitions": [{"topic": "t", "partition": 0, "producer_id": pid,
                "producer_epoch": 0, "base_sequence": base_sequence,
                "record_count": record_count, "base_offset": offset, "error_code": 0,
                "digests": digests}]}},
        "bad_request": null, "response": {"at_us": seq, "error_codes": []}, "faults": []
    }))
    .unwrap()
}
