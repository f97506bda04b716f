//! Figure 9, a 100,000-partition Metadata answer: a 3-broker cluster holding 20 topics of 5,000
//! partitions each (kmock creates at most 9,999 partitions a topic at start, as one operation
//! of Kafka's controller), Metadata for every topic over one connection, one request in flight:
//! the time per request, and the broker's CPU time per request.

use std::time::Instant;

use anyhow::{ensure, Result};
use kmock_client::Client;

use crate::peers::{Peer, Server};
use crate::report::{median, Better, Row};
use crate::wire::metadata;
use crate::Bench;

const FIGURE: &str = "9 Metadata of 100,000 partitions";
const BROKERS: usize = 3;
const TOPICS: usize = 20;

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let partitions = bench.sizes.wide_partitions;
    let n = bench.sizes.wide_requests;
    let mut time = Row::new(
        FIGURE,
        &format!("Metadata (all topics) of {partitions} partitions in {TOPICS} topics, median of {n} requests"),
        "ms",
        Better::Lower,
    )
    .note("Metadata v8 (kmock-client); 3 brokers, one replica a partition for librdkafka's mock, three for kmock and kfake");
    let mut cpu = Row::new(
        FIGURE,
        "broker CPU time per such Metadata request (warm-up included)",
        "ms",
        Better::Lower,
    );
    for round in 0..bench.rounds {
        for peer in bench.order(round) {
            let (ms, cpu_ms) = measure(bench, peer, partitions, n)?;
            time.push(peer, ms);
            cpu.push(peer, cpu_ms);
        }
    }
    Ok(vec![time, cpu])
}

/// The median time, in ms, of `n` Metadata requests for every topic (after one not counted),
/// and the broker's CPU time per request, in ms, the first included.
fn measure(bench: &Bench, peer: Peer, partitions: i32, n: usize) -> Result<(f64, f64)> {
    let per_topic = partitions / TOPICS as i32;
    let names: Vec<String> = (0..TOPICS).map(|i| format!("wide-{i}")).collect();
    let topics: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), per_topic)).collect();
    let server = Server::spawn(bench.tools.command(peer, BROKERS, &topics))?;
    let cpu_before = server.cpu_seconds()?;
    let ms = bench.rt.block_on(async {
        let client = Client::connect(server.addrs[0]).await?;
        let mut samples = Vec::with_capacity(n);
        for i in 0..=n {
            let started = Instant::now();
            let answer = metadata(&client, None).await?;
            let took = started.elapsed().as_secs_f64() * 1e3;
            let got: usize = answer.topics.iter().map(|t| t.partitions.len()).sum();
            ensure!(
                got == (per_topic as usize) * TOPICS,
                "Metadata named {got} partitions, not {}",
                per_topic as usize * TOPICS
            );
            if i > 0 {
                samples.push(took);
            }
        }
        anyhow::Ok(median(&samples))
    })?;
    let cpu = server.cpu_seconds()? - cpu_before;
    Ok((ms, cpu * 1e3 / (n + 1) as f64))
}
