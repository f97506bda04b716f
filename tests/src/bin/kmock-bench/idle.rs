//! Figure 10, idle connections: 10,000 kmock-client connections to a 1-broker cluster, opened
//! 100 at a time, each answered one ApiVersions (so the broker has set it up), then left idle:
//! the resident set gained per connection, and the broker's CPU time per connection (opening
//! and the first request). The open-file limit is raised to its hard limit first (`setrlimit`);
//! a peer that refuses or drops connections has its failures counted.

use std::time::Duration;

use anyhow::{bail, Result};
use futures::future::join_all;
use kmock_client::Client;

use crate::peers::{Peer, Server};
use crate::report::{Better, Row};
use crate::wire::api_versions;
use crate::Bench;

const FIGURE: &str = "10 idle connections";
/// Connections opened at once: librdkafka's mock listens with a backlog of 5.
const AT_ONCE: usize = 100;
/// How long one connection may take to open and answer ApiVersions before it counts as failed
/// (librdkafka's mock leaves some connections unanswered when many arrive at once).
const PER_CONNECTION: Duration = Duration::from_secs(10);
/// Time given to a process to settle before its resident set is read.
const SETTLE: Duration = Duration::from_millis(500);

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let n = bench.sizes.idle_connections;
    raise_open_file_limit(n)?;
    let mut per_connection = Row::new(
        FIGURE,
        &format!("resident set gained per idle connection ({n} connections, one ApiVersions each)"),
        "KiB",
        Better::Lower,
    )
    .note("kmock closes a connection idle for 10 minutes (connections.max.idle.ms); the figure is read well before");
    let mut cpu = Row::new(
        FIGURE,
        "broker CPU time per connection (accepting it and one ApiVersions)",
        "µs",
        Better::Lower,
    );
    let mut failures = Row::new(
        FIGURE,
        "connections refused, dropped or unanswered, summed over the rounds (none allowed)",
        "count",
        Better::Lower,
    );
    let mut failed_total: std::collections::BTreeMap<Peer, f64> = Default::default();
    for round in 0..bench.rounds {
        for peer in bench.order(round) {
            let (kib, cpu_us, failed) = measure(bench, peer, n)?;
            per_connection.push(peer, kib);
            cpu.push(peer, cpu_us);
            *failed_total.entry(peer).or_default() += failed as f64;
        }
    }
    for (peer, failed) in failed_total {
        failures.push(peer, failed);
    }
    Ok(vec![per_connection, cpu, failures])
}

/// Resident set gained per connection, in KiB; broker CPU per connection, in µs; failures.
fn measure(bench: &Bench, peer: Peer, n: usize) -> Result<(f64, f64, usize)> {
    let server = Server::spawn(bench.tools.command(peer, 1, &[]))?;
    let addr = server.addrs[0];
    bench
        .rt
        .block_on(async { api_versions(&Client::connect(addr).await?).await })?;
    std::thread::sleep(SETTLE);
    let before = server.rss_bytes()?;
    let cpu_before = server.cpu_seconds()?;
    let (clients, failed) = bench.rt.block_on(async {
        let mut clients = Vec::with_capacity(n);
        let mut failed = 0;
        let mut left = n;
        while left > 0 {
            let chunk = left.min(AT_ONCE);
            left -= chunk;
            let opened = join_all((0..chunk).map(|_| async {
                tokio::time::timeout(PER_CONNECTION, async {
                    let client = Client::connect(addr).await?;
                    api_versions(&client).await?;
                    anyhow::Ok(client)
                })
                .await
                .unwrap_or_else(|_| Err(anyhow::anyhow!("not answered within {PER_CONNECTION:?}")))
            }))
            .await;
            for c in opened {
                match c {
                    Ok(client) => clients.push(client),
                    Err(e) => {
                        if failed == 0 {
                            eprintln!("  {}: a connection failed: {e:#}", peer.name());
                        }
                        failed += 1;
                    }
                }
            }
        }
        (clients, failed)
    });
    let cpu = server.cpu_seconds()? - cpu_before;
    std::thread::sleep(SETTLE);
    let after = server.rss_bytes()?;
    let open = clients.len().max(1);
    drop(clients);
    Ok((
        (after as f64 - before as f64) / 1024.0 / open as f64,
        cpu * 1e6 / open as f64,
        failed,
    ))
}

/// Raises this process's soft open-file limit to its hard limit (children inherit it), and
/// fails when even that cannot hold `n` connections and some spare descriptors.
fn raise_open_file_limit(n: usize) -> Result<()> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        setrlimit(Resource::Nofile, limit)?;
    }
    let needed = n as u64 + 256;
    match limit.current {
        Some(current) if current < needed => {
            bail!("{n} connections need about {needed} open files; the hard limit is {current}")
        }
        _ => Ok(()),
    }
}
