//! FindCoordinator for groups at each version (one key before v4, batched keys from v4), with
//! several keys, a key named twice, no keys, the empty key and an unknown key type.

use anyhow::Result;
use kafka_protocol::messages::FindCoordinatorRequest;
use kmock_client::Client;

use super::coordinator;
use crate::conformance::{answered, case, err, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(find_coordinator_versions),
    case!(find_coordinator_key_types_and_empty_keys),
];

/// FindCoordinator for a group at `version` (v0–v3 by `key`, v4 and later by
/// `coordinator_keys`): error and whether the coordinator is node 1.
async fn find(client: &Client, version: i16, key_type: i8, keys: &[&str]) -> Result<String> {
    let mut request = FindCoordinatorRequest::default();
    if version < 4 {
        request = request.with_key(text(keys[0]));
        if version >= 1 {
            request = request.with_key_type(key_type);
        }
    } else {
        request = request
            .with_key_type(key_type)
            .with_coordinator_keys(keys.iter().map(|k| text(k)).collect());
    }
    let Some(answer) = answered(client.send(request, version).await)? else {
        return Ok(format!("v{version} type {key_type}: connection closed"));
    };
    if version < 4 {
        return Ok(format!(
            "v{version} type {key_type}: {} node {}",
            err(answer.error_code),
            answer.node_id.0
        ));
    }
    let keyed: Vec<String> = answer
        .coordinators
        .iter()
        .map(|c| {
            format!(
                "{}: {} node {}",
                keys.iter()
                    .position(|k| **k == *c.key.as_str())
                    .map_or(-1, |i| i as i32),
                err(c.error_code),
                c.node_id.0
            )
        })
        .collect();
    Ok(format!(
        "v{version} type {key_type}: [{}]",
        keyed.join(", ")
    ))
}

async fn find_coordinator_versions(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let mut lines = Vec::new();
    for version in 0..=6 {
        lines.push(find(&client, version, 0, &[&group]).await?);
    }
    Ok(lines)
}

async fn find_coordinator_key_types_and_empty_keys(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (a, b) = (cx.topic("a"), cx.topic("b"));
    coordinator(&client, &a).await?;
    let mut lines = vec![
        find(&client, 4, 0, &[&a, &b, &a]).await?,
        find(&client, 4, 0, &[]).await?,
        find(&client, 4, 0, &[""]).await?,
        find(&client, 3, 0, &[""]).await?,
    ];
    let client = cx.connect().await?;
    lines.push(find(&client, 4, 7, &[&a]).await?);
    let client = cx.connect().await?;
    lines.push(find(&client, 3, 7, &[&a]).await?);
    Ok(lines)
}
