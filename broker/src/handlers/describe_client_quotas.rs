//! DescribeClientQuotas (API key 48), versions 0–1.
//!
//! Lists the stored client quotas ([`crate::state::quotas`]) whose entity a filter selects, as
//! Kafka's `ClientQuotasImage.describe` (a KRaft broker answers from its metadata image): per
//! component, an entity type with an exact name (match type 0), its default entity (1) or any
//! entity of the type (2); `strict` keeps only entities of exactly the filter's types, and an
//! empty filter selects every entity (none if strict). A malformed filter is answered as a
//! whole with its error and no entries: an empty or repeated entity type, a match type with a
//! name it must not have (or without one it needs), an unknown match type or an ip component
//! beside a user or client-id one INVALID_REQUEST, an entity type other than `user`,
//! `client-id` and `ip` UNSUPPORTED_VERSION, each with Kafka's message.
//!
//! Deviations from Apache Kafka: entries and their entity types come in name order, where
//! Kafka answers in hash-map order. Kafka answers from its metadata image, which a quota just
//! altered reaches a moment after AlterClientQuotas answers; kmock's answer has it at once.

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::{Message, VersionRange};

use super::{str_bytes, Ctx};

/// Versions implemented.
pub const VERSIONS: VersionRange = DescribeClientQuotasRequest::VERSIONS;

/// Lists the quotas the filter selects.
pub fn handle(
    ctx: &Ctx<'_>,
    request: DescribeClientQuotasRequest,
    _version: i16,
) -> DescribeClientQuotasResponse {
    let filter: Vec<(String, i8, Option<String>)> = request
        .components
        .iter()
        .map(|c| {
            (
                c.entity_type.to_string(),
                c.match_type,
                c._match.as_ref().map(ToString::to_string),
            )
        })
        .collect();
    let state = ctx.shared.state();
    match state.client_quotas.describe(&filter, request.strict) {
        Ok(found) => {
            let entries = found
                .into_iter()
                .map(|(entity, values)| {
                    EntryData::default()
                        .with_entity(
                            entity
                                .iter()
                                .map(|(kind, name)| {
                                    EntityData::default()
                                        .with_entity_type(str_bytes(kind))
                                        .with_entity_name(name.as_deref().map(str_bytes))
                                })
                                .collect(),
                        )
                        .with_values(
                            values
                                .iter()
                                .map(|(k, v)| {
                                    ValueData::default().with_key(str_bytes(k)).with_value(*v)
                                })
                                .collect(),
                        )
                })
                .collect();
            // Kafka's answer carries an empty message, not a null one, when all is well.
            DescribeClientQuotasResponse::default()
                .with_error_message(Some(str_bytes("")))
                .with_entries(Some(entries))
        }
        Err((error, message)) => DescribeClientQuotasResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(str_bytes(&message)))
            .with_entries(None),
    }
}
