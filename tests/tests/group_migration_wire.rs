//! KIP-848's online migration on the wire, with kmock-client.
//!
//! `group.consumer.migration.policy`, set through the builder:
//! a ConsumerGroupHeartbeat joining a live classic group is refused under `downgrade` and
//! `disabled` (the upgrade is disabled) and tries the upgrade under `upgrade` and
//! `bidirectional` (refused here because the classic member's metadata is not a consumer
//! protocol subscription, with Kafka's message); a classic JoinGroup to a consumer group with
//! members is INCONSISTENT_GROUP_PROTOCOL only under `disabled`. The classic group is left as it
//! was by every refusal, and the journal shows no conversion. (The conformance cases of
//! `groups/migration.rs` hold the default policy against Kafka 4.4.0.)
//!
//! A cooperative classic member upgraded into a consumer group, committing at its old
//! generation after it moved to the next: the partition it kept is stored (Kafka 4.4 takes a
//! commit at an older member epoch for partitions owned since then, KIP-1251, for classic
//! members too), the one it gave up refused with STALE_MEMBER_EPOCH; the checks name the
//! refusal as a warning and the stored commit not at all.

mod common;

use anyhow::{ensure, Result};
use common::classic_group::{heartbeat, join, join_request, stable_member, TOPIC};
use common::consumer_group::{said, send};
use common::{code_is, err};
use std::collections::BTreeSet;
use std::time::Duration;

use common::classic_group::sync;
use kafka_protocol::messages::JoinGroupRequest;
use kafka_protocol::ResponseError::*;
use kmock::check::Severity;
use kmock::{Checks, Cluster, MigrationPolicy};
use kmock_client::Client;
use kmock_tests::consumer_group::{
    classic_assignment, classic_subscription, join as heartbeat_join, offset_commit,
};

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

/// A JoinGroup of `member` to `group` whose subscription to [`TOPIC`] lists `owned` (as a
/// cooperative member rejoins, still owning them).
fn join_owning(group: &str, member: &str, owned: &[i32]) -> JoinGroupRequest {
    join_request(group, member, &classic_subscription(TOPIC, owned))
}

#[tokio::test]
async fn a_classic_members_commit_at_its_previous_generation_is_judged_by_member_epoch(
) -> Result<()> {
    // Every change gets its target at once (Kafka 4.4 computes one at most every second).
    let cluster = Cluster::builder()
        .topic(TOPIC, 2)
        .consumer_group_assignment_interval(Duration::ZERO)
        .start()
        .await?;
    let c = Client::connect(cluster.brokers()[0].addr).await?;
    // A classic member alone, owning both partitions at generation 1.
    let first = join(&c, join_owning("g", "", &[]), 9).await?;
    let id = first.member_id.to_string();
    let joined = join(&c, join_owning("g", &id, &[]), 9).await?;
    code_is("the classic join", joined.error_code, None)?;
    let both = classic_assignment(TOPIC, &[0, 1]);
    let synced = sync(&c, "g", joined.generation_id, &id, &[(&id, &both)]).await?;
    code_is("the leader's sync", synced.error_code, None)?;
    // A consumer-protocol member upgrades the group; the classic member must give one up.
    let m = send(&c, heartbeat_join("g", "m", &[TOPIC])).await?;
    ensure!(m.error_code == 0 && m.member_epoch == 2, "{}", said(&m));
    let rejoined = join(&c, join_owning("g", &id, &[0, 1]), 9).await?;
    ensure!(
        rejoined.error_code == 0 && rejoined.generation_id == 1,
        "revoking, the classic member stays at generation 1: {} {}",
        err(rejoined.error_code),
        rejoined.generation_id
    );
    let kept = sync(&c, "g", 1, &id, &[]).await?;
    code_is("the revoking member's sync", kept.error_code, None)?;
    let kept: BTreeSet<i32> = [0, 1]
        .into_iter()
        .filter(|p| classic_assignment(TOPIC, &[*p]) == kept.assignment)
        .collect();
    ensure!(kept.len() == 1, "one partition kept, not {kept:?}");
    let kept = *kept.first().expect("one");
    let moved = join(&c, join_owning("g", &id, &[kept]), 9).await?;
    ensure!(
        moved.error_code == 0 && moved.generation_id == 2,
        "revoked, the classic member moves to generation 2: {} {}",
        err(moved.error_code),
        moved.generation_id
    );
    // Its commits at generation 1: the kept partition stored, the other refused (one refused
    // partition refuses a whole request, as Kafka's exception does: one request each).
    let mut codes = Vec::new();
    for p in [kept, 1 - kept] {
        let answer = c
            .send(offset_commit("g", (&id, 1), TOPIC, &[p], 7), 8)
            .await?;
        codes.push(answer.topics[0].partitions[0].error_code);
    }
    ensure!(
        codes == [0, StaleMemberEpoch.code()],
        "the commits at generation 1: {codes:?}"
    );
    let report =
        cluster.check(&Checks::only(["stale-generation-commit"]).map_err(anyhow::Error::msg)?);
    ensure!(
        report.count(Severity::Violation) == 0 && report.count(Severity::Warning) == 1,
        "{report}"
    );
    cluster.shutdown().await;
    Ok(())
}
