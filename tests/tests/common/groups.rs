//! Consumer-group helpers over the journal: which requests belong to a group, which were
//! answered without error, and the `__consumer_offsets` partition that picks its coordinator.

use std::collections::HashMap;

use kmock::journal::RequestSummary;
use kmock::{Entry, JournalSnapshot};

/// Kafka's internal topic whose partition leaders coordinate groups.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// The `__consumer_offsets` partition of `group` among Kafka's default 50:
/// `Utils.abs(group.hashCode()) % 50`, as `GroupMetadataManager.partitionFor` computes it
/// (Java's `String.hashCode` over UTF-16 units; `Integer.MIN_VALUE` maps to 0).
pub fn offsets_partition(group: &str) -> i32 {
    let hash = group.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    if hash == i32::MIN {
        0
    } else {
        hash.abs() % 50
    }
}

/// Whether `e` is a request naming `group` (JoinGroup, Heartbeat, OffsetCommit, …).
pub fn of_group(e: &Entry, group: &str) -> bool {
    e.groups().contains(&group)
}

/// Whether `e` was answered with no error anywhere in its answer.
pub fn answered_ok(e: &Entry) -> bool {
    e.response
        .as_ref()
        .is_some_and(|r| r.error_codes.is_empty())
}

/// A Fetch of a partition below an offset the group had stored for it before: (partition,
/// fetch seq, as a line).
pub type Refetch = (i32, u64, String);

/// Fetches of `topic`, by clients whose id starts with `clients`, below an offset `group` had
/// stored for the partition before the fetch arrived: messages a commit said were done, handed
/// out again.
pub fn fetched_below_commits(
    entries: &[Entry],
    group: &str,
    topic: &str,
    clients: &str,
) -> Vec<Refetch> {
    let mut committed: HashMap<i32, (i64, u64)> = HashMap::new();
    let mut found = Vec::new();
    for e in entries {
        match &e.request {
            Some(RequestSummary::OffsetCommit(c)) if c.group_id == group => {
                for p in c
                    .partitions
                    .iter()
                    .filter(|p| p.topic == topic && p.error_code == Some(0))
                {
                    let slot = committed.entry(p.partition).or_insert((p.offset, e.seq));
                    if p.offset > slot.0 {
                        *slot = (p.offset, e.seq);
                    }
                }
            }
            Some(RequestSummary::Fetch(f))
                if e.client_id
                    .as_deref()
                    .is_some_and(|c| c.starts_with(clients)) =>
            {
                for p in f.partitions.iter().filter(|p| p.topic == topic) {
                    if let Some((offset, seq)) = committed.get(&p.partition) {
                        if p.fetch_offset < *offset {
                            found.push((
                                p.partition,
                                e.seq,
                                format!(
                                    "Fetch seq {} by {:?} of {topic}-{} at {} after OffsetCommit seq {seq} stored {offset}",
                                    e.seq, e.client_id, p.partition, p.fetch_offset
                                ),
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// Fails unless the group's members spoke the KIP-848 consumer protocol only: at least one
/// ConsumerGroupHeartbeat and no JoinGroup in the journal. Gives the heartbeat count.
pub fn consumer_protocol_only(journal: &JournalSnapshot) -> anyhow::Result<usize> {
    let heartbeats = journal.api("ConsumerGroupHeartbeat").count();
    let joins = journal.api("JoinGroup").count();
    anyhow::ensure!(
        heartbeats > 0 && joins == 0,
        "the members sent {heartbeats} ConsumerGroupHeartbeat and {joins} JoinGroup requests: not the consumer protocol"
    );
    Ok(heartbeats)
}
