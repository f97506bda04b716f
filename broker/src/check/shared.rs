//! What several checks read the same way: error names, whether an unanswered request was
//! applied, an applied EndTxn, and distances in the wrapping producer sequence space.

use crate::journal::Entry;

/// Kafka's name of an error code, with the code: `NOT_COORDINATOR (16)`; `error N` for a
/// code Kafka does not define.
pub(crate) fn error_name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        Some(e) => format!("{} ({code})", crate::codec::screaming(&format!("{e:?}"))),
        None => format!("error {code}"),
    }
}

/// Whether a request the journal holds without an answer was nevertheless applied: a fault
/// that applies and then drops the answer fired on it.
pub(crate) fn applied_unanswered(entry: &Entry) -> bool {
    entry
        .faults
        .iter()
        .any(|f| f.ends_with("disconnect_after_apply") || f.ends_with("silence"))
}

/// The EndTxn of `entry` if the broker applied it: answered NONE, or applied before a fault
/// dropped the answer.
pub(crate) fn ended_txn(entry: &Entry) -> Option<&crate::journal::summary::EndTxnSummary> {
    match &entry.request {
        Some(crate::journal::RequestSummary::EndTxn(end)) => match end.error_code {
            Some(code) => (code == 0).then_some(end),
            None => applied_unanswered(entry).then_some(end),
        },
        _ => None,
    }
}

/// Producer sequences live in 0..2^31 and wrap from 2^31−1 to 0.
pub(crate) const SEQUENCE_SPACE: i64 = 1 << 31;

/// How far `to` is ahead of `from` in the wrapping sequence space, within ±2^30.
pub(crate) fn sequence_ahead(from: i64, to: i64) -> i64 {
    let d = (to - from).rem_euclid(SEQUENCE_SPACE);
    if d >= SEQUENCE_SPACE / 2 {
        d - SEQUENCE_SPACE
    } else {
        d
    }
}
