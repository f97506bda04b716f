//! ListTransactions (API key 66), versions 0–2.
//!
//! As Kafka's `TransactionCoordinator.handleListTransactions` and
//! `TransactionStateManager.listTransactionStates`: the transactional ids this broker
//! coordinates (those of the `__transaction_state` partitions it leads), each with its producer
//! id and state, kept when it passes every filter given: `state_filters` (Kafka's state
//! names; a name Kafka does not know is answered back in `unknown_state_filters` and matches
//! nothing), `producer_id_filters`, from v1 `duration_filter` (ms: only transactions begun
//! more than that long ago; -1 for none; an id whose last transaction's start is unknown
//! passes), from v2 `transactional_id_pattern` (a regular expression the whole id must match,
//! KIP-1152; null or empty for none; one that does not compile is INVALID_REGULAR_EXPRESSION).
//!
//! Deviations from Apache Kafka: ids come in name order, where Kafka's order is its maps';
//! the pattern is read by the `regex` crate, whose syntax is Java's for the common cases
//! (classes, repetition, alternation, anchors) but not for every construct (no
//! look-around or back-references), and a pattern longer than 32 KiB or whose compiled form
//! passes 1 MiB (`a{1000}{1000}`) is INVALID_REGULAR_EXPRESSION, which Java compiles (the
//! parser's memory grows with the pattern); the PrepareCommit, PrepareAbort and PrepareEpochFence
//! states are never listed (kmock never stays in them).

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;

use super::{str_bytes, Ctx};
use crate::state::txn::TxnState;

/// Versions implemented.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// Kafka's `TransactionState` names, as the state filters name them.
const KAFKA_STATES: &[&str] = &[
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

/// Lists the transactions this broker coordinates that pass the request's filters.
pub fn handle(
    ctx: &Ctx<'_>,
    request: ListTransactionsRequest,
    _version: i16,
) -> ListTransactionsResponse {
    let pattern = match request.transactional_id_pattern.as_deref() {
        None | Some("") => None,
        Some(p) => match whole_id_pattern(p) {
            Some(re) => Some(re),
            None => {
                return ListTransactionsResponse::default()
                    .with_error_code(ResponseError::InvalidRegularExpression.code())
            }
        },
    };
    let unknown_state_filters: Vec<_> = request
        .state_filters
        .iter()
        .filter(|s| !KAFKA_STATES.contains(&s.as_str()))
        .cloned()
        .collect();
    let now_ms = ctx.shared.now_ms();
    let state = ctx.shared.state();
    let passes = |id: &str, producer_id: i64, txn_state: TxnState, start_ms: i64| {
        (request.state_filters.is_empty()
            || request
                .state_filters
                .iter()
                .any(|s| s.as_str() == txn_state.name()))
            && (request.producer_id_filters.is_empty()
                || request
                    .producer_id_filters
                    .contains(&ProducerId(producer_id)))
            && (request.duration_filter < 0 || now_ms - start_ms > request.duration_filter)
            && pattern.as_ref().is_none_or(|re| re.is_match(id))
    };
    let mut listed: Vec<TransactionState> = state
        .transactions
        .iter()
        .filter(|(id, _)| state.transaction_coordinator(id) == ctx.node_id)
        .filter(|(id, t)| passes(id, t.producer_id, t.state, t.start_time_ms))
        .map(|(id, t)| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(str_bytes(id)))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(str_bytes(t.state.name()))
        })
        .collect();
    listed.sort_by(|a, b| a.transactional_id.0.cmp(&b.transactional_id.0));
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown_state_filters)
        .with_transaction_states(listed)
}

/// Most bytes of a transactional id pattern compiled; a longer one is refused (the regex
/// parser's memory grows with the pattern before its own size limit applies).
const MAX_PATTERN_BYTES: usize = 32 * 1024;

/// Most bytes one compiled pattern may take.
const MAX_COMPILED_BYTES: usize = 1 << 20;

/// `pattern` as a matcher of whole transactional ids (Java's `Matcher.matches`), `None` when it
/// is too long or not a regular expression on its own: checked alone first, so that a pattern
/// such as `a)|(b` that only parses inside the anchoring group is refused, as Java's
/// `Pattern.compile` refuses it.
fn whole_id_pattern(pattern: &str) -> Option<regex::Regex> {
    let build = |p: &str| {
        regex::RegexBuilder::new(p)
            .size_limit(MAX_COMPILED_BYTES)
            .build()
            .ok()
    };
    if pattern.len() > MAX_PATTERN_BYTES {
        return None;
    }
    build(pattern)?;
    build(&format!("^(?:{pattern})$"))
}
