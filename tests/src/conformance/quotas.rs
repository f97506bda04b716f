//! Client quotas: AlterClientQuotas setting, removing and validating quotas of user,
//! client-id and ip entities (named and default), and DescribeClientQuotas with exact, default
//! and specified filter components, strict and not, and the filters Kafka refuses.
//!
//! Quotas are cluster-wide on the real broker: every entity named here is made of the case's
//! name and run id ([`Ctx::topic`]), printed short, and every quota a case sets (default
//! entities included) is removed before it ends. A Kafka broker describes from its metadata
//! image, which an alteration reaches a moment after it is answered: the cases wait until a
//! strict describe of what they altered shows it ([`settle`]).

use std::time::Duration;

use anyhow::{bail, Result};
use kafka_protocol::messages::{
    alter_client_quotas_request as alter, describe_client_quotas_request as describe,
    AlterClientQuotasRequest, DescribeClientQuotasRequest,
};
use kafka_protocol::protocol::StrBytes;
use kmock_client::Client;

use super::{case, err, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(client_quotas_set_describe_and_remove),
    case!(client_quotas_alter_errors),
    case!(client_quotas_describe_filter_errors),
];

/// An entity: (type, name), `None` the default entity.
type Entity<'a> = &'a [(&'a str, Option<&'a str>)];
/// A filter: components (type, match type, short name).
type Filter<'a> = &'a [(&'a str, i8, Option<&'a str>)];
/// An operation: (key, value), `None` to remove the key.
type Op<'a> = (&'a str, Option<f64>);

/// What is sent for entity name `short` of type `kind`: the case's full name
/// ([`Ctx::topic`]) of a user or client id, an ip and the empty name as they are.
fn full(cx: &Ctx, kind: &str, short: &str) -> String {
    if kind == "ip" || short.is_empty() {
        short.to_owned()
    } else {
        cx.topic(short)
    }
}

/// `text` with each of the case's full names put back to its short name.
fn shorten(cx: &Ctx, text: &str) -> String {
    // Full names are `<case>-<short>-<run>` ([`Ctx::topic`]).
    let sample = cx.topic("x");
    let run_at = sample.rfind('-').unwrap_or(sample.len());
    let head = &sample[..run_at.saturating_sub(1)];
    let tail = &sample[run_at..];
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(head) {
        out.push_str(&rest[..at]);
        let from = &rest[at..];
        let Some(end) = from.find(tail).map(|e| e + tail.len()) else {
            out.push_str(from);
            return out;
        };
        out.push_str(cx.short(&from[..end]));
        rest = &from[end..];
    }
    out.push_str(rest);
    out
}

/// An answer's entity (type, name) as `type=name` pairs, the name shortened (`<default>` for
/// null), sorted and joined by commas.
fn entity_line<'a>(
    cx: &Ctx,
    entity: impl Iterator<Item = (&'a StrBytes, Option<&'a StrBytes>)>,
) -> String {
    let mut parts: Vec<String> = entity
        .map(|(k, v)| match v {
            Some(v) => format!("{k}={}", cx.short(v)),
            None => format!("{k}=<default>"),
        })
        .collect();
    parts.sort();
    parts.join(",")
}

/// AlterClientQuotas v1 of `entries` (entity names given short, made full here): one line
/// `  ENTITY: ERROR message` per entity answered, sorted (Kafka answers in hash order).
async fn alter_quotas(
    cx: &Ctx,
    client: &Client,
    entries: &[(Entity<'_>, &[Op<'_>])],
    validate_only: bool,
) -> Result<Lines> {
    let request = AlterClientQuotasRequest::default()
        .with_validate_only(validate_only)
        .with_entries(
            entries
                .iter()
                .map(|(entity, ops)| {
                    alter::EntryData::default()
                        .with_entity(
                            entity
                                .iter()
                                .map(|(kind, name)| {
                                    alter::EntityData::default()
                                        .with_entity_type(text(kind))
                                        .with_entity_name(name.map(|n| text(&full(cx, kind, n))))
                                })
                                .collect(),
                        )
                        .with_ops(
                            ops.iter()
                                .map(|(key, value)| {
                                    alter::OpData::default()
                                        .with_key(text(key))
                                        .with_value(value.unwrap_or(0.0))
                                        .with_remove(value.is_none())
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let answer = client.send(request, 1).await?;
    let mut lines: Lines = answer
        .entries
        .iter()
        .map(|e| {
            let entity = e
                .entity
                .iter()
                .map(|d| (&d.entity_type, d.entity_name.as_ref()));
            let message = e
                .error_message
                .as_ref()
                .map(|m| format!(" {}", shorten(cx, m)))
                .unwrap_or_default();
            format!(
                "  {}: {}{message}",
                entity_line(cx, entity),
                err(e.error_code)
            )
        })
        .collect();
    lines.sort();
    let mut out = vec![format!(
        "alter{}:",
        if validate_only {
            " (validate only)"
        } else {
            ""
        }
    )];
    out.extend(lines);
    Ok(out)
}

/// DescribeClientQuotas v1 of `filter` ((type, match type, short name)): `ERROR message` and
/// one line per entry, `  ENTITY: key=value …`, sorted; entries of other runs' named entities
/// are left out (the real broker may hold them).
async fn describe_quotas(
    cx: &Ctx,
    client: &Client,
    filter: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Result<Lines> {
    let answer = client.send(describe_request(cx, filter, strict), 1).await?;
    let said: Vec<String> = filter
        .iter()
        .map(|(kind, m, name)| format!("{kind}/{m}/{}", name.unwrap_or("null")))
        .collect();
    let mut lines = vec![format!(
        "describe [{}]{}: {}{}",
        said.join(" "),
        if strict { " strict" } else { "" },
        err(answer.error_code),
        answer
            .error_message
            .as_ref()
            .map(|m| format!(" {m}"))
            .unwrap_or_default()
    )];
    let mut entries: Lines = answer
        .entries
        .iter()
        .flatten()
        .filter(|e| {
            e.entity.iter().all(|d| {
                d.entity_name
                    .as_ref()
                    .is_none_or(|n| cx.short(n) != n.as_str())
            })
        })
        .map(|e| {
            let entity = e
                .entity
                .iter()
                .map(|d| (&d.entity_type, d.entity_name.as_ref()));
            let mut values: Vec<String> = e
                .values
                .iter()
                .map(|v| format!("{}={}", v.key.as_str(), v.value))
                .collect();
            values.sort();
            format!("  {}: {}", entity_line(cx, entity), values.join(" "))
        })
        .collect();
    entries.sort();
    lines.extend(entries);
    Ok(lines)
}

fn describe_request(
    cx: &Ctx,
    filter: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> DescribeClientQuotasRequest {
    DescribeClientQuotasRequest::default()
        .with_strict(strict)
        .with_components(
            filter
                .iter()
                .map(|(kind, match_type, name)| {
                    describe::ComponentData::default()
                        .with_entity_type(text(kind))
                        .with_match_type(*match_type)
                        .with_match(name.map(|n| text(&full(cx, kind, n))))
                })
                .collect(),
        )
}

/// Waits until a strict describe of `entity` shows exactly `values` (sorted `key=value`;
/// empty: the entity has no quota), as the broker's metadata image catches up with an
/// alteration.
async fn settle(cx: &Ctx, client: &Client, entity: Entity<'_>, values: &str) -> Result<()> {
    let filter: Vec<(&str, i8, Option<&str>)> = entity
        .iter()
        .map(|(kind, name)| (*kind, if name.is_some() { 0 } else { 1 }, *name))
        .collect();
    for _ in 0..600 {
        let answer = client.send(describe_request(cx, &filter, true), 1).await?;
        let mut got: Vec<String> = answer
            .entries
            .iter()
            .flatten()
            .flat_map(|e| {
                e.values
                    .iter()
                    .map(|v| format!("{}={}", v.key.as_str(), v.value))
            })
            .collect();
        got.sort();
        if got.join(" ") == values {
            return Ok(());
        }
        // Polling, the only way a client learns the image has the change.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("quotas of {entity:?} never became {values:?}")
}

/// Quotas on a user, a client id, the two together, the default client id and the default
/// user with a client id; described by exact, default and specified components, strict and
/// not; then changed, removed key by key (removing a key not set succeeds) and described
/// again. `validate_only` stores nothing.
async fn client_quotas_set_describe_and_remove(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let user: Entity = &[("user", Some("u"))];
    let client_id: Entity = &[("client-id", Some("c"))];
    let both: Entity = &[("user", Some("u")), ("client-id", Some("c"))];
    let default_client: Entity = &[("client-id", None)];
    let default_user_client: Entity = &[("user", None), ("client-id", Some("c"))];
    let mut lines = alter_quotas(
        &cx,
        &client,
        &[
            (user, &[("producer_byte_rate", Some(1048576.0))]),
            (
                client_id,
                &[
                    ("consumer_byte_rate", Some(2097152.0)),
                    ("request_percentage", Some(250.5)),
                ],
            ),
            (both, &[("controller_mutation_rate", Some(1000.0))]),
            (
                default_client,
                &[("controller_mutation_rate", Some(5000.0))],
            ),
            (
                default_user_client,
                &[("producer_byte_rate", Some(4194304.0))],
            ),
        ],
        false,
    )
    .await?;
    settle(&cx, &client, user, "producer_byte_rate=1048576").await?;
    settle(
        &cx,
        &client,
        client_id,
        "consumer_byte_rate=2097152 request_percentage=250.5",
    )
    .await?;
    settle(&cx, &client, both, "controller_mutation_rate=1000").await?;
    settle(
        &cx,
        &client,
        default_client,
        "controller_mutation_rate=5000",
    )
    .await?;
    settle(
        &cx,
        &client,
        default_user_client,
        "producer_byte_rate=4194304",
    )
    .await?;
    let filters: &[(Filter, bool)] = &[
        (&[("user", 0, Some("u"))], false),
        (&[("user", 0, Some("u"))], true),
        (&[("client-id", 0, Some("c"))], false),
        (&[("client-id", 1, None)], false),
        (&[("client-id", 1, None)], true),
        (&[("user", 0, Some("u")), ("client-id", 2, None)], false),
        (&[("user", 2, None), ("client-id", 0, Some("c"))], true),
        (&[("user", 1, None), ("client-id", 0, Some("c"))], false),
        (&[("user", 0, Some("nobody"))], false),
        (&[("ip", 2, None)], false),
    ];
    for (filter, strict) in filters {
        lines.extend(describe_quotas(&cx, &client, filter, *strict).await?);
    }
    // validate_only: answered, not stored.
    let never: Entity = &[("client-id", Some("never"))];
    lines.extend(
        alter_quotas(
            &cx,
            &client,
            &[(never, &[("producer_byte_rate", Some(1.0))])],
            true,
        )
        .await?,
    );
    // A change, a removal of one key of two, a removal of a key never set.
    lines.extend(
        alter_quotas(
            &cx,
            &client,
            &[
                (user, &[("producer_byte_rate", Some(2048.0))]),
                (client_id, &[("request_percentage", None)]),
                (both, &[("consumer_byte_rate", None)]),
            ],
            false,
        )
        .await?,
    );
    settle(&cx, &client, user, "producer_byte_rate=2048").await?;
    settle(&cx, &client, client_id, "consumer_byte_rate=2097152").await?;
    lines.extend(describe_quotas(&cx, &client, &[("client-id", 0, Some("c"))], false).await?);
    lines.extend(describe_quotas(&cx, &client, &[("client-id", 0, Some("never"))], false).await?);
    // Everything removed: the entities are gone.
    lines.extend(
        alter_quotas(
            &cx,
            &client,
            &[
                (user, &[("producer_byte_rate", None)]),
                (client_id, &[("consumer_byte_rate", None)]),
                (both, &[("controller_mutation_rate", None)]),
                (default_client, &[("controller_mutation_rate", None)]),
                (default_user_client, &[("producer_byte_rate", None)]),
            ],
            false,
        )
        .await?,
    );
    for entity in [user, client_id, both, default_client, default_user_client] {
        settle(&cx, &client, entity, "").await?;
    }
    lines.extend(describe_quotas(&cx, &client, &[("user", 0, Some("u"))], false).await?);
    Ok(lines)
}

/// Each entity and value Kafka's controller refuses, one entity per request (Kafka checks an
/// entity's keys in hash order, so one problem each): an empty entity, an unknown entity type,
/// an empty name, an ip beside a user, an ip that does not resolve, keys of the other kind of
/// entity, an unknown key, values of 0, below 0, fractional where whole and past an INT; a key
/// given twice and an entity named twice. A valid ip quota, validated only.
async fn client_quotas_alter_errors(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let c: Entity = &[("client-id", Some("c"))];
    let ip: Entity = &[("ip", Some("192.0.2.1"))];
    let attempts: &[(Entity, &[Op])] = &[
        (&[], &[("producer_byte_rate", Some(1.0))]),
        (
            &[("group", Some("g"))],
            &[("producer_byte_rate", Some(1.0))],
        ),
        (&[("user", Some(""))], &[("producer_byte_rate", Some(1.0))]),
        (
            &[("client-id", Some(""))],
            &[("producer_byte_rate", Some(1.0))],
        ),
        (
            &[("ip", None), ("user", Some("u"))],
            &[("connection_creation_rate", Some(1.0))],
        ),
        (
            &[("ip", Some("no-such-host.invalid"))],
            &[("connection_creation_rate", Some(1.0))],
        ),
        (ip, &[("producer_byte_rate", Some(1.0))]),
        (c, &[("connection_creation_rate", Some(1.0))]),
        (c, &[("no_such_quota", Some(1.0))]),
        (c, &[("producer_byte_rate", Some(0.0))]),
        (c, &[("consumer_byte_rate", Some(-5.0))]),
        (c, &[("producer_byte_rate", Some(1.5))]),
        (c, &[("request_percentage", Some(0.0))]),
        (ip, &[("connection_creation_rate", Some(3e9))]),
        (ip, &[("connection_creation_rate", Some(2.5))]),
        (
            c,
            &[
                ("producer_byte_rate", Some(100.0)),
                ("producer_byte_rate", Some(200.0)),
            ],
        ),
    ];
    let mut lines = Vec::new();
    for (entity, ops) in attempts {
        lines.extend(alter_quotas(&cx, &client, &[(entity, ops)], false).await?);
    }
    lines.extend(
        alter_quotas(
            &cx,
            &client,
            &[
                (c, &[("producer_byte_rate", Some(100.0))]),
                (c, &[("consumer_byte_rate", Some(100.0))]),
            ],
            true,
        )
        .await?,
    );
    lines.extend(
        alter_quotas(
            &cx,
            &client,
            &[(ip, &[("connection_creation_rate", Some(10.0))])],
            true,
        )
        .await?,
    );
    lines.extend(describe_quotas(&cx, &client, &[("client-id", 0, Some("c"))], false).await?);
    Ok(lines)
}

/// Filters Kafka refuses as a whole: an empty entity type, a type given twice, an unknown
/// type, an exact match without a name, a default or specified match with one, an unknown
/// match type, an ip component beside a user one.
async fn client_quotas_describe_filter_errors(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let filters: &[&[(&str, i8, Option<&str>)]] = &[
        &[("", 2, None)],
        &[("user", 2, None), ("user", 1, None)],
        &[("group", 2, None)],
        &[("user", 0, None)],
        &[("user", 1, Some("u"))],
        &[("client-id", 2, Some("c"))],
        &[("user", 3, None)],
        &[("ip", 2, None), ("user", 2, None)],
    ];
    let mut lines = Vec::new();
    for filter in filters {
        lines.extend(describe_quotas(&cx, &client, filter, false).await?);
    }
    Ok(lines)
}
