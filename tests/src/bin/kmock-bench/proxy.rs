//! Figure 11, proxy overhead: OffsetCommit round trips to a real Kafka 4.4 node (the one named
//! by `KMOCK_KAFKA_BOOTSTRAP`, or one started with `fixtures/kafka/kafka.sh`), directly and
//! through `kmock proxy` in front of it, on loopback: one request in flight (latency), and
//! [`IN_FLIGHT`] pipelined on one connection (throughput). Only the kmock column is filled:
//! the figure compares kmock's proxy with no proxy, not the peers.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context, Result};
use futures::future::try_join_all;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kmock_client::Client;
use kmock_tests::real_kafka::RealKafka;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

use crate::peers::{Peer, Server};
use crate::report::{median, percentile, Better, Row};
use crate::Bench;

const FIGURE: &str = "11 proxy overhead (OffsetCommit, real Kafka)";
const OFFSET_COMMIT_VERSION: i16 = 8;
const WARM_UP: usize = 100;
/// Commits in flight at once on the one connection of the throughput rows.
const IN_FLIGHT: usize = 16;

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let kafka = RealKafka::start()?;
    let n = bench.sizes.commits;
    let topic = format!("bench-proxy-{}", nanos());
    bench.rt.block_on(create_topic(kafka.bootstrap(), &topic))?;
    let row = |metric: &str, unit, better| Row::new(FIGURE, metric, unit, better);
    let mut rows = [
        row(
            &format!("p50 of {n} commits direct to Kafka, one in flight"),
            "µs",
            Better::Lower,
        ),
        row(
            &format!("p50 of {n} commits through the proxy, one in flight"),
            "µs",
            Better::Lower,
        )
        .note("the proxy journals every request and answer; no fault rule in force"),
        row("p50 added by the proxy", "µs", Better::Lower),
        row(
            &format!("p99 of {n} commits direct to Kafka"),
            "µs",
            Better::Lower,
        ),
        row(
            &format!("p99 of {n} commits through the proxy"),
            "µs",
            Better::Lower,
        ),
        row(
            &format!("commits/s direct, {IN_FLIGHT} pipelined on one connection"),
            "1/s",
            Better::Higher,
        ),
        row(
            &format!("commits/s through the proxy, {IN_FLIGHT} pipelined"),
            "1/s",
            Better::Higher,
        ),
        row("throughput through the proxy / direct", "×", Better::Higher),
    ];
    for _ in 0..bench.rounds {
        let mut proxy_command = std::process::Command::new(&bench.tools.kmock);
        proxy_command
            .args(["proxy", "--port", "0", "--upstream", kafka.bootstrap()])
            .env("RUST_LOG", "warn");
        let proxy = Server::spawn(proxy_command)?;
        let direct_addr = kafka.bootstrap().to_owned();
        let proxied_addr = proxy.addrs[0].to_string();
        let (direct, proxied, direct_rate, proxied_rate) = bench.rt.block_on(async {
            let direct = round_trips(&direct_addr, &topic, n).await?;
            let proxied = round_trips(&proxied_addr, &topic, n).await?;
            let direct_rate = pipelined(&direct_addr, &topic, n).await?;
            let proxied_rate = pipelined(&proxied_addr, &topic, n).await?;
            anyhow::Ok((direct, proxied, direct_rate, proxied_rate))
        })?;
        let values = [
            median(&direct),
            median(&proxied),
            median(&proxied) - median(&direct),
            percentile(&direct, 0.99),
            percentile(&proxied, 0.99),
            direct_rate,
            proxied_rate,
            proxied_rate / direct_rate,
        ];
        for (row, value) in rows.iter_mut().zip(values) {
            row.push(Peer::Kmock, value);
        }
    }
    Ok(rows.into())
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

async fn create_topic(bootstrap: &str, topic: &str) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    for result in admin
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await?
    {
        result.map_err(|(name, code)| anyhow::anyhow!("creating {name}: {code:?}"))?;
    }
    Ok(())
}

/// Round trips, in µs, of `n` OffsetCommits (after a warm-up) on one connection to `addr`
/// (the node is its group's coordinator: one node), one in flight, for a fresh group.
async fn round_trips(addr: &str, topic: &str, n: usize) -> Result<Vec<f64>> {
    let group = format!("bench-proxy-group-{}", nanos());
    let client = Client::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let mut samples = Vec::with_capacity(n);
    for i in 0..WARM_UP + n {
        let started = Instant::now();
        commit(&client, &group, topic, i as i64).await?;
        if i >= WARM_UP {
            samples.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(samples)
}

/// Commits per second of `n` OffsetCommits, [`IN_FLIGHT`] at a time, on one connection.
async fn pipelined(addr: &str, topic: &str, n: usize) -> Result<f64> {
    let group = format!("bench-proxy-group-{}", nanos());
    let client = Client::connect(addr).await?;
    for i in 0..WARM_UP {
        commit(&client, &group, topic, i as i64).await?;
    }
    let started = Instant::now();
    for chunk in 0..n.div_ceil(IN_FLIGHT) {
        let commits = (0..IN_FLIGHT).map(|i| {
            let offset = (WARM_UP + chunk * IN_FLIGHT + i) as i64;
            commit(&client, &group, topic, offset)
        });
        try_join_all(commits).await?;
    }
    Ok((n.div_ceil(IN_FLIGHT) * IN_FLIGHT) as f64 / started.elapsed().as_secs_f64())
}

async fn commit(client: &Client, group: &str, topic: &str, offset: i64) -> Result<()> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(StrBytes::new()))])]);
    let answer = client.send(request, OFFSET_COMMIT_VERSION).await?;
    for t in &answer.topics {
        for p in &t.partitions {
            ensure!(p.error_code == 0, "OffsetCommit: error {}", p.error_code);
        }
    }
    Ok(())
}
