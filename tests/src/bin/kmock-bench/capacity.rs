//! Figure 4, broker capacity: kmock-client sends pre-encoded Produce requests (acks=all)
//! pipelined over 4 connections, one per partition of a 1-broker cluster: MB/s with batches of
//! just under 1 MiB, requests/s with one-record batches. Beside each, the CPU time the broker
//! process used for the load, which other work on the machine disturbs less than throughput.

use anyhow::Result;
use bytes::Bytes;

use crate::peers::{Peer, Server};
use crate::report::{Better, Row};
use crate::wire::{batch, batch_up_to, produce_pipelined, targets};
use crate::Bench;

const FIGURE: &str = "4 capacity (kmock-client)";
const TOPIC: &str = "bench";
const CONNECTIONS: i32 = 4;

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let big = batch_up_to(1 << 20, 1000)?;
    let small = batch(1, 100)?;
    let (n_big, n_small) = (bench.sizes.big_requests, bench.sizes.small_requests);
    let mut ingest = Row::new(
        FIGURE,
        &format!(
            "ingest, {} B batches, 4 in flight on each of 4 connections",
            big.len()
        ),
        "MB/s",
        Better::Higher,
    )
    .note(
        "the client copies each 1 MiB body once; broker and client share the machine's cores over loopback",
    );
    let mut ingest_cpu = Row::new(
        FIGURE,
        "broker CPU time per GB ingested (1 MiB batches)",
        "s/GB",
        Better::Lower,
    );
    let mut requests = Row::new(
        FIGURE,
        "one-record Produce requests, 32 in flight on each of 4 connections",
        "requests/s",
        Better::Higher,
    );
    let mut request_cpu = Row::new(
        FIGURE,
        "broker CPU time per one-record Produce request",
        "µs",
        Better::Lower,
    );
    for round in 0..bench.rounds {
        for peer in bench.order(round) {
            let bytes = (n_big * CONNECTIONS as usize * big.len()) as f64;
            let (took, cpu) = load(bench, peer, &big, n_big, 4)?;
            ingest.push(peer, bytes / took / 1e6);
            ingest_cpu.push(peer, cpu / (bytes / 1e9));
            let count = (n_small * CONNECTIONS as usize) as f64;
            let (took, cpu) = load(bench, peer, &small, n_small, 32)?;
            requests.push(peer, count / took);
            request_cpu.push(peer, cpu / count * 1e6);
        }
    }
    Ok(vec![ingest, ingest_cpu, requests, request_cpu])
}

/// Seconds to send `requests` Produce requests of `batch` on each of 4 connections to a fresh
/// 1-broker cluster of `peer`, and the CPU seconds the broker process used meanwhile.
fn load(
    bench: &Bench,
    peer: Peer,
    batch: &Bytes,
    requests: usize,
    in_flight: usize,
) -> Result<(f64, f64)> {
    let server = Server::spawn(bench.tools.command(peer, 1, &[(TOPIC, CONNECTIONS)]))?;
    bench.rt.block_on(async {
        let targets = targets(server.addrs[0], TOPIC, batch).await?;
        let cpu_before = server.cpu_seconds()?;
        let took = produce_pipelined(&targets, requests, in_flight).await?;
        Ok((took.as_secs_f64(), server.cpu_seconds()? - cpu_before))
    })
}
