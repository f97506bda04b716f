//! What the journal records of a request ([`summarize`]): the decoded fields ordering depends
//! on, each list bounded by [`MAX_SUMMARY_ITEMS`].

use std::sync::Arc;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition;
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition;
use kafka_protocol::messages::{ConsumerProtocolAssignment, RequestKind, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};
use uuid::Uuid;

use super::names::Names;
use super::summary::*;
use crate::state::batch::{self, BatchDigests};

/// Summarizes a decoded request of `version`; `topic_name` resolves topic ids (Produce v13+,
/// Fetch v13+, Metadata v10+); a Produce's topic names are taken from the connection's
/// `names` (shared with its earlier entries).
pub(crate) fn summarize(
    request: &RequestKind,
    version: i16,
    names: &mut Names,
    topic_name: impl Fn(Uuid) -> Option<String>,
) -> RequestSummary {
    let name = |name: &str, id: Uuid| match name {
        "" => topic_name(id).unwrap_or_else(|| id.to_string()),
        n => n.to_owned(),
    };
    match request {
        RequestKind::Produce(r) => {
            let total: usize = r.topic_data.iter().map(|t| t.partition_data.len()).sum();
            // Exactly sized, and each topic's name shared: the connection's, when it named
            // the topic before.
            let mut partitions = Vec::with_capacity(total.min(MAX_SUMMARY_ITEMS));
            for t in &r.topic_data {
                let room = MAX_SUMMARY_ITEMS - partitions.len();
                let kept = t.partition_data.len().min(room);
                if kept == 0 {
                    continue;
                }
                let topic = match t.name.0.as_str() {
                    "" => Arc::from(name("", t.topic_id)),
                    n => names.topic(n),
                };
                for p in &t.partition_data[..kept] {
                    let header = p.records.as_deref().and_then(batch::header);
                    partitions.push(ProducePartition {
                        topic: topic.clone(),
                        partition: p.index,
                        producer_id: header.map_or(-1, |h| h.producer_id),
                        producer_epoch: header.map_or(-1, |h| h.producer_epoch),
                        base_sequence: header.map_or(-1, |h| h.base_sequence),
                        record_count: header.map_or(0, |h| h.record_count),
                        first_timestamp: header.map_or(-1, |h| h.first_timestamp),
                        max_timestamp: header.map_or(-1, |h| h.max_timestamp),
                        base_offset: None,
                        error_code: None,
                        crc: header.map(|h| h.crc),
                        digests: None,
                        deferred: None,
                    });
                }
            }
            RequestSummary::Produce(ProduceSummary {
                transactional_id: r.transactional_id.as_ref().map(|t| t.0.as_str().to_owned()),
                acks: r.acks,
                timeout_ms: r.timeout_ms,
                dropped_partitions: bounded_len(total, partitions.len()),
                partitions,
            })
        }
        RequestKind::Fetch(r) => {
            let total = r.topics.iter().map(|t| t.partitions.len()).sum();
            let partitions: Vec<_> = r
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
                        last_offset: None,
                        aborted_transactions: None,
                        error_code: None,
                    })
                })
                .take(MAX_SUMMARY_ITEMS)
                .collect();
            RequestSummary::Fetch(FetchSummary {
                isolation_level: r.isolation_level,
                max_wait_ms: r.max_wait_ms,
                min_bytes: r.min_bytes,
                max_bytes: r.max_bytes,
                dropped_partitions: bounded_len(total, partitions.len()),
                partitions,
            })
        }
        RequestKind::ListOffsets(r) => {
            let total = r.topics.iter().map(|t| t.partitions.len()).sum();
            let partitions: Vec<_> = r
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
                .take(MAX_SUMMARY_ITEMS)
                .collect();
            RequestSummary::ListOffsets(ListOffsetsSummary {
                isolation_level: r.isolation_level,
                dropped_partitions: bounded_len(total, partitions.len()),
                partitions,
            })
        }
        RequestKind::InitProducerId(r) => RequestSummary::InitProducerId(InitProducerIdSummary {
            transactional_id: r.transactional_id.as_ref().map(|t| t.0.as_str().to_owned()),
            transaction_timeout_ms: r.transaction_timeout_ms,
            producer_id: r.producer_id.0,
            producer_epoch: r.producer_epoch,
            assigned_producer_id: None,
            assigned_producer_epoch: None,
        }),
        RequestKind::OffsetCommit(r) => {
            let (partitions, dropped_partitions) =
                commit_partitions(&r.topics, |t| (&t.name, &t.partitions));
            RequestSummary::OffsetCommit(OffsetCommitSummary {
                group_id: r.group_id.0.as_str().to_owned(),
                generation_id: r.generation_id_or_member_epoch,
                member_id: r.member_id.as_str().to_owned(),
                group_instance_id: text(&r.group_instance_id),
                dropped_partitions,
                partitions,
            })
        }
        RequestKind::OffsetFetch(r) => RequestSummary::OffsetFetch(OffsetFetchSummary {
            groups: if r.groups.is_empty() {
                vec![r.group_id.0.as_str().to_owned()]
            } else {
                r.groups
                    .iter()
                    .map(|g| g.group_id.0.as_str().to_owned())
                    .collect()
            },
            offsets: None,
            dropped_offsets: 0,
        }),
        RequestKind::JoinGroup(r) => RequestSummary::JoinGroup(JoinGroupSummary {
            group_id: r.group_id.0.as_str().to_owned(),
            member_id: r.member_id.as_str().to_owned(),
            group_instance_id: text(&r.group_instance_id),
            protocol_type: r.protocol_type.as_str().to_owned(),
            protocols: r
                .protocols
                .iter()
                .map(|p| p.name.as_str().to_owned())
                .collect(),
            session_timeout_ms: r.session_timeout_ms,
            rebalance_timeout_ms: r.rebalance_timeout_ms,
            generation_id: None,
            assigned_member_id: None,
            leader: None,
            protocol_name: None,
        }),
        RequestKind::SyncGroup(r) => RequestSummary::SyncGroup(SyncGroupSummary {
            group_id: r.group_id.0.as_str().to_owned(),
            generation_id: r.generation_id,
            member_id: r.member_id.as_str().to_owned(),
            group_instance_id: text(&r.group_instance_id),
            assignments: r
                .assignments
                .iter()
                .map(|a| MemberAssignment {
                    member_id: a.member_id.as_str().to_owned(),
                    partitions: consumer_assignment(&a.assignment),
                })
                .collect(),
            assignment: None,
        }),
        RequestKind::Heartbeat(r) => RequestSummary::Heartbeat(GroupMemberSummary {
            group_id: r.group_id.0.as_str().to_owned(),
            generation_id: r.generation_id,
            member_id: r.member_id.as_str().to_owned(),
            group_instance_id: text(&r.group_instance_id),
        }),
        RequestKind::LeaveGroup(r) => RequestSummary::LeaveGroup(LeaveGroupSummary {
            group_id: r.group_id.0.as_str().to_owned(),
            members: if r.members.is_empty() {
                vec![(r.member_id.as_str().to_owned(), None)]
            } else {
                r.members
                    .iter()
                    .map(|m| (m.member_id.as_str().to_owned(), text(&m.group_instance_id)))
                    .collect()
            },
        }),
        RequestKind::DeleteTopics(r) => RequestSummary::DeleteTopics(
            r.topic_names
                .iter()
                .map(|t| t.0.as_str().to_owned())
                .chain(r.topics.iter().map(|t| match &t.name {
                    Some(n) => n.0.as_str().to_owned(),
                    None => name("", t.topic_id),
                }))
                .map(|topic| DeletedTopic {
                    topic,
                    error_code: None,
                })
                .collect(),
        ),
        RequestKind::Metadata(r) => {
            let all = r
                .topics
                .as_ref()
                .is_none_or(|t| t.is_empty() && version == 0);
            let total = r.topics.as_ref().map_or(0, Vec::len);
            let topics: Option<Vec<String>> = (!all).then(|| {
                r.topics
                    .iter()
                    .flatten()
                    .map(|t| name(t.name.as_ref().map_or("", |n| n.0.as_str()), t.topic_id))
                    .take(MAX_SUMMARY_ITEMS)
                    .collect()
            });
            RequestSummary::Metadata(MetadataSummary {
                dropped_topics: bounded_len(total, topics.as_ref().map_or(total, Vec::len)),
                topics,
            })
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            RequestSummary::ConsumerGroupHeartbeat(super::consumer_summary::summarize(r, &name))
        }
        other => super::txn_summary::summarize(other)
            .or_else(|| super::txn_admin_summary::summarize(other))
            .or_else(|| super::admin_summary::summarize(other))
            .unwrap_or(RequestSummary::Other),
    }
}

/// Puts each partition's record digests (in request order, as the Produce handler computed
/// or deferred them) into a Produce summary; items past the summary's bound are not kept.
pub(crate) fn add_digests(
    summary: &mut RequestSummary,
    digests: impl IntoIterator<Item = BatchDigests>,
) {
    if let RequestSummary::Produce(s) = summary {
        for (p, d) in s.partitions.iter_mut().zip(digests) {
            (p.digests, p.deferred) = match d {
                BatchDigests::Absent => (None, None),
                BatchDigests::Computed(digests) => (Some(digests), None),
                BatchDigests::Deferred(records) => (None, Some(records)),
            };
        }
    }
}

/// A partition of an OffsetCommit or TxnOffsetCommit request (the codec has a type for each,
/// with the same fields).
pub(super) trait SentCommit {
    /// The partition's fields, of `topic`, as the journal keeps them.
    fn summary(&self, topic: &str) -> CommitPartition;
}

/// [`SentCommit`] for the codec's partition types, whose fields have the same names.
macro_rules! sent_commit {
    ($($partition:ty),*) => {$(
        impl SentCommit for $partition {
            fn summary(&self, topic: &str) -> CommitPartition {
                CommitPartition::sent(
                    topic,
                    self.partition_index,
                    self.committed_offset,
                    self.committed_leader_epoch,
                    self.committed_metadata.as_ref(),
                )
            }
        }
    )*};
}

sent_commit!(
    OffsetCommitRequestPartition,
    TxnOffsetCommitRequestPartition
);

/// The partitions of an OffsetCommit or TxnOffsetCommit request in request order, `of` a topic
/// giving its name and partitions: at most [`MAX_SUMMARY_ITEMS`] kept, and the count of those
/// left out.
pub(super) fn commit_partitions<'a, T, P: SentCommit + 'a>(
    topics: &'a [T],
    of: impl Fn(&'a T) -> (&'a TopicName, &'a [P]),
) -> (Vec<CommitPartition>, u64) {
    let total = topics.iter().map(|t| of(t).1.len()).sum();
    let kept: Vec<_> = topics
        .iter()
        .flat_map(|t| {
            let (name, partitions) = of(t);
            partitions.iter().map(|p| p.summary(name.0.as_str()))
        })
        .take(MAX_SUMMARY_ITEMS)
        .collect();
    let dropped = bounded_len(total, kept.len());
    (kept, dropped)
}

fn text(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.as_str().to_owned())
}

/// Decodes assignment bytes as the consumer protocol's member assignment (a version, then
/// the fields of that version), `None` when they are not one.
pub(super) fn consumer_assignment(bytes: &Bytes) -> Option<Vec<TopicPartitions>> {
    if bytes.len() < 2 {
        return None;
    }
    let mut buf = bytes.clone();
    let version = buf.get_i16();
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version).ok()?;
    Some(
        assignment
            .assigned_partitions
            .into_iter()
            .map(|tp| TopicPartitions {
                topic: tp.topic.0.as_str().to_owned(),
                partitions: tp.partitions,
            })
            .collect(),
    )
}
