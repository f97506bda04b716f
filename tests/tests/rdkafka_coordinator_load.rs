//! `coordinator_load` (a scenario's key, the builder's option): for a while after the start the group coordinator answers
//! COORDINATOR_LOAD_IN_PROGRESS, as Kafka's does while it loads `__consumer_offsets`, and a
//! librdkafka consumer rides it out: its first group requests are refused, it retries, joins,
//! consumes every message and commits once the load is over.
//!
//! The load (5 s) is far longer than a consumer takes from its creation to its first JoinGroup,
//! so the consumer always meets it; no verdict depends on how long anything takes. With
//! `KMOCK_REPEAT=N` it runs N times.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::excerpt::group_excerpt;
use common::member::{wait_members, Member};
use kmock::{ResponseError, Scenario};
use kmock_client::{record, Client};
use kmock_tests::repeat;
use rdkafka::config::ClientConfig;

const TOPIC: &str = "orders";
const GROUP: &str = "billing";
const MESSAGES: usize = 20;
const LOAD: Duration = Duration::from_secs(5);
/// Hang guard for the consumer to get every message: generous, it only catches a hang.
const HANG_GUARD: Duration = Duration::from_secs(90);

/// Whether `entry` is a `api` request answered with `error` somewhere.
fn answered_with(entry: &kmock::Entry, api: &str, error: ResponseError) -> bool {
    entry.api.as_deref() == Some(api)
        && entry
            .response
            .as_ref()
            .is_some_and(|r| r.error_codes.contains(&error.code()))
}

async fn ride_it_out() -> Result<()> {
    // From a scenario, as `kmock serve` reads one: the YAML key and the builder's option.
    let scenario = Scenario::parse(&format!(
        "coordinator_load: {}s\ntopics:\n  - name: {TOPIC}\n    partitions: 1\n",
        LOAD.as_secs()
    ))
    .map_err(anyhow::Error::msg)?;
    let cluster = scenario.builder()?.start().await?;
    let client = Client::connect(cluster.bootstrap().as_str()).await?;
    let records: Vec<_> = (0..MESSAGES)
        .map(|n| record(b"k", n.to_string().as_bytes()))
        .collect();
    let produced = client.produce(TOPIC, 0, &records, -1).await?;
    ensure!(produced.responses[0].partition_responses[0].error_code == 0);
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", cluster.bootstrap())
        .set("group.id", GROUP)
        .set("session.timeout.ms", "6000")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    let member = Member::start(config, TOPIC, "consumer", Some(1))?;
    let all: BTreeSet<usize> = (0..MESSAGES).collect();
    wait_members("consuming every message", &[&member], HANG_GUARD, |_, c| {
        c[0] == all
    })
    .await
    .with_context(|| group_excerpt(cluster.journal().entries()))?;
    let errors = member.close();
    // The last commit answered without error, after the load.
    cluster
        .wait_for(
            |e| {
                e.api.as_deref() == Some("OffsetCommit")
                    && e.response
                        .as_ref()
                        .is_some_and(|r| r.error_codes.is_empty())
            },
            HANG_GUARD,
        )
        .await?;
    let journal = cluster.journal();
    let entries = journal.entries();
    let refused: Vec<_> = entries
        .iter()
        .filter(|e| {
            ["JoinGroup", "SyncGroup", "OffsetFetch", "OffsetCommit"]
                .iter()
                .any(|api| answered_with(e, api, ResponseError::CoordinatorLoadInProgress))
        })
        .collect();
    ensure!(
        !refused.is_empty(),
        "no group request met the load\n{}",
        group_excerpt(entries)
    );
    // Refused by the load's rules (named `coordinator_load`), not by anything else; judged by
    // the rules the journal says fired rather than by clocks.
    ensure!(
        refused
            .iter()
            .all(|e| e.faults.iter().any(|f| f.contains("coordinator_load"))),
        "a COORDINATOR_LOAD_IN_PROGRESS not from the load's rules\n{}",
        group_excerpt(entries)
    );
    // Once the load is over the group is served: a JoinGroup answered without error, after
    // every refusal.
    let last_refused = refused.iter().map(|e| e.seq).max().unwrap_or(0);
    let joined = entries.iter().any(|e| {
        e.api.as_deref() == Some("JoinGroup")
            && e.seq > last_refused
            && e.response
                .as_ref()
                .is_some_and(|r| r.error_codes.is_empty())
    });
    ensure!(
        joined,
        "no JoinGroup answered after the load\n{}",
        group_excerpt(entries)
    );
    println!(
        "{} group requests refused while loading; consumer errors: {errors:?}",
        refused.len()
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_librdkafka_consumer_rides_out_the_coordinator_load() -> Result<()> {
    for _ in 0..repeat() {
        ride_it_out().await?;
    }
    Ok(())
}
