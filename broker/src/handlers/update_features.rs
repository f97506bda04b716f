//! UpdateFeatures (API key 57), versions 0–2.
//!
//! The one feature kmock knows is `transaction.version` (levels 0–2, finalized at the
//! cluster's [`crate::TransactionVersion`]). As Kafka's controller (`FeatureControlManager`)
//! validates an update, the first bad one fails the whole request with INVALID_UPDATE_VERSION
//! at the top level, no per-feature results, and Kafka's message ("The update failed for all
//! features since the following feature had an error: …"): a feature not known ("Local
//! controller N does not support this feature."), a level past 0–2 ("… only supports versions
//! 0-2"), an upgrade type other than upgrade (1), safe (2) or unsafe (3) downgrade ("The
//! controller does not support the given upgrade type."), a lower level with the upgrade type
//! upgrade ("Can't downgrade the version of this feature without setting the upgrade type to
//! either safe or unsafe downgrade."; v0's `allow_downgrade` false is upgrade). Otherwise NONE
//! with each feature's result NONE (v0–1; v2 answers none). A feature named twice is checked
//! and answered twice, as Kafka does.
//!
//! Deviations from Apache Kafka: kmock cannot change `transaction.version` at run time (a
//! cluster is built with it, `Cluster::builder().transaction_version`): an update to another
//! level that passes validation is refused with INVALID_UPDATE_VERSION and a message saying so,
//! unless `validate_only`; Kafka's other features (`metadata.version`, `kraft.version`,
//! `group.version`, …) are unknown to kmock, as ApiVersions does not list them, and so is
//! `eligible.leader.replicas.version`, which ApiVersions lists (finalized 1) from 4.1: an
//! update of it is refused as a feature the controller does not support, where Kafka checks
//! it as it checks `transaction.version` (levels 0–1).

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::api_versions::TRANSACTION_VERSION;
use super::Ctx;

/// Versions implemented.
pub const VERSIONS: VersionRange = UpdateFeaturesRequest::VERSIONS;

const UPGRADE: i8 = 1;
const UNSAFE_DOWNGRADE: i8 = 3;

/// Validates (and, where nothing would change, applies) each feature update.
pub fn handle(
    ctx: &Ctx<'_>,
    request: UpdateFeaturesRequest,
    version: i16,
) -> UpdateFeaturesResponse {
    let current = ctx.shared.config.transaction_version.level();
    let controller = ctx
        .shared
        .brokers
        .first()
        .map_or(ctx.node_id, |b| b.node_id);
    let validate_only = version >= 1 && request.validate_only;
    for update in &request.feature_updates {
        let upgrade_type = if version == 0 {
            if update.allow_downgrade {
                2
            } else {
                UPGRADE
            }
        } else {
            update.upgrade_type
        };
        let level = update.max_version_level;
        let problem = if update.feature.as_str() != TRANSACTION_VERSION {
            Some(format!(
                "Local controller {controller} does not support this feature."
            ))
        } else if !(0..=2).contains(&level) {
            Some(format!(
                "Local controller {controller} only supports versions 0-2"
            ))
        } else if !(UPGRADE..=UNSAFE_DOWNGRADE).contains(&upgrade_type) {
            Some("The controller does not support the given upgrade type.".to_owned())
        } else if level < current && upgrade_type == UPGRADE {
            Some(
                "Can't downgrade the version of this feature without setting the upgrade type \
                 to either safe or unsafe downgrade."
                    .to_owned(),
            )
        } else if level != current && !validate_only {
            Some(format!(
                "kmock cannot change {TRANSACTION_VERSION} at run time: build the cluster with \
                 the transaction version wanted"
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return UpdateFeaturesResponse::default()
                .with_error_code(ResponseError::InvalidUpdateVersion.code())
                .with_error_message(Some(StrBytes::from_string(format!(
                    "The update failed for all features since the following feature had an \
                     error: Invalid update version {level} for feature {}. {problem}",
                    update.feature.as_str()
                ))));
        }
    }
    let results = if version >= 2 {
        Vec::new()
    } else {
        request
            .feature_updates
            .iter()
            .map(|u| {
                UpdatableFeatureResult::default()
                    .with_feature(u.feature.clone())
                    // Kafka's per-feature message of a success is the error's name.
                    .with_error_message(Some(StrBytes::from_static_str("NONE")))
            })
            .collect()
    };
    UpdateFeaturesResponse::default()
        .with_error_message(None)
        .with_results(results)
}
