//! Figure 1, start-up: an in-process cluster of 1 and of 3 brokers from start to the first
//! answered ApiVersions (kmock's `Cluster`, librdkafka's `MockCluster`; kfake cannot run inside
//! a Rust process), and a cluster process from spawn to the first answered ApiVersions.

use std::time::Instant;

use anyhow::{anyhow, Result};
use kmock::Cluster;
use kmock_client::Client;
use rdkafka::mocking::MockCluster;

use crate::peers::{Peer, Server};
use crate::report::{Better, Row};
use crate::wire::api_versions;
use crate::Bench;

const FIGURE: &str = "1 start-up";

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let row = |metric| Row::new(FIGURE, metric, "ms", Better::Lower);
    let mut one = row("in process, 1 broker: start to answered ApiVersions");
    let mut three = row("in process, 3 brokers: start to answered ApiVersions");
    let mut spawned = row("process, 1 broker: spawn to answered ApiVersions").note(
        "kmock is the `kmock serve` binary, kfake `fixtures/peers/kfake-serve`, librdkafka's \
         mock this benchmark program re-run as `serve-librdkafka-mock`",
    );
    let mut cpu = row("process, 1 broker: broker CPU time from spawn to answered ApiVersions")
        .note("the kernel's 10 ms tick: most starts read 0 or 10 ms");
    for round in 0..bench.rounds {
        for peer in bench.order(round) {
            // One start not counted, so that the first counted one does not pay for caches the
            // previous peer's process left cold.
            in_process(bench, peer, 1)?;
            if let Some(ms) = in_process(bench, peer, 1)? {
                one.push(peer, ms);
            }
            if let Some(ms) = in_process(bench, peer, 3)? {
                three.push(peer, ms);
            }
            let (ms, cpu_ms) = spawn(bench, peer)?;
            spawned.push(peer, ms);
            cpu.push(peer, cpu_ms);
        }
    }
    Ok(vec![one, three, spawned, cpu])
}

/// Milliseconds from asking for a cluster of `brokers` brokers to the answer to an ApiVersions
/// on its first broker; `None` for a peer that cannot run in this process.
fn in_process(bench: &Bench, peer: Peer, brokers: usize) -> Result<Option<f64>> {
    bench.rt.block_on(async {
        match peer {
            Peer::Kmock => {
                let started = Instant::now();
                let cluster = Cluster::builder().brokers(brokers).start().await?;
                let client = Client::connect(cluster.brokers()[0].addr).await?;
                api_versions(&client).await?;
                let ms = started.elapsed().as_secs_f64() * 1e3;
                drop(client);
                cluster.shutdown().await;
                Ok(Some(ms))
            }
            Peer::Librdkafka => {
                let started = Instant::now();
                let cluster = MockCluster::new(i32::try_from(brokers)?)?;
                let bootstrap = cluster.bootstrap_servers();
                let first = bootstrap
                    .split(',')
                    .next()
                    .ok_or_else(|| anyhow!("empty bootstrap"))?;
                let client = Client::connect(first).await?;
                api_versions(&client).await?;
                let ms = started.elapsed().as_secs_f64() * 1e3;
                drop(client);
                drop(cluster);
                Ok(Some(ms))
            }
            Peer::Kfake => Ok(None),
        }
    })
}

/// Milliseconds from spawning a 1-broker cluster process to the answer to an ApiVersions, and
/// the CPU time, in ms, the process used until then.
fn spawn(bench: &Bench, peer: Peer) -> Result<(f64, f64)> {
    let command = bench.tools.command(peer, 1, &[]);
    let started = Instant::now();
    let server = Server::spawn(command)?;
    bench.rt.block_on(async {
        let client = Client::connect(server.addrs[0]).await?;
        api_versions(&client).await
    })?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    Ok((ms, server.cpu_seconds()? * 1e3))
}
