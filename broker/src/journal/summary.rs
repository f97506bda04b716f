//! Decoded summaries of requests and responses, as the journal keeps them.
//!
//! Full for what ordering depends on (Produce batches, OffsetCommit offsets, group membership
//! and assignments, Fetch and ListOffsets positions, producer ids), the common entry fields
//! only for every other API. Summaries hold no record
//! contents: records stay in the partition logs.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ConsumerProtocolAssignment, RequestKind, ResponseKind};
use kafka_protocol::protocol::{Decodable, StrBytes};
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
    /// OffsetCommit: the group, generation, member, and every partition's offset.
    OffsetCommit(OffsetCommitSummary),
    /// OffsetFetch: the groups asked, and the offsets answered.
    OffsetFetch(OffsetFetchSummary),
    /// JoinGroup: the member joining, and the generation it got.
    JoinGroup(JoinGroupSummary),
    /// SyncGroup: the assignments sent (by the leader), and the one answered.
    SyncGroup(SyncGroupSummary),
    /// Heartbeat: the member and generation.
    Heartbeat(GroupMemberSummary),
    /// LeaveGroup: the members leaving.
    LeaveGroup(LeaveGroupSummary),
    /// DeleteTopics: the topics named, and how each deletion was answered.
    DeleteTopics(Vec<DeletedTopic>),
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

/// An OffsetCommit request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetCommitSummary {
    /// Group id.
    pub group_id: String,
    /// Generation id (member epoch from v9), -1 from outside group management.
    pub generation_id: i32,
    /// Member id, empty from outside group management.
    pub member_id: String,
    /// Static member id, if any.
    pub group_instance_id: Option<String>,
    /// One item per partition, in request order.
    pub partitions: Vec<CommitPartition>,
}

/// One partition of an OffsetCommit request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The offset committed.
    pub offset: i64,
    /// Leader epoch sent with it, -1 for none.
    pub leader_epoch: i32,
    /// Metadata string sent with it.
    pub metadata: Option<String>,
    /// Error code answered; `None` until answered.
    pub error_code: Option<i16>,
}

/// An OffsetFetch request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetFetchSummary {
    /// The groups asked about.
    pub groups: Vec<String>,
    /// Every partition answered with its committed offset (-1 for none); `None` until answered.
    pub offsets: Option<Vec<FetchedOffset>>,
}

/// One committed offset in an OffsetFetch answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchedOffset {
    /// Group id.
    pub group_id: String,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Committed offset, -1 for none.
    pub offset: i64,
}

/// A JoinGroup request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinGroupSummary {
    /// Group id.
    pub group_id: String,
    /// Member id sent (empty on a first join).
    pub member_id: String,
    /// Static member id, if any.
    pub group_instance_id: Option<String>,
    /// Protocol type (`consumer`).
    pub protocol_type: String,
    /// Protocol names offered, in preference order.
    pub protocols: Vec<String>,
    /// Session timeout asked, ms.
    pub session_timeout_ms: i32,
    /// Rebalance timeout asked, ms.
    pub rebalance_timeout_ms: i32,
    /// Generation answered; `None` until answered.
    pub generation_id: Option<i32>,
    /// Member id answered (assigned on a first join); `None` until answered.
    pub assigned_member_id: Option<String>,
    /// Leader answered; `None` until answered.
    pub leader: Option<String>,
}

/// A SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncGroupSummary {
    /// Group id.
    pub group_id: String,
    /// Generation id.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// Static member id, if any.
    pub group_instance_id: Option<String>,
    /// The leader's assignments, one per member (empty from followers).
    pub assignments: Vec<MemberAssignment>,
    /// The member's own assignment answered; `None` until answered.
    pub assignment: Option<Vec<TopicPartitions>>,
}

/// One member's assignment in a SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberAssignment {
    /// Member id.
    pub member_id: String,
    /// The partitions, decoded as the consumer protocol's assignment; `None` when the bytes are
    /// not one (another protocol type).
    pub partitions: Option<Vec<TopicPartitions>>,
}

/// Partitions of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicPartitions {
    /// Topic name.
    pub topic: String,
    /// Partition indexes.
    pub partitions: Vec<i32>,
}

/// A Heartbeat request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMemberSummary {
    /// Group id.
    pub group_id: String,
    /// Generation id.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// Static member id, if any.
    pub group_instance_id: Option<String>,
}

/// A LeaveGroup request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaveGroupSummary {
    /// Group id.
    pub group_id: String,
    /// `(member id, static member id)` of each member leaving.
    pub members: Vec<(String, Option<String>)>,
}

/// One topic of a DeleteTopics request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedTopic {
    /// Topic name (the topic id, as text, when named by an unknown id).
    pub topic: String,
    /// Error code answered for it; `None` until answered or when unanswered.
    pub error_code: Option<i16>,
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
        RequestKind::OffsetCommit(r) => RequestSummary::OffsetCommit(OffsetCommitSummary {
            group_id: r.group_id.0.as_str().to_owned(),
            generation_id: r.generation_id_or_member_epoch,
            member_id: r.member_id.as_str().to_owned(),
            group_instance_id: text(&r.group_instance_id),
            partitions: r
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(move |p| CommitPartition {
                        topic: t.name.0.as_str().to_owned(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: text(&p.committed_metadata),
                        error_code: None,
                    })
                })
                .collect(),
        }),
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
        _ => RequestSummary::Other,
    }
}

fn text(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.as_str().to_owned())
}

/// Decodes assignment bytes as the consumer protocol's member assignment (a version, then
/// the fields of that version), `None` when they are not one.
fn consumer_assignment(bytes: &Bytes) -> Option<Vec<TopicPartitions>> {
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
        (RequestSummary::DeleteTopics(s), ResponseKind::DeleteTopics(r)) => {
            // Answered in request order, one result per topic named.
            for (t, a) in s.iter_mut().zip(&r.responses) {
                t.error_code = Some(a.error_code);
            }
        }
        (RequestSummary::InitProducerId(s), ResponseKind::InitProducerId(r)) => {
            s.assigned_producer_id = Some(r.producer_id.0);
            s.assigned_producer_epoch = Some(r.producer_epoch);
        }
        (RequestSummary::OffsetCommit(s), ResponseKind::OffsetCommit(r)) => {
            let answers = r.topics.iter().flat_map(|t| &t.partitions);
            for (p, a) in s.partitions.iter_mut().zip(answers) {
                p.error_code = Some(a.error_code);
            }
        }
        (RequestSummary::OffsetFetch(s), ResponseKind::OffsetFetch(r)) => {
            let mut offsets = Vec::new();
            let single = s.groups.first().cloned().unwrap_or_default();
            for t in &r.topics {
                for p in &t.partitions {
                    offsets.push(FetchedOffset {
                        group_id: single.clone(),
                        topic: t.name.0.as_str().to_owned(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                    });
                }
            }
            for g in &r.groups {
                for t in &g.topics {
                    for p in &t.partitions {
                        offsets.push(FetchedOffset {
                            group_id: g.group_id.0.as_str().to_owned(),
                            topic: t.name.0.as_str().to_owned(),
                            partition: p.partition_index,
                            offset: p.committed_offset,
                        });
                    }
                }
            }
            s.offsets = Some(offsets);
        }
        (RequestSummary::JoinGroup(s), ResponseKind::JoinGroup(r)) => {
            s.generation_id = Some(r.generation_id);
            s.assigned_member_id = Some(r.member_id.as_str().to_owned());
            s.leader = Some(r.leader.as_str().to_owned());
        }
        (RequestSummary::SyncGroup(s), ResponseKind::SyncGroup(r)) => {
            s.assignment = consumer_assignment(&r.assignment);
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
        ResponseKind::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .collect(),
        ResponseKind::OffsetFetch(r) => std::iter::once(r.error_code)
            .chain(
                r.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code),
            )
            .chain(r.groups.iter().flat_map(|g| {
                std::iter::once(g.error_code).chain(
                    g.topics
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .map(|p| p.error_code),
                )
            }))
            .collect(),
        ResponseKind::FindCoordinator(r) => std::iter::once(r.error_code)
            .chain(r.coordinators.iter().map(|c| c.error_code))
            .collect(),
        ResponseKind::JoinGroup(r) => vec![r.error_code],
        ResponseKind::SyncGroup(r) => vec![r.error_code],
        ResponseKind::Heartbeat(r) => vec![r.error_code],
        ResponseKind::LeaveGroup(r) => std::iter::once(r.error_code)
            .chain(r.members.iter().map(|m| m.error_code))
            .collect(),
        ResponseKind::DescribeGroups(r) => r.groups.iter().map(|g| g.error_code).collect(),
        ResponseKind::ListGroups(r) => vec![r.error_code],
        ResponseKind::DeleteGroups(r) => r.results.iter().map(|g| g.error_code).collect(),
        ResponseKind::OffsetDelete(r) => std::iter::once(r.error_code)
            .chain(
                r.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code),
            )
            .collect(),
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
