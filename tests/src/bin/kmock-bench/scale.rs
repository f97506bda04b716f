//! Figure 8, scale: the time to answer Metadata for a 10,000-partition topic on 3 brokers, and
//! 1,000 connections producing at once (throughput, and every error counted).

use std::time::Instant;

use anyhow::{ensure, Result};
use futures::future::join_all;
use kmock_client::Client;

use crate::peers::{Peer, Server};
use crate::report::{median, Better, Row};
use crate::wire::{batch, leaders, metadata, produce, produce_body};
use crate::Bench;

const FIGURE: &str = "8 scale";
const BROKERS: usize = 3;
const TOPIC: &str = "bench";
const PARTITIONS: i32 = 6;
const RECORDS_PER_BATCH: usize = 100;

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let sizes = &bench.sizes;
    let mut metadata = Row::new(
        FIGURE,
        &format!(
            "Metadata (all topics) with {} partitions, median of {} requests",
            sizes.metadata_partitions, sizes.metadata_requests
        ),
        "ms",
        Better::Lower,
    );
    let mut throughput = Row::new(
        FIGURE,
        &format!(
            "{} connections each producing {} requests of {RECORDS_PER_BATCH} × 100 B, one in flight",
            sizes.connections, sizes.requests_per_connection
        ),
        "records/s",
        Better::Higher,
    );
    let mut errors = Row::new(
        FIGURE,
        "errors among those connections, summed over the rounds (none allowed)",
        "count",
        Better::Lower,
    );
    let mut metadata_cpu = Row::new(
        FIGURE,
        "broker CPU time per Metadata request (warm-up included)",
        "ms",
        Better::Lower,
    );
    let mut throughput_cpu = Row::new(
        FIGURE,
        "broker CPU time per Produce request of those connections (connecting included)",
        "µs",
        Better::Lower,
    );
    let mut failed_total: std::collections::BTreeMap<Peer, f64> = Default::default();
    for round in 0..bench.rounds {
        for peer in bench.order(round) {
            let (ms, cpu_ms) = metadata_ms(bench, peer)?;
            metadata.push(peer, ms);
            metadata_cpu.push(peer, cpu_ms);
            let (records_per_second, failed, cpu_us) = connections(bench, peer)?;
            throughput.push(peer, records_per_second);
            throughput_cpu.push(peer, cpu_us);
            *failed_total.entry(peer).or_default() += failed as f64;
        }
    }
    // A sum, not a median: one failing round must show.
    for (peer, failed) in failed_total {
        errors.push(peer, failed);
    }
    Ok(vec![
        metadata,
        metadata_cpu,
        throughput,
        throughput_cpu,
        errors,
    ])
}

/// The median time, in ms, of Metadata requests for every topic of a cluster holding one topic
/// of `metadata_partitions` partitions (the first request, a warm-up, not counted), and the
/// broker's CPU time per request, in ms, warm-up included.
fn metadata_ms(bench: &Bench, peer: Peer) -> Result<(f64, f64)> {
    let partitions = bench.sizes.metadata_partitions;
    let server = Server::spawn(bench.tools.command(peer, BROKERS, &[("wide", partitions)]))?;
    let cpu_before = server.cpu_seconds()?;
    let ms = bench.rt.block_on(async {
        let client = Client::connect(server.addrs[0]).await?;
        let mut samples = Vec::new();
        for i in 0..=bench.sizes.metadata_requests {
            let started = Instant::now();
            let answer = metadata(&client, None).await?;
            let took = started.elapsed().as_secs_f64() * 1e3;
            let got: usize = answer.topics.iter().map(|t| t.partitions.len()).sum();
            ensure!(
                got == partitions as usize,
                "Metadata named {got} partitions, not {partitions}"
            );
            if i > 0 {
                samples.push(took);
            }
        }
        anyhow::Ok(median(&samples))
    })?;
    let cpu = server.cpu_seconds()? - cpu_before;
    Ok((ms, cpu * 1e3 / (bench.sizes.metadata_requests + 1) as f64))
}

/// Records/s of `connections` connections, all connected before any produces, each sending its
/// requests one at a time to the leader of partition `i % 6`; how many connections failed to
/// connect plus how many requests failed; and the broker's CPU time, in µs, per request sent.
fn connections(bench: &Bench, peer: Peer) -> Result<(f64, usize, f64)> {
    let sizes = &bench.sizes;
    let server = Server::spawn(bench.tools.command(peer, BROKERS, &[(TOPIC, PARTITIONS)]))?;
    let batch = batch(RECORDS_PER_BATCH, 100)?;
    let cpu_before = server.cpu_seconds()?;
    let (rate, failed) = bench.rt.block_on(async {
        let leaders = leaders(&Client::connect(server.addrs[0]).await?, TOPIC).await?;
        let bodies = (0..PARTITIONS)
            .map(|p| produce_body(TOPIC, p, &batch))
            .collect::<Result<Vec<_>>>()?;
        let connecting =
            (0..sizes.connections).map(|i| Client::connect(leaders[i % leaders.len()]));
        let clients = join_all(connecting).await;
        let unconnected = clients.iter().filter(|c| c.is_err()).count();
        let started = Instant::now();
        let producing = clients.iter().enumerate().filter_map(|(i, c)| {
            let client = c.as_ref().ok()?;
            let body = &bodies[i % bodies.len()];
            Some(async move {
                let (mut ok, mut failed) = (0, 0);
                for _ in 0..sizes.requests_per_connection {
                    match produce(client, body).await {
                        Ok(()) => ok += 1,
                        Err(e) => {
                            if failed == 0 {
                                eprintln!("  connection {i}: {e:#}");
                            }
                            failed += 1;
                        }
                    }
                }
                (ok, failed)
            })
        });
        let counts = join_all(producing).await;
        let took = started.elapsed().as_secs_f64();
        let answered: usize = counts.iter().map(|(ok, _)| ok).sum();
        let failed = unconnected + counts.iter().map(|(_, failed)| failed).sum::<usize>();
        let sent = answered * RECORDS_PER_BATCH;
        anyhow::Ok((sent as f64 / took, failed))
    })?;
    let cpu = server.cpu_seconds()? - cpu_before;
    let requests = (sizes.connections * sizes.requests_per_connection) as f64;
    Ok((rate, failed, cpu * 1e6 / requests))
}
