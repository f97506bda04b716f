//! Journal excerpts for failure messages: one line per entry, saying where it arrived, what it
//! asked and how it was answered.

use kmock::Entry;

/// The consumer-group APIs, for group excerpts.
pub const GROUP_APIS: &[&str] = &[
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "DescribeGroups",
    "ConsumerGroupHeartbeat",
];

/// One entry as `seq N +Tms broker B conn C "client" Api vV -> errors [..]` (or the cluster
/// operation it records).
pub fn line(e: &Entry) -> String {
    if let Some(op) = &e.operation {
        return format!("  seq {} +{}ms operation {op:?}", e.seq, e.at_us / 1_000);
    }
    format!(
        "  seq {} +{}ms broker {} conn {} {:?} {} v{} -> {}",
        e.seq,
        e.at_us / 1_000,
        e.broker,
        e.conn,
        e.client_id.as_deref().unwrap_or(""),
        e.api.as_deref().unwrap_or("?"),
        e.version.unwrap_or(-1),
        match (&e.response, &e.bad_request) {
            (_, Some(reason)) => format!("bad request: {reason}"),
            (None, None) => "unanswered".to_owned(),
            (Some(r), None) => format!(
                "errors {:?} after {}ms",
                r.error_codes,
                r.at_us.saturating_sub(e.at_us) / 1_000
            ),
        }
    )
}

/// `entries`, one [`line`] each.
pub fn excerpt<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> String {
    entries.into_iter().map(line).collect::<Vec<_>>().join("\n")
}

/// The group requests and cluster operations among `entries`, one [`line`] each.
pub fn group_excerpt<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> String {
    excerpt(
        entries
            .into_iter()
            .filter(|e| e.operation.is_some() || GROUP_APIS.iter().any(|api| e.is(api))),
    )
}

/// One idempotent Produce batch as `seq N conn C partition P epoch E sequences B..END: outcome,
/// faults [..]`, for produce-sequence excerpts.
pub fn batch_line(b: &kmock::journal::ProduceBatch) -> String {
    let outcome = match b.batch.error_code {
        Some(0) => format!("stored at offset {:?}", b.batch.base_offset),
        Some(code) => format!("refused with {}", super::err(code)),
        None => "unanswered".to_owned(),
    };
    format!(
        "  seq {} conn {} {}-{} producer {} epoch {} sequences {}..{}: {outcome}, faults {:?}",
        b.entry.seq,
        b.entry.conn,
        b.batch.topic,
        b.batch.partition,
        b.batch.producer_id,
        b.batch.producer_epoch,
        b.batch.base_sequence,
        b.batch.base_sequence + b.batch.record_count,
        b.entry.faults
    )
}
