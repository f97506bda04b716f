//! Figure 5, OffsetCommit round trip: one kmock-client connection to the group coordinator of a
//! 1-broker cluster commits one partition's offset, one request in flight, outside any group
//! (generation -1, as a client committing without group management).

use std::time::Instant;

use anyhow::{ensure, Result};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{FindCoordinatorRequest, GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kmock_client::Client;

use crate::peers::{Peer, Server};
use crate::report::{median, percentile, Better, Row};
use crate::Bench;

const FIGURE: &str = "5 OffsetCommit round trip";
const TOPIC: &str = "bench";
const GROUP: &str = "bench-group";
/// OffsetCommit v8: flexible, implemented by all three (librdkafka's mock v0–9, kmock v2–9).
const OFFSET_COMMIT_VERSION: i16 = 8;
/// FindCoordinator v3: the newest librdkafka's mock implements.
const FIND_COORDINATOR_VERSION: i16 = 3;
const WARM_UP: usize = 100;

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let n = bench.sizes.commits;
    let note = "one request in flight over loopback: client and broker wake-ups dominate";
    let mut p50 = Row::new(
        FIGURE,
        &format!("p50 of {n} commits, one in flight"),
        "µs",
        Better::Lower,
    )
    .note(note);
    let mut p99 = Row::new(
        FIGURE,
        &format!("p99 of {n} commits, one in flight"),
        "µs",
        Better::Lower,
    );
    let mut cpu = Row::new(
        FIGURE,
        "broker CPU time per commit (warm-up included)",
        "µs",
        Better::Lower,
    );
    for round in 0..bench.rounds {
        for peer in bench.order(round) {
            let (samples, cpu_seconds) = commits(bench, peer, n)?;
            p50.push(peer, median(&samples));
            p99.push(peer, percentile(&samples, 0.99));
            cpu.push(peer, cpu_seconds * 1e6 / (WARM_UP + n) as f64);
        }
    }
    Ok(vec![p50, p99, cpu])
}

/// Round trips, in µs, of `n` OffsetCommits (after a warm-up) to a fresh cluster of `peer`,
/// and the broker's CPU time, in seconds, over all of them, warm-up included.
fn commits(bench: &Bench, peer: Peer, n: usize) -> Result<(Vec<f64>, f64)> {
    let server = Server::spawn(bench.tools.command(peer, 1, &[(TOPIC, 1)]))?;
    let cpu_before = server.cpu_seconds()?;
    let samples = bench.rt.block_on(async {
        let bootstrap = Client::connect(server.addrs[0]).await?;
        let found = bootstrap
            .send(
                FindCoordinatorRequest::default()
                    .with_key(StrBytes::from_static_str(GROUP))
                    .with_key_type(0),
                FIND_COORDINATOR_VERSION,
            )
            .await?;
        ensure!(
            found.error_code == 0,
            "FindCoordinator: error {}",
            found.error_code
        );
        let client = Client::connect((found.host.as_str(), found.port as u16)).await?;
        let mut samples = Vec::with_capacity(n);
        for i in 0..WARM_UP + n {
            let started = Instant::now();
            commit(&client, i as i64).await?;
            if i >= WARM_UP {
                samples.push(started.elapsed().as_secs_f64() * 1e6);
            }
        }
        anyhow::Ok(samples)
    })?;
    Ok((samples, server.cpu_seconds()? - cpu_before))
}

async fn commit(client: &Client, offset: i64) -> Result<()> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(StrBytes::new()))])]);
    let answer = client.send(request, OFFSET_COMMIT_VERSION).await?;
    for topic in &answer.topics {
        for p in &topic.partitions {
            ensure!(
                p.error_code == 0,
                "OffsetCommit of {TOPIC}-{}: error {}",
                p.partition_index,
                p.error_code
            );
        }
    }
    Ok(())
}
