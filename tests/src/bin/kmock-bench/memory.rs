//! Figure 7, memory: the resident set of each peer's process with an idle 3-broker cluster,
//! then after 1 GB of records was produced to it (kmock-client, batches of just under 1 MiB,
//! one connection per partition leader): bytes of memory gained per byte stored.

use std::time::Duration;

use anyhow::Result;

use crate::peers::{Peer, Server};
use crate::report::{Better, Row};
use crate::wire::{api_versions, batch_up_to, produce_pipelined, targets};
use crate::Bench;

const FIGURE: &str = "7 memory";
const TOPIC: &str = "bench";
const PARTITIONS: i32 = 6;
const BROKERS: usize = 3;
/// Time given to a process to settle before its resident set is read.
const SETTLE: Duration = Duration::from_millis(500);

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let batch = batch_up_to(1 << 20, 1000)?;
    let per_partition = bench
        .sizes
        .memory_bytes
        .div_ceil(PARTITIONS as usize * batch.len());
    let stored = per_partition * PARTITIONS as usize * batch.len();
    let mut idle = Row::new(
        FIGURE,
        "resident set, idle 3-broker cluster (separate process)",
        "MiB",
        Better::Lower,
    );
    let mut after = Row::new(
        FIGURE,
        &format!(
            "resident set after {:.2} GB of records produced",
            stored as f64 / 1e9
        ),
        "MiB",
        Better::Lower,
    );
    let mut per_byte = Row::new(
        FIGURE,
        "resident set gained per byte produced",
        "bytes/byte",
        Better::Lower,
    )
    .note(
        "librdkafka's mock keeps at most 5 MiB (or 100,000 batches) per partition and deletes \
         older batches (rdkafka_mock.c), so it does not hold what was produced; kmock and kfake \
         keep every record",
    );
    let mut cpu = Row::new(
        FIGURE,
        "broker CPU time per GB produced",
        "s/GB",
        Better::Lower,
    );
    for round in 0..bench.rounds {
        for peer in bench.order(round) {
            let (before, later, cpu_seconds) = measure(bench, peer, &batch, per_partition)?;
            idle.push(peer, before as f64 / MIB);
            after.push(peer, later as f64 / MIB);
            per_byte.push(peer, (later as f64 - before as f64) / stored as f64);
            cpu.push(peer, cpu_seconds / (stored as f64 / 1e9));
        }
    }
    Ok(vec![idle, after, per_byte, cpu])
}

const MIB: f64 = 1024.0 * 1024.0;

/// Resident set, in bytes, of a fresh 3-broker cluster of `peer` once every broker has answered
/// ApiVersions, and after `per_partition` batches were produced to each partition; and the
/// broker's CPU time, in seconds, while they were produced.
fn measure(
    bench: &Bench,
    peer: Peer,
    batch: &bytes::Bytes,
    per_partition: usize,
) -> Result<(u64, u64, f64)> {
    let server = Server::spawn(bench.tools.command(peer, BROKERS, &[(TOPIC, PARTITIONS)]))?;
    bench.rt.block_on(async {
        for addr in &server.addrs {
            api_versions(&kmock_client::Client::connect(addr).await?).await?;
        }
        anyhow::Ok(())
    })?;
    std::thread::sleep(SETTLE);
    let idle = server.rss_bytes()?;
    let cpu_before = server.cpu_seconds()?;
    bench.rt.block_on(async {
        let targets = targets(server.addrs[0], TOPIC, batch).await?;
        produce_pipelined(&targets, per_partition, 4).await
    })?;
    let cpu = server.cpu_seconds()? - cpu_before;
    std::thread::sleep(SETTLE);
    Ok((idle, server.rss_bytes()?, cpu))
}
