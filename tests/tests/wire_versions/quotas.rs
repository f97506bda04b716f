//! The client quota APIs of `wire_versions`: each version sets a `producer_byte_rate` of its
//! own on a client id of its own (AlterClientQuotas), and reads it back by a strict exact
//! filter (DescribeClientQuotas), the other API at its highest version.

use anyhow::{anyhow, Result};
use kafka_protocol::messages::{
    alter_client_quotas_request, describe_client_quotas_request, AlterClientQuotasRequest, ApiKey,
    DescribeClientQuotasRequest,
};

use super::Fixture;
use crate::common::{code_is, same, text};

/// The APIs [`check`] knows.
pub const APIS: &[ApiKey] = &[ApiKey::DescribeClientQuotas, ApiKey::AlterClientQuotas];

/// Checks the answer of `api` at `v`.
pub async fn check(f: &Fixture, api: ApiKey, v: i16) -> Result<()> {
    let client_id = format!("quota-{}-v{v}", api as i16);
    let rate = 1_000.0 + f64::from(v);
    let (alter_at, describe_at) = match api {
        ApiKey::AlterClientQuotas => (v, 1),
        _ => (1, v),
    };
    let broker = f.broker().await?;
    let entity = alter_client_quotas_request::EntityData::default()
        .with_entity_type(text("client-id"))
        .with_entity_name(Some(text(&client_id)));
    let op = alter_client_quotas_request::OpData::default()
        .with_key(text("producer_byte_rate"))
        .with_value(rate);
    let request = AlterClientQuotasRequest::default().with_entries(vec![
        alter_client_quotas_request::EntryData::default()
            .with_entity(vec![entity])
            .with_ops(vec![op]),
    ]);
    let altered = broker.send(request, alter_at).await?;
    let entry = altered
        .entries
        .first()
        .ok_or(anyhow!("no entry answered"))?;
    code_is("alter error", entry.error_code, None)?;
    let component = describe_client_quotas_request::ComponentData::default()
        .with_entity_type(text("client-id"))
        .with_match_type(0)
        .with_match(Some(text(&client_id)));
    let request = DescribeClientQuotasRequest::default()
        .with_components(vec![component])
        .with_strict(true);
    let described = broker.send(request, describe_at).await?;
    code_is("describe error", described.error_code, None)?;
    let values: Vec<(String, f64)> = described
        .entries
        .iter()
        .flatten()
        .flat_map(|e| e.values.iter().map(|v| (v.key.to_string(), v.value)))
        .collect();
    same(
        "quotas described",
        values,
        vec![("producer_byte_rate".to_owned(), rate)],
    )
}
