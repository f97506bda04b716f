//! Figure 4, broker capacity: kmock-client sends pre-encoded Produce requests (acks=all)
//! pipelined over 4 connections, one per partition of a 1-broker cluster: MB/s with batches of
//! just under 1 MiB, requests/s with one-record batches.

use anyhow::Result;
use bytes::Bytes;

use crate::peers::Server;
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
        "the client copies each 1 MiB body once; broker and client share the 2 cores over loopback",
    );
    let mut requests = Row::new(
        FIGURE,
        "one-record Produce requests, 32 in flight on each of 4 connections",
        "requests/s",
        Better::Higher,
    );
    for _ in 0..bench.rounds {
        for &peer in &bench.peers {
            let took = load(bench, peer, &big, n_big, 4)?;
            ingest.push(
                peer,
                (n_big * CONNECTIONS as usize * big.len()) as f64 / took / 1e6,
            );
            let took = load(bench, peer, &small, n_small, 32)?;
            requests.push(peer, (n_small * CONNECTIONS as usize) as f64 / took);
        }
    }
    Ok(vec![ingest, requests])
}

/// Seconds to send `requests` Produce requests of `batch` on each of 4 connections to a fresh
/// 1-broker cluster of `peer`.
fn load(
    bench: &Bench,
    peer: crate::peers::Peer,
    batch: &Bytes,
    requests: usize,
    in_flight: usize,
) -> Result<f64> {
    let server = Server::spawn(bench.tools.command(peer, 1, &[(TOPIC, CONNECTIONS)]))?;
    bench.rt.block_on(async {
        let targets = targets(server.addrs[0], TOPIC, batch).await?;
        Ok(produce_pipelined(&targets, requests, in_flight)
            .await?
            .as_secs_f64())
    })
}
