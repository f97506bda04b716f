//! ApiVersions at the top of its range: v5 (KIP-1242) naming the cluster and node the client
//! means to reach (neither, both right, one of them, a wrong one), a v5 frame with a v4 body, v4
//! and v3 with unknown tagged fields, v3 without its tagged-field count, and v6 (one past
//! Kafka 4.4's highest: the v0 UNSUPPORTED_VERSION answer).

use anyhow::Result;
use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::Decodable;

use super::{answered, case, err, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(api_versions_v5_naming_neither_cluster_nor_node),
    case!(api_versions_v5_naming_this_cluster_and_node),
    case!(api_versions_v5_naming_another_node),
    case!(api_versions_v5_naming_another_cluster),
    case!(api_versions_v5_naming_a_cluster_without_a_node),
    case!(api_versions_v5_naming_a_node_without_a_cluster),
    case!(api_versions_v5_with_an_invalid_software_name),
    case!(api_versions_v5_with_a_v4_body),
    case!(api_versions_unknown_tagged_fields),
    case!(api_versions_v3_without_its_tagged_fields),
    case!(api_versions_one_version_past_its_highest),
];

/// A compact string (length + 1 as an unsigned varint, one byte for the short strings here), or
/// null.
fn compact(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        None => buf.put_u8(0),
        Some(s) => {
            buf.put_u8(u8::try_from(s.len() + 1).expect("a short string"));
            buf.put_slice(s.as_bytes());
        }
    }
}

/// A v3+ body: software name and version, then (v5) the cluster id and node id, then the raw
/// tagged fields `tags` (their count first).
fn body(software: &str, target: Option<(Option<&str>, i32)>, tags: &[u8]) -> BytesMut {
    let mut buf = BytesMut::new();
    compact(&mut buf, Some(software));
    compact(&mut buf, Some("1.0"));
    if let Some((cluster, node)) = target {
        compact(&mut buf, cluster);
        buf.put_i32(node);
    }
    buf.put_slice(tags);
    buf
}

/// ApiVersions at `version` with `body` on a connection of its own: `label: ERROR, APIs listed
/// yes|no, ApiVersions MIN..=MAX` (or `absent`), or `label: connection closed`. The answer is
/// decoded at v0 when the broker answers UNSUPPORTED_VERSION (KIP-511), else at `version`.
async fn ask(cx: &Ctx, label: &str, version: i16, body: &[u8]) -> Result<String> {
    let client = cx.connect().await?;
    let Some(raw) = answered(client.send_frame(18, version, 2, 0, body).await)? else {
        return Ok(format!("{label}: connection closed"));
    };
    let code = i16::from_be_bytes([raw[0], raw[1]]);
    let at = if code == 35 { 0 } else { version.min(5) };
    let answer = ApiVersionsResponse::decode(&mut raw.clone(), at)?;
    let own = answer
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
        .map_or("absent".to_owned(), |k| {
            format!("{}..={}", k.min_version, k.max_version)
        });
    let listed = if answer.api_keys.len() > 1 {
        "yes"
    } else {
        "no"
    };
    Ok(format!(
        "{label}: {}, APIs listed {listed}, ApiVersions {own}",
        err(answer.error_code)
    ))
}

/// This broker's cluster id and node id, from Metadata.
async fn target(cx: &Ctx) -> Result<(String, i32)> {
    let metadata = cx.connect().await?.metadata(Some(&[])).await?;
    let cluster = metadata
        .cluster_id
        .map(|c| c.to_string())
        .unwrap_or_default();
    Ok((cluster, metadata.brokers[0].node_id.0))
}

async fn api_versions_v5_naming_neither_cluster_nor_node(cx: Ctx) -> Result<Lines> {
    let b = body("kmock-tests", Some((None, -1)), &[0]);
    Ok(vec![ask(&cx, "v5 null cluster, node -1", 5, &b).await?])
}

async fn api_versions_v5_naming_this_cluster_and_node(cx: Ctx) -> Result<Lines> {
    let (cluster, node) = target(&cx).await?;
    let b = body("kmock-tests", Some((Some(&cluster), node)), &[0]);
    Ok(vec![ask(&cx, "v5 this cluster, this node", 5, &b).await?])
}

/// Another node of this cluster, and node -2 (not the -1 that means none).
async fn api_versions_v5_naming_another_node(cx: Ctx) -> Result<Lines> {
    let (cluster, node) = target(&cx).await?;
    let mut lines = Vec::new();
    for (label, other) in [("node 7", node + 6), ("node -2", -2)] {
        let b = body("kmock-tests", Some((Some(&cluster), other)), &[0]);
        lines.push(ask(&cx, &format!("v5 this cluster, {label}"), 5, &b).await?);
    }
    Ok(lines)
}

/// Another cluster id, and the empty one, with this node.
async fn api_versions_v5_naming_another_cluster(cx: Ctx) -> Result<Lines> {
    let (_, node) = target(&cx).await?;
    let mut lines = Vec::new();
    for (label, cluster) in [("another cluster", "nope"), ("empty cluster", "")] {
        let b = body("kmock-tests", Some((Some(cluster), node)), &[0]);
        lines.push(ask(&cx, &format!("v5 {label}, this node"), 5, &b).await?);
    }
    Ok(lines)
}

async fn api_versions_v5_naming_a_cluster_without_a_node(cx: Ctx) -> Result<Lines> {
    let (cluster, _) = target(&cx).await?;
    let b = body("kmock-tests", Some((Some(&cluster), -1)), &[0]);
    Ok(vec![ask(&cx, "v5 this cluster, node -1", 5, &b).await?])
}

async fn api_versions_v5_naming_a_node_without_a_cluster(cx: Ctx) -> Result<Lines> {
    let (_, node) = target(&cx).await?;
    let mut lines = Vec::new();
    for other in [node, -2] {
        let b = body("kmock-tests", Some((None, other)), &[0]);
        let label = format!(
            "v5 null cluster, node {}",
            if other == node { "this" } else { "-2" }
        );
        lines.push(ask(&cx, &label, 5, &b).await?);
    }
    Ok(lines)
}

/// The software name is checked before the cluster and node.
async fn api_versions_v5_with_an_invalid_software_name(cx: Ctx) -> Result<Lines> {
    let (_, node) = target(&cx).await?;
    let mut lines = Vec::new();
    for (label, target) in [
        ("neither", (None, -1)),
        ("another cluster", (Some("nope"), node)),
    ] {
        let b = body("bad name!", Some(target), &[0]);
        lines.push(ask(&cx, &format!("v5 bad software name, {label}"), 5, &b).await?);
    }
    Ok(lines)
}

/// A v5 header on a v4 body: the body ends where the cluster id should start.
async fn api_versions_v5_with_a_v4_body(cx: Ctx) -> Result<Lines> {
    let b = body("kmock-tests", None, &[0]);
    Ok(vec![ask(&cx, "v5 with a v4 body", 5, &b).await?])
}

/// One tagged field of a tag no version defines (5, two bytes), at v3, v4 and v5.
async fn api_versions_unknown_tagged_fields(cx: Ctx) -> Result<Lines> {
    let tags = [1, 5, 2, b'a', b'b'];
    let mut lines = Vec::new();
    for version in [3, 4] {
        let b = body("kmock-tests", None, &tags);
        lines.push(ask(&cx, &format!("v{version} unknown tag"), version, &b).await?);
    }
    let b = body("kmock-tests", Some((None, -1)), &tags);
    lines.push(ask(&cx, "v5 unknown tag", 5, &b).await?);
    Ok(lines)
}

/// A flexible body that stops before its tagged-field count, and one with bytes after it.
async fn api_versions_v3_without_its_tagged_fields(cx: Ctx) -> Result<Lines> {
    let short = body("kmock-tests", None, &[]);
    let long = body("kmock-tests", None, &[0, 1, 2, 3]);
    Ok(vec![
        ask(&cx, "v3 without tagged fields", 3, &short).await?,
        ask(&cx, "v3 with trailing bytes", 3, &long).await?,
    ])
}

async fn api_versions_one_version_past_its_highest(cx: Ctx) -> Result<Lines> {
    let b = body("kmock-tests", Some((None, -1)), &[0]);
    Ok(vec![ask(&cx, "v6", 6, &b).await?])
}
