//! What the journal records of an answer: the answered fields of a request summary
//! ([`complete`]) and the error codes ([`error_codes`]).

use kafka_protocol::messages::ResponseKind;

use super::request::consumer_assignment;
use super::summary::{
    bounded_len, AbortedTransaction, FetchedOffset, RequestSummary, MAX_SUMMARY_ITEMS,
};

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
                p.last_offset = a.records.as_deref().and_then(last_record_offset);
                p.aborted_transactions = a.aborted_transactions.as_ref().map(|list| {
                    list.iter()
                        .map(|t| AbortedTransaction {
                            producer_id: t.producer_id.0,
                            first_offset: t.first_offset,
                        })
                        .collect()
                });
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
            let total = r.topics.iter().map(|t| t.partitions.len()).sum::<usize>()
                + r.groups
                    .iter()
                    .flat_map(|g| &g.topics)
                    .map(|t| t.partitions.len())
                    .sum::<usize>();
            // Past the bound, the offsets are counted, not kept.
            for t in &r.topics {
                for p in &t.partitions {
                    if offsets.len() == MAX_SUMMARY_ITEMS {
                        break;
                    }
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
                        if offsets.len() == MAX_SUMMARY_ITEMS {
                            break;
                        }
                        offsets.push(FetchedOffset {
                            group_id: g.group_id.0.as_str().to_owned(),
                            topic: t.name.0.as_str().to_owned(),
                            partition: p.partition_index,
                            offset: p.committed_offset,
                        });
                    }
                }
            }
            s.dropped_offsets = bounded_len(total, offsets.len());
            s.offsets = Some(offsets);
        }
        (RequestSummary::JoinGroup(s), ResponseKind::JoinGroup(r)) => {
            s.generation_id = Some(r.generation_id);
            s.assigned_member_id = Some(r.member_id.as_str().to_owned());
            s.leader = Some(r.leader.as_str().to_owned());
            s.protocol_name = r.protocol_name.as_ref().map(|p| p.as_str().to_owned());
        }
        (RequestSummary::SyncGroup(s), ResponseKind::SyncGroup(r)) => {
            s.assignment = consumer_assignment(&r.assignment);
        }
        (RequestSummary::ConsumerGroupHeartbeat(s), ResponseKind::ConsumerGroupHeartbeat(r)) => {
            super::consumer_summary::complete(s, r)
        }
        (summary, response) => {
            super::txn_summary::complete(summary, response);
            super::txn_admin_summary::complete(summary, response);
            super::admin_summary::complete(summary, response);
        }
    }
}

/// Every distinct non-zero error code in a response, in order of appearance.
pub(crate) fn error_codes(response: &ResponseKind) -> Vec<i16> {
    // Each list deduplicated as it is read, not gathered first: no allocation for an answer
    // without errors.
    match response {
        ResponseKind::Produce(r) => r
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .map(|p| p.error_code)
            .distinct(),
        ResponseKind::Fetch(r) => std::iter::once(r.error_code)
            .chain(
                r.responses
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code),
            )
            .distinct(),
        ResponseKind::ListOffsets(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .distinct(),
        ResponseKind::Metadata(r) => std::iter::once(r.error_code)
            .chain(r.topics.iter().flat_map(|t| {
                std::iter::once(t.error_code).chain(t.partitions.iter().map(|p| p.error_code))
            }))
            .distinct(),
        ResponseKind::ApiVersions(r) => [r.error_code].into_iter().distinct(),
        ResponseKind::CreateTopics(r) => r.topics.iter().map(|t| t.error_code).distinct(),
        ResponseKind::DeleteTopics(r) => r.responses.iter().map(|t| t.error_code).distinct(),
        ResponseKind::CreatePartitions(r) => r.results.iter().map(|t| t.error_code).distinct(),
        ResponseKind::DescribeConfigs(r) => r.results.iter().map(|t| t.error_code).distinct(),
        ResponseKind::DescribeCluster(r) => [r.error_code].into_iter().distinct(),
        ResponseKind::InitProducerId(r) => [r.error_code].into_iter().distinct(),
        ResponseKind::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .distinct(),
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
            .distinct(),
        ResponseKind::FindCoordinator(r) => std::iter::once(r.error_code)
            .chain(r.coordinators.iter().map(|c| c.error_code))
            .distinct(),
        ResponseKind::JoinGroup(r) => [r.error_code].into_iter().distinct(),
        ResponseKind::SyncGroup(r) => [r.error_code].into_iter().distinct(),
        ResponseKind::Heartbeat(r) => [r.error_code].into_iter().distinct(),
        ResponseKind::ConsumerGroupHeartbeat(r) => [r.error_code].into_iter().distinct(),
        ResponseKind::ConsumerGroupDescribe(r) => r.groups.iter().map(|g| g.error_code).distinct(),
        ResponseKind::LeaveGroup(r) => std::iter::once(r.error_code)
            .chain(r.members.iter().map(|m| m.error_code))
            .distinct(),
        ResponseKind::DescribeGroups(r) => r.groups.iter().map(|g| g.error_code).distinct(),
        ResponseKind::ListGroups(r) => [r.error_code].into_iter().distinct(),
        ResponseKind::DeleteGroups(r) => r.results.iter().map(|g| g.error_code).distinct(),
        ResponseKind::OffsetDelete(r) => std::iter::once(r.error_code)
            .chain(
                r.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code),
            )
            .distinct(),
        ResponseKind::OffsetForLeaderEpoch(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .distinct(),
        other => super::txn_summary::error_codes(other)
            .or_else(|| super::txn_admin_summary::error_codes(other))
            .or_else(|| super::admin_summary::error_codes(other))
            .unwrap_or_default()
            .into_iter()
            .distinct(),
    }
}

/// Error codes read as the distinct non-zero ones, in order of appearance.
trait Distinct: Iterator<Item = i16> + Sized {
    /// The distinct non-zero codes, in order of appearance (allocating only for one).
    fn distinct(self) -> Vec<i16> {
        let mut distinct = Vec::new();
        for code in self.filter(|&c| c != 0) {
            if !distinct.contains(&code) {
                distinct.push(code);
            }
        }
        distinct
    }
}

impl<I: Iterator<Item = i16>> Distinct for I {}

/// The offset of the last record of the last whole batch in a Fetch answer's `records`:
/// batches are walked by their length field (offset 8), and a v2 batch's last offset is its
/// base offset plus its last offset delta (offset 23); a v0/v1 message's offset field is its
/// last offset. `None` without a whole batch.
fn last_record_offset(records: &[u8]) -> Option<i64> {
    const LOG_OVERHEAD: usize = 12; // base offset (8) + length (4)
    let mut at = 0;
    let mut last = None;
    while let Some(header) = records.get(at..at + LOG_OVERHEAD) {
        let base = i64::from_be_bytes(header[..8].try_into().ok()?);
        let length = usize::try_from(i32::from_be_bytes(header[8..].try_into().ok()?)).ok()?;
        let end = at.checked_add(LOG_OVERHEAD)?.checked_add(length)?;
        let Some(batch) = records.get(at..end) else {
            break; // a partial batch at the end of the answer
        };
        last = Some(match (batch.get(16), batch.get(23..27)) {
            (Some(2), Some(delta)) => base + i64::from(i32::from_be_bytes(delta.try_into().ok()?)),
            _ => base,
        });
        at = end;
    }
    last
}

#[cfg(test)]
mod tests {
    use super::last_record_offset;

    /// A v2 batch header (61 bytes, no records) at `base` whose last offset delta is `delta`.
    fn batch(base: i64, delta: i32) -> Vec<u8> {
        let mut b = vec![0u8; 61];
        b[..8].copy_from_slice(&base.to_be_bytes());
        b[8..12].copy_from_slice(&49i32.to_be_bytes());
        b[16] = 2;
        b[23..27].copy_from_slice(&delta.to_be_bytes());
        b
    }

    #[test]
    fn the_last_offset_is_the_last_whole_batch_s_base_plus_its_delta() {
        let mut records = batch(5, 2);
        records.extend(batch(8, 0));
        assert_eq!(last_record_offset(&records), Some(8));
        records.extend(&batch(9, 4)[..30]); // a partial batch is not counted
        assert_eq!(last_record_offset(&records), Some(8));
        assert_eq!(last_record_offset(&batch(5, 2)), Some(7));
        assert_eq!(last_record_offset(&[]), None);
        assert_eq!(last_record_offset(&batch(5, 2)[..40]), None);
    }
}
