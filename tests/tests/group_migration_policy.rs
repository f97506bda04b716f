//! `group.consumer.migration.policy` on the wire, with kmock-client, set through the builder:
//! a ConsumerGroupHeartbeat joining a live classic group is refused under `downgrade` and
//! `disabled` (the upgrade is disabled) and tries the upgrade under `upgrade` and
//! `bidirectional` (refused here because the classic member's metadata is not a consumer
//! protocol subscription, with Kafka's message); a classic JoinGroup to a consumer group with
//! members is INCONSISTENT_GROUP_PROTOCOL only under `disabled`. The classic group is left as it
//! was by every refusal, and the journal shows no conversion. (The conformance cases of
//! `groups/migration.rs` hold the default policy against Kafka 4.4.0.)

mod common;

use anyhow::{ensure, Result};
use common::classic_group::{heartbeat, join, join_request, stable_member, TOPIC};
use common::consumer_group::{said, send};
use common::{code_is, err};
use kafka_protocol::ResponseError::*;
use kmock::{Cluster, MigrationPolicy};
use kmock_client::Client;
use kmock_tests::consumer_group::join as heartbeat_join;

#[tokio::test]
async fn each_policy_allows_or_refuses_the_upgrade_and_classic_joins_as_kafka() -> Result<()> {
    for policy in [
        MigrationPolicy::Bidirectional,
        MigrationPolicy::Upgrade,
        MigrationPolicy::Downgrade,
        MigrationPolicy::Disabled,
    ] {
        let cluster = Cluster::builder()
            .topic(TOPIC, 2)
            .group_consumer_migration_policy(policy)
            .start()
            .await?;
        let client = Client::connect(cluster.brokers()[0].addr).await?;
        let classic = stable_member(&client, "classic").await?;
        let answer = send(&client, heartbeat_join("classic", "m", &[TOPIC])).await?;
        let why = if policy.upgrade_enabled() {
            "because the embedded consumer protocol is malformed"
        } else {
            "because online upgrade is disabled"
        };
        ensure!(
            answer.error_code == GroupIdNotFound.code()
                && answer.error_message.as_ref().map(|m| m.as_str())
                    == Some(&*format!(
                        "Cannot upgrade classic group classic to consumer group {why}."
                    )),
            "{policy:?}: the heartbeat to the classic group: {}",
            said(&answer)
        );
        // The classic group is as it was: its member's heartbeat at generation 1 is fine.
        let beat = heartbeat(&client, "classic", 1, &classic, None).await?;
        code_is("the classic member's heartbeat", beat, None)?;

        // A consumer group with a member, and a classic member joining it.
        let joined = send(&client, heartbeat_join("modern", "m", &[TOPIC])).await?;
        code_is("the consumer member's join", joined.error_code, None)?;
        let first = join(&client, join_request("modern", "", b"x"), 9).await?;
        let expected = if policy == MigrationPolicy::Disabled {
            Some(InconsistentGroupProtocol)
        } else {
            Some(MemberIdRequired)
        };
        ensure!(
            first.error_code == expected.map_or(0, |e| e.code()),
            "{policy:?}: a classic JoinGroup to the consumer group: {}",
            err(first.error_code)
        );
        let converted = cluster
            .journal()
            .entries()
            .iter()
            .filter(|e| e.operation.is_some())
            .count();
        ensure!(
            converted == 0,
            "{policy:?}: {converted} operations journaled"
        );
        cluster.shutdown().await;
    }
    Ok(())
}
