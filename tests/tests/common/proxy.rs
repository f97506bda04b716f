//! Proxy mode against the real Kafka of the conformance tests (one node) or the three-node
//! cluster: a proxy in front of it (bare, or with a fixture scenario's rules and checks), fresh
//! topic names (the Kafka is shared by the suite's tests and kept between runs), topics created
//! through the proxy, with Kafka's placement or replicas placed by hand.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use kafka_protocol::messages::FindCoordinatorRequest;
use kmock::{Checks, Cluster, Scenario};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

/// A topic (or group) name no earlier test or run used: `prefix`, the process id and the
/// time in ns.
pub fn fresh(prefix: &str) -> String {
    let ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}-{}-{ns}", std::process::id())
}

/// A proxy on ephemeral loopback ports in front of the Kafka at `upstream`.
pub async fn proxy(upstream: &str) -> Result<Cluster> {
    Cluster::builder()
        .upstream(upstream)
        .start()
        .await
        .with_context(|| format!("starting a proxy in front of {upstream}"))
}

/// A proxy on ephemeral loopback ports in front of the Kafka at `upstream`, with the rules and
/// checks of `fixtures/scenarios/<name>`: the same scenario as in fake mode, less the fake's
/// shape (its `brokers`, `topics` and `port`: the upstream cluster has its own), and with
/// `group:` matchers naming `group` (each run uses a group of its own on the shared Kafka).
///
/// # Errors
/// The scenario not loading, or the proxy not starting.
pub async fn proxy_scenario(name: &str, upstream: &str, group: &str) -> Result<(Cluster, Checks)> {
    let mut scenario = Scenario::load(&kmock_tests::fixture(&format!("scenarios/{name}")))?;
    scenario.brokers = None;
    scenario.topics.clear();
    scenario.port = Some(0);
    scenario.upstream = Some(upstream.to_owned());
    for rule in &mut scenario.rules {
        if rule.group.is_some() {
            rule.group = Some(group.to_owned());
        }
    }
    let cluster = scenario
        .builder()?
        .start()
        .await
        .with_context(|| format!("starting a proxy with {name} in front of {upstream}"))?;
    for rule in scenario.rules()? {
        cluster.add_rule(rule)?;
    }
    Ok((cluster, scenario.checks()?.unwrap_or_default()))
}

/// The node id of `group`'s coordinator, asked through the proxy at `addr` (FindCoordinator
/// v4), asked again while Kafka answers COORDINATOR_NOT_AVAILABLE (it is creating
/// `__consumer_offsets` on first use).
///
/// # Errors
/// Any other error, or still not available after 60 s (a hang guard).
pub async fn coordinator_node(addr: &str, group: &str) -> Result<i32> {
    const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    let client = kmock_client::Client::connect(addr).await?;
    let started = std::time::Instant::now();
    loop {
        let request = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![super::text(group)]);
        let answer = client.send(request, 4).await?;
        let found = answer
            .coordinators
            .first()
            .with_context(|| format!("FindCoordinator for {group:?}: no coordinator"))?;
        match found.error_code {
            0 => return Ok(found.node_id.0),
            COORDINATOR_NOT_AVAILABLE if started.elapsed() < Duration::from_secs(60) => {
                // Waiting for Kafka to create __consumer_offsets: no event to await from
                // outside the broker but its answer.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            code => bail!("FindCoordinator for {group:?}: {}", super::err(code)),
        }
    }
}

/// Creates `topic` with one partition per item of `replicas`, partition `i` on the broker
/// `replicas[i]` (one replica), with librdkafka's admin client through `bootstrap`.
///
/// # Errors
/// The creation failing.
pub async fn create_topic_on(bootstrap: &str, topic: &str, replicas: &[i32]) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let assignment: Vec<[i32; 1]> = replicas.iter().map(|r| [*r]).collect();
    let assignment: Vec<&[i32]> = assignment.iter().map(|r| r.as_slice()).collect();
    let partitions = i32::try_from(replicas.len())?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Variable(&assignment));
    for result in admin.create_topics(&[new], &options).await? {
        if let Err((name, code)) = result {
            bail!("creating topic {name} on brokers {replicas:?}: {code:?}");
        }
    }
    Ok(())
}

/// Creates `topic` with `partitions` partitions (one replica) with librdkafka's admin client
/// through `bootstrap`, waiting for the operation to complete.
pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let created = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &options,
        )
        .await?;
    for result in created {
        if let Err((name, code)) = result {
            bail!("creating topic {name}: {code:?}");
        }
    }
    Ok(())
}
