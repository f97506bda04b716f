//! The catalogue of checks: every check's name ([`ALL`]), and for each its family and the
//! requests it reads ([`CHECKS`]), kept in step at compile time.

/// Every check kmock has, by name.
pub const ALL: &[&str] = &[
    "offset-commit-regression",
    "commit-for-unassigned-partition",
    "stale-generation-commit",
    "sequence-gap",
    "sequence-reorder",
    "sequence-overlap",
    "epoch-not-reset",
    "epoch-regression",
    "inflight-exceeded",
    "duplicate-write",
    "out-of-order-write",
    "lost-write",
    "stuck-client",
    "reorder-on-retry",
    "sequence-reused",
    "txn-offset-commit-regression",
    "produce-after-end-txn",
    "end-txn-with-produce-in-flight",
    "read-committed-saw-aborted",
];

/// A family of checks: what they are about and what they need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Committed offsets per group/topic/partition ([`super::commits`]).
    CommitOrder,
    /// Producer sequences per producer id and partition ([`super::sequences`]).
    ProduceSequence,
    /// The partition logs against what was acknowledged ([`super::logs`]); needs the logs, so runs in
    /// process only.
    LogIntegrity,
    /// Clients retrying without the recovery step Kafka's protocol defines ([`super::liveness`]).
    Liveness,
    /// The order of a transaction's requests, and what read_committed consumers were answered
    /// ([`super::txn_commits`], [`super::produce_after_end`], [`super::end_txn_inflight`],
    /// [`super::read_committed`]).
    Transactions,
}

/// What kmock knows of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckInfo {
    /// Its name, as in [`ALL`].
    pub name: &'static str,
    /// Its family.
    pub family: Family,
    /// The requests (Kafka API names) whose partitions it judges one by one: a report names
    /// the entries of those the journal truncated
    /// ([`crate::journal::summary::MAX_SUMMARY_ITEMS`]).
    pub reads: &'static [&'static str],
}

/// Every check of [`ALL`], in the same order, with its family and what it reads: the one place
/// a check says so. A check added to [`ALL`] without its row here does not compile.
#[rustfmt::skip]
pub const CHECKS: &[CheckInfo] = &[
    check("offset-commit-regression",        Family::CommitOrder,     &["OffsetCommit"]),
    check("commit-for-unassigned-partition", Family::CommitOrder,     &["OffsetCommit"]),
    check("stale-generation-commit",         Family::CommitOrder,     &[]),
    check("sequence-gap",                    Family::ProduceSequence, &["Produce"]),
    check("sequence-reorder",                Family::ProduceSequence, &["Produce"]),
    check("sequence-overlap",                Family::ProduceSequence, &["Produce"]),
    check("epoch-not-reset",                 Family::ProduceSequence, &["Produce"]),
    check("epoch-regression",                Family::ProduceSequence, &["Produce"]),
    check("inflight-exceeded",               Family::ProduceSequence, &["Produce"]),
    check("duplicate-write",                 Family::LogIntegrity,    &["Produce"]),
    check("out-of-order-write",              Family::LogIntegrity,    &["Produce"]),
    check("lost-write",                      Family::LogIntegrity,    &["Produce"]),
    check("stuck-client",                    Family::Liveness,        &["OffsetCommit", "Produce", "Fetch", "ListOffsets"]),
    check("reorder-on-retry",                Family::ProduceSequence, &["Produce"]),
    check("sequence-reused",                 Family::ProduceSequence, &["Produce"]),
    check("txn-offset-commit-regression",    Family::Transactions,    &["TxnOffsetCommit"]),
    check("produce-after-end-txn",           Family::Transactions,    &["Produce"]),
    check("end-txn-with-produce-in-flight",  Family::Transactions,    &["Produce"]),
    check("read-committed-saw-aborted",      Family::Transactions,    &["Produce", "Fetch"]),
];

const fn check(name: &'static str, family: Family, reads: &'static [&'static str]) -> CheckInfo {
    CheckInfo {
        name,
        family,
        reads,
    }
}

const fn same_names(all: &[&str], checks: &[CheckInfo]) -> bool {
    if all.len() != checks.len() {
        return false;
    }
    let mut i = 0;
    while i < all.len() {
        let (a, b) = (all[i].as_bytes(), checks[i].name.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut j = 0;
        while j < a.len() {
            if a[j] != b[j] {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

const _: () = assert!(
    same_names(ALL, CHECKS),
    "check::CHECKS must list every check of check::ALL, in the same order, with its family and what it reads"
);

impl CheckInfo {
    /// The row of check `name`, if kmock has such a check.
    pub fn of(name: &str) -> Option<&'static CheckInfo> {
        CHECKS.iter().find(|c| c.name == name)
    }
}
