//! Coordinator placement, as Kafka: a key is hashed to a partition of an internal topic
//! (`__consumer_offsets` for groups, `__transaction_state` for transactional ids) and that
//! partition's leader is the coordinator.

/// Partitions of `__transaction_state` (Kafka's `transaction.state.log.num.partitions` default).
pub const TRANSACTION_STATE_PARTITIONS: i32 = 50;

/// The internal-topic partition for `key`: `abs(key.hashCode()) % partitions`, with Java's
/// `String.hashCode` over UTF-16 code units and Kafka's `Utils.abs` (`n & 0x7fffffff`).
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    let hash = key.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    (hash & 0x7fff_ffff) % partitions
}

/// The coordinator's node id: the leader of the key's partition, internal topics' partitions
/// being led round-robin like any topic's (`nodes[p % nodes.len()]`).
pub fn coordinator_for(key: &str, partitions: i32, nodes: &[i32]) -> i32 {
    nodes[partition_for(key, partitions) as usize % nodes.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_matches_java_string_hash_code() {
        // "hello".hashCode() == 99162322 in Java; 99162322 % 50 == 22.
        assert_eq!(partition_for("hello", 50), 22);
        // A key whose hashCode is negative: "polygenelubricants".hashCode() == i32::MIN.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
    }
}
