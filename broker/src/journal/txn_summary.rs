//! Journal summaries of the transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn,
//! TxnOffsetCommit and EndTxn, so that the order of a transaction's requests can be read in
//! arrival order (InitProducerId and Produce carry the transactional id in their own summaries).

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{RequestKind, ResponseKind};
use serde::{Deserialize, Serialize};

use super::request::commit_partitions;
use super::summary::{bounded_len, is_zero, CommitPartition, RequestSummary, MAX_SUMMARY_ITEMS};

/// An AddPartitionsToTxn request. A v4+ request (a batch of transactions, sent by partition
/// leaders) is summarized by its first transaction; the others are counted in
/// `other_transactions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddPartitionsToTxnSummary {
    /// Transactional id.
    pub transactional_id: String,
    /// Producer id sent.
    pub producer_id: i64,
    /// Producer epoch sent.
    pub producer_epoch: i16,
    /// One item per partition, in request order.
    pub partitions: Vec<TxnPartition>,
    /// Partitions past [`super::summary::MAX_SUMMARY_ITEMS`], counted, not kept (absent from
    /// JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_partitions: u64,
    /// v4+: whether the first transaction is only verified, not added to (absent from JSON
    /// when false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub verify_only: bool,
    /// v4+: transactions of the batch after the first, counted, not kept (absent from JSON
    /// when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other_transactions: u64,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One partition added to a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
}

/// An AddOffsetsToTxn request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddOffsetsToTxnSummary {
    /// Transactional id.
    pub transactional_id: String,
    /// Producer id sent.
    pub producer_id: i64,
    /// Producer epoch sent.
    pub producer_epoch: i16,
    /// The group whose offsets the transaction will commit.
    pub group_id: String,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
}

/// A TxnOffsetCommit request: offsets committed inside a transaction, visible once it commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnOffsetCommitSummary {
    /// Transactional id.
    pub transactional_id: String,
    /// Group id.
    pub group_id: String,
    /// Producer id sent.
    pub producer_id: i64,
    /// Producer epoch sent.
    pub producer_epoch: i16,
    /// Generation id sent (v3+, KIP-447), -1 for none.
    pub generation_id: i32,
    /// Member id sent (v3+), empty for none.
    pub member_id: String,
    /// Static member id sent, if any.
    pub group_instance_id: Option<String>,
    /// One item per partition, in request order.
    pub partitions: Vec<CommitPartition>,
    /// Partitions past [`super::summary::MAX_SUMMARY_ITEMS`], counted, not kept (absent from
    /// JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_partitions: u64,
}

/// An EndTxn request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndTxnSummary {
    /// Transactional id.
    pub transactional_id: String,
    /// Producer id sent.
    pub producer_id: i64,
    /// Producer epoch sent.
    pub producer_epoch: i16,
    /// `true` to commit, `false` to abort.
    pub committed: bool,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
    /// The producer id a v5+ answer names to go on with (transaction version 2: the same id,
    /// or a new one when the epoch was exhausted); absent from JSON before v5 and on errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_producer_id: Option<i64>,
    /// The producer epoch a v5+ answer names (the bumped epoch); absent as `new_producer_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_producer_epoch: Option<i16>,
}

/// The first [`MAX_SUMMARY_ITEMS`] partitions an AddPartitionsToTxn request (v4+ per
/// transaction, or v3 and below) adds, unanswered, and how many it names in all.
fn txn_partitions(topics: &[AddPartitionsToTxnTopic]) -> (Vec<TxnPartition>, usize) {
    let total = topics.iter().map(|t| t.partitions.len()).sum();
    let partitions = topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |&p| TxnPartition {
                topic: t.name.0.as_str().to_owned(),
                partition: p,
                error_code: None,
            })
        })
        .take(MAX_SUMMARY_ITEMS)
        .collect();
    (partitions, total)
}

/// The summary of a transaction API request, `None` for other APIs.
pub(super) fn summarize(request: &RequestKind) -> Option<RequestSummary> {
    Some(match request {
        RequestKind::AddPartitionsToTxn(r) if !r.transactions.is_empty() => {
            let first = &r.transactions[0];
            let (partitions, total) = txn_partitions(&first.topics);
            RequestSummary::AddPartitionsToTxn(AddPartitionsToTxnSummary {
                transactional_id: first.transactional_id.0.as_str().to_owned(),
                producer_id: first.producer_id.0,
                producer_epoch: first.producer_epoch,
                dropped_partitions: bounded_len(total, partitions.len()),
                partitions,
                verify_only: first.verify_only,
                other_transactions: r.transactions.len() as u64 - 1,
            })
        }
        RequestKind::AddPartitionsToTxn(r) => {
            let (partitions, total) = txn_partitions(&r.v3_and_below_topics);
            RequestSummary::AddPartitionsToTxn(AddPartitionsToTxnSummary {
                transactional_id: r.v3_and_below_transactional_id.0.as_str().to_owned(),
                producer_id: r.v3_and_below_producer_id.0,
                producer_epoch: r.v3_and_below_producer_epoch,
                dropped_partitions: bounded_len(total, partitions.len()),
                partitions,
                verify_only: false,
                other_transactions: 0,
            })
        }
        RequestKind::AddOffsetsToTxn(r) => {
            RequestSummary::AddOffsetsToTxn(AddOffsetsToTxnSummary {
                transactional_id: r.transactional_id.0.as_str().to_owned(),
                producer_id: r.producer_id.0,
                producer_epoch: r.producer_epoch,
                group_id: r.group_id.0.as_str().to_owned(),
                error_code: None,
            })
        }
        RequestKind::TxnOffsetCommit(r) => {
            let (partitions, dropped_partitions) =
                commit_partitions(&r.topics, |t| (&t.name, &t.partitions));
            RequestSummary::TxnOffsetCommit(TxnOffsetCommitSummary {
                transactional_id: r.transactional_id.0.as_str().to_owned(),
                group_id: r.group_id.0.as_str().to_owned(),
                producer_id: r.producer_id.0,
                producer_epoch: r.producer_epoch,
                generation_id: r.generation_id,
                member_id: r.member_id.as_str().to_owned(),
                group_instance_id: r.group_instance_id.as_ref().map(|m| m.as_str().to_owned()),
                dropped_partitions,
                partitions,
            })
        }
        RequestKind::EndTxn(r) => RequestSummary::EndTxn(EndTxnSummary {
            transactional_id: r.transactional_id.0.as_str().to_owned(),
            producer_id: r.producer_id.0,
            producer_epoch: r.producer_epoch,
            committed: r.committed,
            error_code: None,
            new_producer_id: None,
            new_producer_epoch: None,
        }),
        _ => return None,
    })
}

/// Fills the answered fields of a transaction API summary from its response (items matched
/// by position: handlers answer in request order).
pub(super) fn complete(summary: &mut RequestSummary, response: &ResponseKind) {
    match (summary, response) {
        (RequestSummary::AddPartitionsToTxn(s), ResponseKind::AddPartitionsToTxn(r)) => {
            // v4+: the first transaction's answer (kmock answers them in request order).
            let batch = r
                .results_by_transaction
                .first()
                .filter(|t| t.transactional_id.0.as_str() == s.transactional_id)
                .map(|t| &t.topic_results);
            let answers = batch
                .unwrap_or(&r.results_by_topic_v3_and_below)
                .iter()
                .flat_map(|t| &t.results_by_partition);
            for (p, a) in s.partitions.iter_mut().zip(answers) {
                p.error_code = Some(a.partition_error_code);
            }
        }
        (RequestSummary::AddOffsetsToTxn(s), ResponseKind::AddOffsetsToTxn(r)) => {
            s.error_code = Some(r.error_code);
        }
        (RequestSummary::TxnOffsetCommit(s), ResponseKind::TxnOffsetCommit(r)) => {
            let answers = r.topics.iter().flat_map(|t| &t.partitions);
            for (p, a) in s.partitions.iter_mut().zip(answers) {
                p.error_code = Some(a.error_code);
            }
        }
        (RequestSummary::EndTxn(s), ResponseKind::EndTxn(r)) => {
            s.error_code = Some(r.error_code);
            if r.error_code == 0 && r.producer_id.0 >= 0 {
                s.new_producer_id = Some(r.producer_id.0);
                s.new_producer_epoch = Some(r.producer_epoch);
            }
        }
        _ => {}
    }
}

/// The error codes of a transaction API response, `None` for other APIs.
pub(super) fn error_codes(response: &ResponseKind) -> Option<Vec<i16>> {
    Some(match response {
        ResponseKind::AddPartitionsToTxn(r) => std::iter::once(r.error_code)
            .chain(
                r.results_by_topic_v3_and_below
                    .iter()
                    .chain(
                        r.results_by_transaction
                            .iter()
                            .flat_map(|t| &t.topic_results),
                    )
                    .flat_map(|t| &t.results_by_partition)
                    .map(|p| p.partition_error_code),
            )
            .collect(),
        ResponseKind::AddOffsetsToTxn(r) => vec![r.error_code],
        ResponseKind::TxnOffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .collect(),
        ResponseKind::EndTxn(r) => vec![r.error_code],
        _ => return None,
    })
}
