//! Consumer-group helpers over the journal: which requests belong to a group, which were
//! answered without error, and the `__consumer_offsets` partition that picks its coordinator.

use kmock::Entry;

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
