//! Figure 6, the journal's cost: an in-process kmock cluster with the journal on (the default)
//! and off (`journal_capacity(0)`, no sink, no fault rule: requests are only numbered), rounds
//! interleaved on, off, on, off. The load is kmock-client's: 4 connections, one per partition,
//! 32 Produce requests of one pre-encoded 100-record batch in flight on each. After each run with
//! the journal on, the journal is read once (`Cluster::journal`): the record digests of its
//! uncompressed batches are computed then, off the request path, and that read is timed too.

use anyhow::Result;
use bytes::Bytes;
use kmock::Cluster;

use crate::peers::Peer;
use crate::report::{Better, Row};
use crate::wire::{batch, produce_pipelined, targets};
use crate::Bench;

const FIGURE: &str = "6 journal on vs off (kmock in process)";
const TOPIC: &str = "bench";
const PARTITIONS: i32 = 4;
const RECORDS_PER_BATCH: usize = 100;

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let batch = batch(RECORDS_PER_BATCH, 100)?;
    let n = bench.sizes.journal_requests;
    let metric = |state| {
        format!(
            "records/s, journal {state} ({n} requests of {RECORDS_PER_BATCH} × 100 B on each of 4 connections)"
        )
    };
    let mut on = Row::new(FIGURE, &metric("on"), "records/s", Better::Higher);
    let mut off = Row::new(FIGURE, &metric("off"), "records/s", Better::Higher);
    let mut ratio = Row::new(
        FIGURE,
        "throughput ratio on ÷ off (median of the rounds' ratios; rounds alternate which runs first)",
        "ratio",
        Better::Higher,
    )
    .note("the broker shares the benchmark's Tokio runtime and the machine's cores with the client");
    let mut cpu = Row::new(
        FIGURE,
        "CPU time of the whole process (client and broker) per million records, journal on",
        "s",
        Better::Lower,
    )
    .note("in process: the broker's CPU time cannot be told from the client's");
    let mut read = Row::new(
        FIGURE,
        "reading the journal once after the run, journal on (record digests computed then), per million records",
        "ms",
        Better::Lower,
    )
    .note("Cluster::journal(): the digests of every batch, and a copy of every entry");
    for round in 0..bench.rounds {
        let on_first = round % 2 == 0;
        let r_off_first = if on_first {
            None
        } else {
            Some(records_per_second(bench, false, &batch, n)?.0)
        };
        let cpu_before = own_cpu_seconds()?;
        let (r_on, read_secs) = records_per_second(bench, true, &batch, n)?;
        let records = (n * PARTITIONS as usize * RECORDS_PER_BATCH) as f64;
        read.push(Peer::Kmock, read_secs * 1e3 / (records / 1e6));
        cpu.push(
            Peer::Kmock,
            (own_cpu_seconds()? - cpu_before) / (records / 1e6),
        );
        let r_off = match r_off_first {
            Some(r) => r,
            None => records_per_second(bench, false, &batch, n)?.0,
        };
        on.push(Peer::Kmock, r_on);
        off.push(Peer::Kmock, r_off);
        ratio.push(Peer::Kmock, r_on / r_off);
    }
    Ok(vec![on, off, ratio, cpu, read])
}

/// CPU time this process has used, user and system, in seconds.
fn own_cpu_seconds() -> Result<f64> {
    crate::peers::cpu_seconds_of("self")
}

/// Records/s of one run, and the seconds one read of the journal then took (0 with it off).
fn records_per_second(bench: &Bench, journal: bool, batch: &Bytes, n: usize) -> Result<(f64, f64)> {
    bench.rt.block_on(async {
        let mut builder = Cluster::builder().topic(TOPIC, PARTITIONS);
        if !journal {
            builder = builder.journal_capacity(0);
        }
        let cluster = builder.start().await?;
        let targets = targets(cluster.brokers()[0].addr, TOPIC, batch).await?;
        let took = produce_pipelined(&targets, n, 32).await?.as_secs_f64();
        let reading = std::time::Instant::now();
        let entries = if journal {
            cluster.journal().entries().len()
        } else {
            0
        };
        let read = reading.elapsed().as_secs_f64();
        anyhow::ensure!(
            !journal || entries as u64 >= n as u64 * PARTITIONS as u64,
            "the journal holds {entries} entries after {n} requests on each of {PARTITIONS} connections"
        );
        cluster.shutdown().await;
        Ok((
            (n * PARTITIONS as usize * RECORDS_PER_BATCH) as f64 / took,
            read,
        ))
    })
}
