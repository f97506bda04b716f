//! Coordinator placement, as Kafka: a key is hashed to a partition of an internal topic
//! (`__consumer_offsets` for groups, `__transaction_state` for transactional ids) and that
//! partition's leader is the coordinator ([`super::ClusterState::group_coordinator`]).

/// Partitions of `__consumer_offsets` (Kafka's `offsets.topic.num.partitions` default).
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 50;
/// Partitions of `__transaction_state` (Kafka's `transaction.state.log.num.partitions` default).
pub const TRANSACTION_STATE_PARTITIONS: i32 = 50;

/// The internal-topic partition for `key`: `Utils.abs(key.hashCode()) % partitions`, with
/// Java's `String.hashCode` over UTF-16 code units and Kafka's `Utils.abs` (`Math.abs`, with
/// `Integer.MIN_VALUE` mapped to 0), as `GroupMetadataManager.partitionFor` and
/// `TransactionStateManager.partitionFor`.
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    let hash = key.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_matches_java_string_hash_code() {
        // "hello".hashCode() == 99162322 in Java; 99162322 % 50 == 22.
        assert_eq!(partition_for("hello", 50), 22);
        // A key whose hashCode is i32::MIN: Utils.abs maps it to 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // A negative hashCode: "txn-10".hashCode() == -859841438; abs % 50 == 38 (masking the
        // sign bit instead, as Utils.toPositive does, would give 10).
        assert_eq!(partition_for("txn-10", 50), 38);
    }
}
