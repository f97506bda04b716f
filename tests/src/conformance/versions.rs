//! ApiVersions ranges, and requests at versions a broker does not implement.

use anyhow::Result;
use bytes::BytesMut;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ListOffsetsRequest, ProduceRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::{answered, case, err, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(
        api_versions_implemented_apis,
        "kmock advertises Produce from v3 (Kafka 4.4 advertises v0 and refuses v0-2 when used) and ListOffsets, OffsetCommit, OffsetFetch, DeleteGroups, TxnOffsetCommit, DescribeLogDirs one version below Kafka 4.4"
    ),
    case!(
        api_versions_every_api,
        "kmock implements 45 of Kafka's 77 APIs (no ACLs, SASL, share groups, ...)"
    ),
    case!(api_versions_unsupported_version),
    case!(produce_below_its_lowest_version),
    case!(list_offsets_v0),
    case!(metadata_far_above_its_highest_version),
];

/// The APIs kmock implements (`broker/src/handlers`).
const IMPLEMENTED: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::InitProducerId,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::DescribeConfigs,
    ApiKey::DeleteGroups,
    ApiKey::CreatePartitions,
    ApiKey::OffsetDelete,
    ApiKey::DescribeCluster,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::TxnOffsetCommit,
    ApiKey::DescribeProducers,
    ApiKey::DescribeTransactions,
    ApiKey::ListTransactions,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
    ApiKey::DeleteRecords,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeTopicPartitions,
    ApiKey::ElectLeaders,
    ApiKey::DescribeLogDirs,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::DescribeClientQuotas,
    ApiKey::AlterClientQuotas,
    ApiKey::ListConfigResources,
    ApiKey::AlterReplicaLogDirs,
    ApiKey::UpdateFeatures,
];

fn range(answer: &ApiVersionsResponse, key: i16) -> String {
    match answer.api_keys.iter().find(|k| k.api_key == key) {
        Some(k) => format!("{}..={}", k.min_version, k.max_version),
        None => "absent".to_owned(),
    }
}

fn api_name(key: i16) -> String {
    ApiKey::try_from(key).map_or_else(|_| format!("api {key}"), |k| format!("{k:?}"))
}

async fn api_versions_implemented_apis(cx: Ctx) -> Result<Lines> {
    let answer = cx.connect().await?.api_versions().await?;
    let mut lines = vec![format!("ApiVersions v3: {}", err(answer.error_code))];
    for key in IMPLEMENTED {
        let key = *key as i16;
        lines.push(format!("{}: {}", api_name(key), range(&answer, key)));
    }
    Ok(lines)
}

async fn api_versions_every_api(cx: Ctx) -> Result<Lines> {
    let answer = cx.connect().await?.api_versions().await?;
    let mut keys: Vec<i16> = answer.api_keys.iter().map(|k| k.api_key).collect();
    keys.sort_unstable();
    let mut lines = vec![format!("{} APIs", keys.len())];
    lines.extend(
        keys.iter()
            .map(|k| format!("{}: {}", api_name(*k), range(&answer, *k))),
    );
    Ok(lines)
}

/// ApiVersions v127: Kafka answers at v0 with UNSUPPORTED_VERSION and its ApiVersions range
/// (KIP-511), so that the client can retry at a version both know.
async fn api_versions_unsupported_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut body = BytesMut::new();
    ApiVersionsRequest::default().encode(&mut body, 3)?;
    let raw = answered(client.send_frame(18, 127, 2, 0, &body).await)?;
    let Some(mut raw) = raw else {
        return Ok(vec!["connection closed".to_owned()]);
    };
    let answer = ApiVersionsResponse::decode(&mut raw, 0)?;
    let mut lines = vec![format!("ApiVersions v127: {}", err(answer.error_code))];
    lines.extend(answer.api_keys.iter().map(|k| {
        format!(
            "{}: {}..={}",
            api_name(k.api_key),
            k.min_version,
            k.max_version
        )
    }));
    Ok(lines)
}

/// Kafka closes the connection of a request at a version it does not implement (other than
/// ApiVersions); the next connection works.
pub(super) async fn unsupported(
    cx: &Ctx,
    key: i16,
    version: i16,
    header: i16,
    body: &[u8],
) -> Result<Lines> {
    let client = cx.connect().await?;
    let what = format!("{} v{version}", api_name(key));
    let line = match answered(
        client
            .send_frame(key, version, header, header - 1, body)
            .await,
    ) {
        Ok(None) => format!("{what}: connection closed"),
        Ok(Some(raw)) => format!("{what}: answered ({} bytes)", raw.len()),
        Err(e) => format!("{what}: {e}"),
    };
    let after = cx.connect().await?.api_versions().await?;
    Ok(vec![
        line,
        format!("next connection: ApiVersions {}", err(after.error_code)),
    ])
}

async fn produce_below_its_lowest_version(cx: Ctx) -> Result<Lines> {
    let mut body = BytesMut::new();
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(1000)
        .encode(&mut body, 3)?;
    unsupported(&cx, 0, 2, 1, &body).await
}

/// ListOffsets v0 (with `max_num_offsets`) left Kafka in 4.0 (KIP-896).
async fn list_offsets_v0(cx: Ctx) -> Result<Lines> {
    let mut body = BytesMut::new();
    ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .encode(&mut body, 1)?;
    unsupported(&cx, 2, 0, 1, &body).await
}

async fn metadata_far_above_its_highest_version(cx: Ctx) -> Result<Lines> {
    unsupported(&cx, 3, 99, 2, &[0, 0, 0]).await
}
