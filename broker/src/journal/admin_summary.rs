//! Journal summaries of the admin APIs that change logs: DeleteRecords (the offsets asked
//! for, and each partition's answer).

use kafka_protocol::messages::{RequestKind, ResponseKind};
use serde::{Deserialize, Serialize};

use super::summary::{bounded_len, is_zero, RequestSummary, MAX_SUMMARY_ITEMS};

/// A DeleteRecords request: every partition's offset, in request order, and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRecordsSummary {
    /// How long the client lets the broker wait for the replicas, in ms.
    pub timeout_ms: i32,
    /// The partitions named, with the offset before which records are deleted.
    pub partitions: Vec<DeletedRecords>,
    /// Partitions past [`MAX_SUMMARY_ITEMS`], counted, not kept (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_partitions: u64,
}

/// One partition of a DeleteRecords request and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedRecords {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Records before this offset are deleted (-1: up to the high watermark).
    pub offset: i64,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
    /// The log start offset after the deletion (the answer's low watermark); `None` until
    /// answered, or when refused.
    pub low_watermark: Option<i64>,
}

/// The summary of a log admin API request, `None` for other APIs.
pub(super) fn summarize(request: &RequestKind) -> Option<RequestSummary> {
    let RequestKind::DeleteRecords(r) = request else {
        return None;
    };
    let total: usize = r.topics.iter().map(|t| t.partitions.len()).sum();
    let partitions: Vec<DeletedRecords> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| DeletedRecords {
                topic: t.name.0.as_str().to_owned(),
                partition: p.partition_index,
                offset: p.offset,
                error_code: None,
                low_watermark: None,
            })
        })
        .take(MAX_SUMMARY_ITEMS)
        .collect();
    Some(RequestSummary::DeleteRecords(DeleteRecordsSummary {
        timeout_ms: r.timeout_ms,
        dropped_partitions: bounded_len(total, partitions.len()),
        partitions,
    }))
}

/// Fills the answered fields of a log admin API summary from its response. Kafka answers a
/// partition named twice once, so answers are matched by topic and partition.
pub(super) fn complete(summary: &mut RequestSummary, response: &ResponseKind) {
    if let (RequestSummary::DeleteRecords(s), ResponseKind::DeleteRecords(r)) = (summary, response)
    {
        for t in &r.topics {
            for a in &t.partitions {
                for p in s
                    .partitions
                    .iter_mut()
                    .filter(|p| p.topic == t.name.0.as_str() && p.partition == a.partition_index)
                {
                    p.error_code = Some(a.error_code);
                    p.low_watermark = (a.error_code == 0).then_some(a.low_watermark);
                }
            }
        }
    }
}

/// The error codes of a log admin API response, `None` for other APIs.
pub(super) fn error_codes(response: &ResponseKind) -> Option<Vec<i16>> {
    let ResponseKind::DeleteRecords(r) = response else {
        return None;
    };
    Some(
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .collect(),
    )
}
