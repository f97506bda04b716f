//! Journal summaries of the transaction admin APIs: DescribeTransactions, ListTransactions and
//! DescribeProducers (what was asked, and the gist of what was answered).

use kafka_protocol::messages::{RequestKind, ResponseKind};
use serde::{Deserialize, Serialize};

use super::summary::{bounded_len, is_zero, RequestSummary, TopicPartitions, MAX_SUMMARY_ITEMS};

/// A DescribeTransactions request: one item per transactional id, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescribeTransactionsSummary {
    /// The transactional ids asked about, with their answers.
    pub transactions: Vec<DescribedTransaction>,
    /// Ids past [`MAX_SUMMARY_ITEMS`], counted, not kept (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_transactions: u64,
}

/// One transactional id of a DescribeTransactions request and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescribedTransaction {
    /// Transactional id.
    pub transactional_id: String,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
    /// State answered (Kafka's name, e.g. `Ongoing`), when described.
    pub state: Option<String>,
    /// Producer id answered, when described.
    pub producer_id: Option<i64>,
    /// Producer epoch answered, when described.
    pub producer_epoch: Option<i16>,
}

/// A ListTransactions request: its filters, and how many transactions were listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListTransactionsSummary {
    /// State names asked for (all when empty).
    pub state_filters: Vec<String>,
    /// Producer ids asked for (all when empty).
    pub producer_id_filters: Vec<i64>,
    /// v1+: only transactions begun more than this many ms ago (-1: no filter).
    pub duration_filter_ms: i64,
    /// v2+: the regular expression ids must match, if any.
    pub transactional_id_pattern: Option<String>,
    /// Transactions listed; `None` until answered.
    pub listed: Option<u64>,
    /// State and producer id filters past [`MAX_SUMMARY_ITEMS`] each, counted, not kept
    /// (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_filters: u64,
}

/// A DescribeProducers request: the partitions asked about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescribeProducersSummary {
    /// The partitions asked about, by topic, in request order.
    pub topics: Vec<TopicPartitions>,
    /// Topics and partitions past [`MAX_SUMMARY_ITEMS`] (of topics, and of each topic's
    /// partitions), counted, not kept (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_partitions: u64,
}

/// The summary of a transaction admin API request, `None` for other APIs.
pub(super) fn summarize(request: &RequestKind) -> Option<RequestSummary> {
    Some(match request {
        RequestKind::DescribeTransactions(r) => {
            let transactions: Vec<_> = r
                .transactional_ids
                .iter()
                .take(MAX_SUMMARY_ITEMS)
                .map(|id| DescribedTransaction {
                    transactional_id: id.0.as_str().to_owned(),
                    error_code: None,
                    state: None,
                    producer_id: None,
                    producer_epoch: None,
                })
                .collect();
            RequestSummary::DescribeTransactions(DescribeTransactionsSummary {
                dropped_transactions: bounded_len(r.transactional_ids.len(), transactions.len()),
                transactions,
            })
        }
        RequestKind::ListTransactions(r) => {
            let kept_states = r.state_filters.len().min(MAX_SUMMARY_ITEMS);
            let kept_ids = r.producer_id_filters.len().min(MAX_SUMMARY_ITEMS);
            RequestSummary::ListTransactions(ListTransactionsSummary {
                dropped_filters: bounded_len(r.state_filters.len(), kept_states)
                    + bounded_len(r.producer_id_filters.len(), kept_ids),
                state_filters: r
                    .state_filters
                    .iter()
                    .take(MAX_SUMMARY_ITEMS)
                    .map(|s| s.as_str().to_owned())
                    .collect(),
                producer_id_filters: r
                    .producer_id_filters
                    .iter()
                    .take(MAX_SUMMARY_ITEMS)
                    .map(|p| p.0)
                    .collect(),
                duration_filter_ms: r.duration_filter,
                transactional_id_pattern: r
                    .transactional_id_pattern
                    .as_ref()
                    .map(|p| p.as_str().to_owned()),
                listed: None,
            })
        }
        RequestKind::DescribeProducers(r) => {
            let total: usize = r
                .topics
                .iter()
                .map(|t| t.partition_indexes.len().max(1))
                .sum();
            let topics: Vec<TopicPartitions> = r
                .topics
                .iter()
                .take(MAX_SUMMARY_ITEMS)
                .map(|t| TopicPartitions {
                    topic: t.name.0.as_str().to_owned(),
                    partitions: t
                        .partition_indexes
                        .iter()
                        .copied()
                        .take(MAX_SUMMARY_ITEMS)
                        .collect(),
                })
                .collect();
            let kept = topics.iter().map(|t| t.partitions.len().max(1)).sum();
            RequestSummary::DescribeProducers(DescribeProducersSummary {
                dropped_partitions: bounded_len(total, kept),
                topics,
            })
        }
        _ => return None,
    })
}

/// Fills the answered fields of a transaction admin API summary from its response.
pub(super) fn complete(summary: &mut RequestSummary, response: &ResponseKind) {
    match (summary, response) {
        (RequestSummary::DescribeTransactions(s), ResponseKind::DescribeTransactions(r)) => {
            for (t, a) in s.transactions.iter_mut().zip(&r.transaction_states) {
                t.error_code = Some(a.error_code);
                if a.error_code == 0 {
                    t.state = Some(a.transaction_state.as_str().to_owned());
                    t.producer_id = Some(a.producer_id.0);
                    t.producer_epoch = Some(a.producer_epoch);
                }
            }
        }
        (RequestSummary::ListTransactions(s), ResponseKind::ListTransactions(r)) => {
            s.listed = Some(r.transaction_states.len() as u64);
        }
        _ => {}
    }
}

/// The error codes of a transaction admin API response, `None` for other APIs.
pub(super) fn error_codes(response: &ResponseKind) -> Option<Vec<i16>> {
    Some(match response {
        ResponseKind::DescribeTransactions(r) => {
            r.transaction_states.iter().map(|t| t.error_code).collect()
        }
        ResponseKind::ListTransactions(r) => vec![r.error_code],
        ResponseKind::DescribeProducers(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .collect(),
        _ => return None,
    })
}
