//! librdkafka's commit retries: which `offset-commit-regression` violations are the client
//! re-sending a commit that was not stored after newer ones were (a real client behaviour that
//! Kafka stores the same way), recognized from the journal.

use kmock::journal::RequestSummary;
use kmock::{Entry, Violation};

/// One partition of an OffsetCommit request, as journaled.
pub struct Committed {
    /// The request's seq.
    pub seq: u64,
    /// The member id it carried.
    pub member: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// Its answer for that partition (`None`: never answered).
    pub error_code: Option<i16>,
}

/// Every partition of every OffsetCommit in a journal's `entries`, in arrival order.
pub fn commits(entries: &[Entry]) -> Vec<Committed> {
    entries
        .iter()
        .filter_map(|e| match &e.request {
            Some(RequestSummary::OffsetCommit(c)) => Some((e.seq, c)),
            _ => None,
        })
        .flat_map(|(seq, c)| {
            c.partitions.iter().map(move |p| Committed {
                seq,
                member: c.member_id.clone(),
                topic: p.topic.clone(),
                partition: p.partition,
                offset: p.offset,
                error_code: p.error_code,
            })
        })
        .collect()
}

/// Whether an `offset-commit-regression` is librdkafka re-sending, after newer commits were
/// stored, a commit an earlier attempt did not store: the lower offset was first sent, by the
/// same member for the same partition, and refused (NOT_COORDINATOR, or another coordinator
/// error while the group moved) or never answered (its connection cut by the broker going
/// down).
pub fn is_stale_commit_retry(entries: &[Entry], violation: &Violation) -> bool {
    let Some(lower) = violation.entries.last() else {
        return false;
    };
    let all = commits(entries);
    all.iter().filter(|c| c.seq == lower.seq).any(|c| {
        violation
            .key
            .ends_with(&format!("/{}-{}", c.topic, c.partition))
            && all.iter().any(|earlier| {
                earlier.seq < lower.seq
                    && earlier.member == c.member
                    && earlier.topic == c.topic
                    && earlier.partition == c.partition
                    && earlier.offset == c.offset
                    && earlier.error_code != Some(0)
            })
    })
}
