//! Journal summaries of the admin APIs that change logs: DeleteRecords (the offsets asked
//! for, and each partition's answer).

use std::collections::HashMap;

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
/// partition named twice once, so answers are matched by topic and partition, through one index
/// of the response (this runs in `Journal::finish` under the journal lock: linear, not one scan
/// of the summary per answered partition).
pub(super) fn complete(summary: &mut RequestSummary, response: &ResponseKind) {
    if let (RequestSummary::DeleteRecords(s), ResponseKind::DeleteRecords(r)) = (summary, response)
    {
        // Should a response answer a partition twice, the last answer wins, as before.
        let answers: HashMap<(&str, i32), (i16, i64)> = r
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|a| {
                    (
                        (t.name.0.as_str(), a.partition_index),
                        (a.error_code, a.low_watermark),
                    )
                })
            })
            .collect();
        for p in &mut s.partitions {
            if let Some(&(error_code, low_watermark)) =
                answers.get(&(p.topic.as_str(), p.partition))
            {
                p.error_code = Some(error_code);
                p.low_watermark = (error_code == 0).then_some(low_watermark);
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

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::delete_records_response::{
        DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
    };
    use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    fn topic_name(name: &str) -> TopicName {
        TopicName(StrBytes::from_string(name.to_owned()))
    }

    #[test]
    fn every_kept_partition_of_a_large_delete_records_gets_its_own_answer() {
        // Two topics of 60,000 partitions each; the summary keeps MAX_SUMMARY_ITEMS of them.
        const PARTITIONS: i32 = 60_000;
        let topics = ["a", "b"];
        let request = DeleteRecordsRequest::default().with_topics(
            topics
                .iter()
                .map(|t| {
                    DeleteRecordsTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(
                            (0..PARTITIONS)
                                .map(|p| {
                                    DeleteRecordsPartition::default()
                                        .with_partition_index(p)
                                        .with_offset(i64::from(p))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
        let mut summary = summarize(&RequestKind::DeleteRecords(request)).expect("a summary");
        // Answered in reverse order; odd partitions refused, even ones at low watermark 2p.
        let response = DeleteRecordsResponse::default().with_topics(
            topics
                .iter()
                .rev()
                .map(|t| {
                    DeleteRecordsTopicResult::default()
                        .with_name(topic_name(t))
                        .with_partitions(
                            (0..PARTITIONS)
                                .rev()
                                .map(|p| {
                                    DeleteRecordsPartitionResult::default()
                                        .with_partition_index(p)
                                        .with_error_code(if p % 2 == 1 { 3 } else { 0 })
                                        .with_low_watermark(2 * i64::from(p))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
        complete(&mut summary, &ResponseKind::DeleteRecords(response));
        let RequestSummary::DeleteRecords(s) = summary else {
            panic!("not a DeleteRecords summary: {summary:?}");
        };
        let expected: Vec<DeletedRecords> = topics
            .iter()
            .flat_map(|t| {
                (0..PARTITIONS).map(move |p| DeletedRecords {
                    topic: (*t).to_owned(),
                    partition: p,
                    offset: i64::from(p),
                    error_code: Some(if p % 2 == 1 { 3 } else { 0 }),
                    low_watermark: (p % 2 == 0).then_some(2 * i64::from(p)),
                })
            })
            .take(MAX_SUMMARY_ITEMS)
            .collect();
        assert_eq!(s.partitions, expected);
        assert_eq!(
            s.dropped_partitions,
            2 * PARTITIONS as u64 - MAX_SUMMARY_ITEMS as u64
        );
    }
}
