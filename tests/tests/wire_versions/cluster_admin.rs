//! The cluster-wide admin APIs of `wire_versions`: ListConfigResources (v0 lists the client
//! metrics resources, none; v1 the topics asked for, `t` among them); AlterReplicaLogDirs of
//! `t`'s partitions to broker 1's one log directory (where they are: nothing moves);
//! UpdateFeatures setting `transaction.version` to the level it has (per-feature results up to
//! v1, none from v2).

use anyhow::{ensure, Result};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, ApiKey, ListConfigResourcesRequest, UpdateFeaturesRequest,
};

use super::{Fixture, LED_ELSEWHERE, LED_HERE};
use crate::common::{code_is, name, same, text};

/// The APIs [`check`] knows.
pub const APIS: &[ApiKey] = &[
    ApiKey::ListConfigResources,
    ApiKey::AlterReplicaLogDirs,
    ApiKey::UpdateFeatures,
];

/// Checks the answer of `api` at `v`.
pub async fn check(f: &Fixture, api: ApiKey, v: i16) -> Result<()> {
    let broker = f.broker().await?;
    match api {
        ApiKey::ListConfigResources => {
            let request = ListConfigResourcesRequest::default().with_resource_types(if v >= 1 {
                vec![2]
            } else {
                Vec::new()
            });
            let answer = broker.send(request, v).await?;
            code_is("error", answer.error_code, None)?;
            let listed: Vec<(i8, String)> = answer
                .config_resources
                .iter()
                .map(|r| (r.resource_type, r.resource_name.to_string()))
                .collect();
            if v == 0 {
                same("client metrics resources", listed, Vec::new())?;
            } else {
                ensure!(
                    listed.contains(&(2, "t".to_owned())),
                    "topic t not listed: {listed:?}"
                );
            }
        }
        ApiKey::AlterReplicaLogDirs => {
            let request =
                AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default(
                )
                .with_path(text("/kmock/broker-1/data"))
                .with_topics(vec![AlterReplicaLogDirTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![LED_HERE, LED_ELSEWHERE])])]);
            let answer = broker.send(request, v).await?;
            let codes: Vec<(i32, i16)> = answer
                .results
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| (p.partition_index, p.error_code))
                .collect();
            // Broker 1 holds a replica of both partitions (two brokers, two replicas each).
            same(
                "partitions and errors",
                codes,
                vec![(LED_HERE, 0), (LED_ELSEWHERE, 0)],
            )?;
        }
        _ => {
            let update = FeatureUpdateKey::default()
                .with_feature(text("transaction.version"))
                .with_max_version_level(2);
            let request = UpdateFeaturesRequest::default()
                .with_timeout_ms(30_000)
                .with_feature_updates(vec![update]);
            let answer = broker.send(request, v).await?;
            code_is("error", answer.error_code, None)?;
            let results: Vec<(String, i16)> = answer
                .results
                .iter()
                .map(|r| (r.feature.to_string(), r.error_code))
                .collect();
            let expected = if v >= 2 {
                Vec::new()
            } else {
                vec![("transaction.version".to_owned(), 0)]
            };
            same("per-feature results", results, expected)?;
        }
    }
    Ok(())
}
