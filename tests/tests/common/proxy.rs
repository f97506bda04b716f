//! Proxy mode against the real Kafka of the conformance tests: a proxy in front of it, fresh
//! topic names (the Kafka is shared by the suite's tests and kept between runs), topics created
//! through the proxy.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use kmock::Cluster;
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
