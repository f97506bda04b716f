//! Decoded summaries of requests and responses, as the journal keeps them.
//!
//! Full for what ordering depends on (Produce batches, Fetch and ListOffsets positions,
//! producer ids), the common entry fields only for every other API. Summaries hold no record
//! contents: records stay in the partition logs.

use kafka_protocol::messages::{RequestKind, ResponseKind};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::state::batch;

/// What the journal records of a request, by API. Serialized externally tagged:
/// `{"produce": {…}}`, or `"other"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RequestSummary {
    /// Produce: every partition's batch header, and where it went.
    Produce(ProduceSummary),
    /// Fetch: every partition's fetch offset, and what came back.
    Fetch(FetchSummary),
    /// ListOffsets: every partition's timestamp asked, and the offset returned.
    ListOffsets(ListOffsetsSummary),
    /// InitProducerId: the ids asked for and given.
    InitProducerId(InitProducerIdSummary),
    /// Any other API: the entry's common fields are all that is recorded.
    Other,
}

/// A Produce request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceSummary {
    /// Transactional id, if any.
    pub transactional_id: Option<String>,
    /// acks: 0, 1 or -1.
    pub acks: i16,
    /// Request timeout, ms.
    pub timeout_ms: i32,
    /// One item per partition, in request order.
    pub partitions: Vec<ProducePartition>,
}

/// One partition's batch in a Produce request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducePartition {
    /// Topic name (the topic id, as text, when a v13+ request names an unknown id).
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Producer id from the batch header, -1 when not idempotent or unreadable.
    pub producer_id: i64,
    /// Producer epoch from the batch header, -1 when not idempotent or unreadable.
    pub producer_epoch: i16,
    /// Base sequence from the batch header, -1 when not idempotent or unreadable.
    pub base_sequence: i32,
    /// Record count from the batch header, 0 when unreadable.
    pub record_count: i32,
    /// Offset the broker gave the first record (the original's, for a duplicate); `None` until
    /// answered, or when refused or unanswered.
    pub base_offset: Option<i64>,
    /// Error code answered for this partition; `None` until answered or when unanswered.
    pub error_code: Option<i16>,
}

/// A Fetch request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchSummary {
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
    /// Longest wait for `min_bytes`, ms.
    pub max_wait_ms: i32,
    /// Bytes to wait for.
    pub min_bytes: i32,
    /// Largest answer, bytes.
    pub max_bytes: i32,
    /// One item per partition, in request order.
    pub partitions: Vec<FetchPartition>,
}

/// One partition of a Fetch request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchPartition {
    /// Topic name (the id as text for an unknown v13+ topic id).
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Offset asked for.
    pub fetch_offset: i64,
    /// High watermark answered; `None` until answered.
    pub high_watermark: Option<i64>,
    /// Bytes of records answered; `None` until answered.
    pub records_bytes: Option<usize>,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
}

/// A ListOffsets request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListOffsetsSummary {
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
    /// One item per partition, in request order.
    pub partitions: Vec<ListOffsetsPartition>,
}

/// One partition of a ListOffsets request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListOffsetsPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Timestamp asked: -1 latest, -2 earliest, -3 max timestamp, else ms since the epoch.
    pub timestamp: i64,
    /// Offset answered; `None` until answered.
    pub offset: Option<i64>,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
}

/// An InitProducerId request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitProducerIdSummary {
    /// Transactional id, if any.
    pub transactional_id: Option<String>,
    /// Transaction timeout asked, ms.
    pub transaction_timeout_ms: i32,
    /// Producer id sent (KIP-360 bump), -1 for none.
    pub producer_id: i64,
    /// Producer epoch sent, -1 for none.
    pub producer_epoch: i16,
    /// Producer id given; `None` until answered.
    pub assigned_producer_id: Option<i64>,
    /// Producer epoch given; `None` until answered.
    pub assigned_producer_epoch: Option<i16>,
}

/// What the journal records of an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseSummary {
    /// When the answer was written, µs since the cluster started.
    pub at_us: u64,
    /// Every distinct non-zero error code in the answer (top level, topics, partitions), in
    /// the order they appear.
    pub error_codes: Vec<i16>,
}

/// Summarizes a decoded request; `topic_name` resolves v13+ topic ids.
pub(crate) fn summarize(
    request: &RequestKind,
    topic_name: impl Fn(Uuid) -> Option<String>,
) -> RequestSummary {
    let name = |name: &str, id: Uuid| match name {
        "" => topic_name(id).unwrap_or_else(|| id.to_string()),
        n => n.to_owned(),
    };
    match request {
        RequestKind::Produce(r) => RequestSummary::Produce(ProduceSummary {
            transactional_id: r.transactional_id.as_ref().map(|t| t.0.as_str().to_owned()),
            acks: r.acks,
            timeout_ms: r.timeout_ms,
            partitions: r
                .topic_data
                .iter()
                .flat_map(|t| {
                    let topic = name(t.name.0.as_str(), t.topic_id);
                    t.partition_data.iter().map(move |p| {
                        let header = p.records.as_deref().and_then(batch::header);
                        ProducePartition {
                            topic: topic.clone(),
                            partition: p.index,
                            producer_id: header.map_or(-1, |h| h.producer_id),
                            producer_epoch: header.map_or(-1, |h| h.producer_epoch),
                            base_sequence: header.map_or(-1, |h| h.base_sequence),
                            record_count: header.map_or(0, |h| h.record_count),
                            base_offset: None,
                            error_code: None,
                        }
                    })
                })
                .collect(),
        }),
        RequestKind::Fetch(r) => RequestSummary::Fetch(FetchSummary {
            isolation_level: r.isolation_level,
            max_wait_ms: r.max_wait_ms,
            min_bytes: r.min_bytes,
            max_bytes: r.max_bytes,
            partitions: r
                .topics
                .iter()
                .flat_map(|t| {
                    let topic = name(t.topic.0.as_str(), t.topic_id);
                    t.partitions.iter().map(move |p| FetchPartition {
                        topic: topic.clone(),
                        partition: p.partition,
                        fetch_offset: p.fetch_offset,
                        high_watermark: None,
                        records_bytes: None,
                        error_code: None,
                    })
                })
                .collect(),
        }),
        RequestKind::ListOffsets(r) => RequestSummary::ListOffsets(ListOffsetsSummary {
            isolation_level: r.isolation_level,
            partitions: r
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(move |p| ListOffsetsPartition {
                        topic: t.name.0.as_str().to_owned(),
                        partition: p.partition_index,
                        timestamp: p.timestamp,
                        offset: None,
                        error_code: None,
                    })
                })
                .collect(),
        }),
        RequestKind::InitProducerId(r) => RequestSummary::InitProducerId(InitProducerIdSummary {
            transactional_id: r.transactional_id.as_ref().map(|t| t.0.as_str().to_owned()),
            transaction_timeout_ms: r.transaction_timeout_ms,
            producer_id: r.producer_id.0,
            producer_epoch: r.producer_epoch,
            assigned_producer_id: None,
            assigned_producer_epoch: None,
        }),
        _ => RequestSummary::Other,
    }
}

/// Fills a summary's answered fields from the response. Handlers answer topics and partitions
/// in request order, so items are matched by position.
pub(crate) fn complete(summary: &mut RequestSummary, response: &ResponseKind) {
    match (summary, response) {
        (RequestSummary::Produce(s), ResponseKind::Produce(r)) => {
            let answers = r.responses.iter().flat_map(|t| &t.partition_responses);
            for (p, a) in s.partitions.iter_mut().zip(answers) {
                p.error_code = Some(a.error_code);
                p.base_offset = (a.error_code == 0).then_some(a.base_offset);
            }
        }
        (RequestSummary::Fetch(s), ResponseKind::Fetch(r)) => {
            let answers = r.responses.iter().flat_map(|t| &t.partitions);
            for (p, a) in s.partitions.iter_mut().zip(answers) {
                p.error_code = Some(a.error_code);
                p.high_watermark = Some(a.high_watermark);
                p.records_bytes = Some(a.records.as_ref().map_or(0, |r| r.len()));
            }
        }
        (RequestSummary::ListOffsets(s), ResponseKind::ListOffsets(r)) => {
            let answers = r.topics.iter().flat_map(|t| &t.partitions);
            for (p, a) in s.partitions.iter_mut().zip(answers) {
                p.error_code = Some(a.error_code);
                p.offset = Some(a.offset);
            }
        }
        (RequestSummary::InitProducerId(s), ResponseKind::InitProducerId(r)) => {
            s.assigned_producer_id = Some(r.producer_id.0);
            s.assigned_producer_epoch = Some(r.producer_epoch);
        }
        _ => {}
    }
}

/// Every distinct non-zero error code in a response, in order of appearance.
pub(crate) fn error_codes(response: &ResponseKind) -> Vec<i16> {
    let codes: Vec<i16> = match response {
        ResponseKind::Produce(r) => r
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .map(|p| p.error_code)
            .collect(),
        ResponseKind::Fetch(r) => std::iter::once(r.error_code)
            .chain(
                r.responses
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code),
            )
            .collect(),
        ResponseKind::ListOffsets(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .collect(),
        ResponseKind::Metadata(r) => std::iter::once(r.error_code)
            .chain(r.topics.iter().flat_map(|t| {
                std::iter::once(t.error_code).chain(t.partitions.iter().map(|p| p.error_code))
            }))
            .collect(),
        ResponseKind::ApiVersions(r) => vec![r.error_code],
        ResponseKind::CreateTopics(r) => r.topics.iter().map(|t| t.error_code).collect(),
        ResponseKind::DeleteTopics(r) => r.responses.iter().map(|t| t.error_code).collect(),
        ResponseKind::CreatePartitions(r) => r.results.iter().map(|t| t.error_code).collect(),
        ResponseKind::DescribeConfigs(r) => r.results.iter().map(|t| t.error_code).collect(),
        ResponseKind::DescribeCluster(r) => vec![r.error_code],
        ResponseKind::InitProducerId(r) => vec![r.error_code],
        ResponseKind::OffsetForLeaderEpoch(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .collect(),
        _ => Vec::new(),
    };
    let mut distinct = Vec::new();
    for code in codes.into_iter().filter(|&c| c != 0) {
        if !distinct.contains(&code) {
            distinct.push(code);
        }
    }
    distinct
}
