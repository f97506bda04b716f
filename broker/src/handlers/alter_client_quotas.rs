//! AlterClientQuotas (API key 49), versions 0–1.
//!
//! Sets and removes client quotas ([`crate::state::quotas`]) as Kafka's controller
//! (`ClientQuotaControlManager.alterClientQuotas`) does: per entity, the entity types `user`,
//! `client-id` and `ip` (a null name is the type's default entity), an ip alone and an IP
//! address or a name that resolves; the keys `producer_byte_rate`, `consumer_byte_rate` (whole
//! numbers), `request_percentage` and `controller_mutation_rate` for users and client ids,
//! `connection_creation_rate` (a whole number up to 2^31 − 1) for ips; every value above 0.
//! The first problem refuses the entity with INVALID_REQUEST and Kafka's message; removing a
//! key that is not set is a success. An entity named twice, or with a key given twice, is
//! answered INVALID_REQUEST "Ignoring duplicate entity …", as Kafka answers it. `validate_only`
//! checks and changes nothing. What is set is honoured: `producer_byte_rate` throttles Produce
//! and `consumer_byte_rate` Fetch ([`crate::state::quotas::rate`]).
//!
//! Deviations from Apache Kafka: entries are answered in order of first appearance and entity
//! types in name order, where Kafka answers in hash-map order; `request_percentage`,
//! `controller_mutation_rate` and `connection_creation_rate` are stored and described but not
//! enforced; the duplicate-entity message prints a two-type entity in name order. The host
//! names of ip entities are looked up before the state is locked, at most
//! [`MAX_LOOKUPS`] distinct names per request, together under one [`LOOKUP_TIMEOUT`]: a name
//! past the cap, or not resolved when the timeout ends, is refused as unresolvable ("… is not
//! a valid IP or resolvable host."), where Kafka resolves each name in turn
//! (`InetAddress.getByName`) for as long as the resolver takes.

use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::{Message, VersionRange};

use std::collections::BTreeSet;
use std::time::Duration;

use super::{str_bytes, Ctx};
use crate::state::quotas::{names_to_resolve, Alteration, Entity};

/// Versions implemented.
pub const VERSIONS: VersionRange = AlterClientQuotasRequest::VERSIONS;

/// Most distinct ip host names one request has looked up; the others are refused as
/// unresolvable (a deviation: Kafka looks up every one).
pub const MAX_LOOKUPS: usize = 64;

/// How long one request's host name lookups may take together; a name not resolved by then is
/// refused as unresolvable (a deviation: Kafka waits for the resolver).
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The names among `names` (the first [`MAX_LOOKUPS`]) that resolve to an address within
/// [`LOOKUP_TIMEOUT`], looked up concurrently on tokio's resolver, no lock held.
async fn resolve(names: BTreeSet<String>) -> BTreeSet<String> {
    let lookups = names.into_iter().take(MAX_LOOKUPS).map(|name| async move {
        let found = tokio::net::lookup_host((name.as_str(), 0))
            .await
            .is_ok_and(|mut addrs| addrs.next().is_some());
        found.then_some(name)
    });
    let mut resolved = BTreeSet::new();
    let mut pending: futures::stream::FuturesUnordered<_> = lookups.collect();
    // The names resolved when the timeout ends count; the others do not.
    let _ = tokio::time::timeout(LOOKUP_TIMEOUT, async {
        while let Some(found) = futures::StreamExt::next(&mut pending).await {
            resolved.extend(found);
        }
    })
    .await;
    resolved
}

/// Applies (or, `validate_only`, checks) each entity's alterations.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: AlterClientQuotasRequest,
    _version: i16,
) -> AlterClientQuotasResponse {
    // Kafka reads each entry's entity into a map: a type named twice keeps its last name.
    let alterations: Vec<Alteration> = request
        .entries
        .iter()
        .map(|e| Alteration {
            entity: e
                .entity
                .iter()
                .map(|d| {
                    (
                        d.entity_type.to_string(),
                        d.entity_name.as_ref().map(ToString::to_string),
                    )
                })
                .collect::<Entity>(),
            ops: e
                .ops
                .iter()
                .map(|op| (op.key.to_string(), (!op.remove).then_some(op.value)))
                .collect(),
        })
        .collect();
    // Before the lock: a slow resolver must not hold up every other client.
    let resolved = resolve(names_to_resolve(&alterations)).await;
    if !request.validate_only && !alterations.is_empty() {
        // Before the change, so no request after it skips the quotas.
        ctx.shared
            .client_quotas_set
            .store(true, std::sync::atomic::Ordering::Release);
    }
    let results =
        ctx.shared
            .state()
            .client_quotas
            .alter(&alterations, request.validate_only, &resolved);
    let entries = results
        .into_iter()
        .map(|(entity, result)| {
            let entry = EntryData::default().with_entity(
                entity
                    .iter()
                    .map(|(kind, name)| {
                        EntityData::default()
                            .with_entity_type(str_bytes(kind))
                            .with_entity_name(name.as_deref().map(str_bytes))
                    })
                    .collect(),
            );
            match result {
                // Kafka's `ApiError.NONE` carries a null message.
                Ok(()) => entry.with_error_message(None),
                Err((error, message)) => entry
                    .with_error_code(error.code())
                    .with_error_message(Some(str_bytes(&message))),
            }
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}
