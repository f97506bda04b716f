//! Figure 12, memory under retention (kmock only: librdkafka's mock keeps a fixed 5 MiB a
//! partition whatever the topic says, kfake does not enforce `retention.bytes`): a `kmock serve`
//! process, one topic of 6 partitions with `retention.bytes` and `segment.bytes` set (created
//! with CreateTopics), batches of just under 1 MiB produced to every partition (4 in flight on
//! each of 6 connections) in 8 steps. The resident set is read after every step: its peak, and
//! its growth over the second half of the run, per GB produced, which is what a longer run
//! (the hour and 10 GB) would add. The records kept are bounded by `retention.bytes`
//! plus one segment per partition (Kafka's rule: the log keeps at least `retention.bytes`, and
//! less than that plus its oldest segment).

use std::time::Duration;

use anyhow::{ensure, Result};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kmock_client::Client;

use crate::peers::{Peer, Server};
use crate::report::{Better, Row};
use crate::wire::{batch_up_to, produce_pipelined, targets};
use crate::Bench;

const FIGURE: &str = "12 retention";
const TOPIC: &str = "kept";
const PARTITIONS: i32 = 6;
const STEPS: usize = 8;
/// Time given to the process to settle before its resident set is read.
const SETTLE: Duration = Duration::from_millis(300);
const MIB: f64 = 1024.0 * 1024.0;

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let sizes = &bench.sizes;
    let (retention, segment) = (sizes.retention_bytes, sizes.segment_bytes);
    let batch = batch_up_to(1 << 20, 1000)?;
    let per_step = sizes
        .retention_produced
        .div_ceil(STEPS * PARTITIONS as usize * batch.len());
    let produced = (per_step * STEPS * PARTITIONS as usize * batch.len()) as f64;
    let setting = format!(
        "{:.1} GB into {PARTITIONS} partitions, retention.bytes {} MiB, segment.bytes {} MiB",
        produced / 1e9,
        retention >> 20,
        segment >> 20
    );
    let bound = PARTITIONS as usize * (retention + segment);
    let mut peak = Row::new(
        FIGURE,
        &format!("peak resident set while producing {setting}"),
        "MiB",
        Better::Lower,
    )
    .note(format!(
        "records kept at most {PARTITIONS} × ({} + {}) MiB = {} MiB; the journal's entries (one \
         a request, and one a deletion by retention, here) are bounded by journal_max_bytes, \
         512 MiB",
        retention >> 20,
        segment >> 20,
        bound >> 20
    ));
    let mut growth = Row::new(
        FIGURE,
        "resident set growth over the second half of the run, per GB produced",
        "MiB/GB",
        Better::Lower,
    );
    let mut cpu = Row::new(
        FIGURE,
        "broker CPU time per GB produced (retention included)",
        "s/GB",
        Better::Lower,
    );
    for round in 0..bench.rounds {
        for peer in bench.order(round) {
            if peer != Peer::Kmock {
                continue;
            }
            let rss = measure(bench, &batch, per_step, retention, segment)?;
            let (samples, cpu_seconds) = rss;
            let max = samples.iter().copied().max().unwrap_or(0);
            peak.push(peer, max as f64 / MIB);
            let half = samples[STEPS / 2 - 1] as f64;
            let end = samples[STEPS - 1] as f64;
            growth.push(peer, (end - half) / MIB / (produced / 2.0 / 1e9));
            cpu.push(peer, cpu_seconds / (produced / 1e9));
        }
    }
    Ok(vec![peak, growth, cpu])
}

/// The resident set, in bytes, after each of the [`STEPS`] steps of `per_step` batches to every
/// partition, and the broker's CPU time over them, in seconds.
fn measure(
    bench: &Bench,
    batch: &bytes::Bytes,
    per_step: usize,
    retention: usize,
    segment: usize,
) -> Result<(Vec<u64>, f64)> {
    let server = Server::spawn(bench.tools.command(Peer::Kmock, 1, &[]))?;
    let addr = server.addrs[0];
    let targets = bench.rt.block_on(async {
        create_topic(&Client::connect(addr).await?, retention, segment).await?;
        targets(addr, TOPIC, batch).await
    })?;
    let cpu_before = server.cpu_seconds()?;
    let mut samples = Vec::with_capacity(STEPS);
    for _ in 0..STEPS {
        bench
            .rt
            .block_on(produce_pipelined(&targets, per_step, 4))?;
        std::thread::sleep(SETTLE);
        samples.push(server.rss_bytes()?);
    }
    Ok((samples, server.cpu_seconds()? - cpu_before))
}

async fn create_topic(client: &Client, retention: usize, segment: usize) -> Result<()> {
    let config = |name: &str, value: usize| {
        CreatableTopicConfig::default()
            .with_name(StrBytes::from_string(name.to_owned()))
            .with_value(Some(StrBytes::from_string(value.to_string())))
    };
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_num_partitions(PARTITIONS)
            .with_replication_factor(1)
            .with_configs(vec![
                config("retention.bytes", retention),
                config("segment.bytes", segment),
            ])]);
    let answer = client.send(request, 5).await?;
    let code = answer.topics.first().map_or(-1, |t| t.error_code);
    ensure!(code == 0, "CreateTopics of {TOPIC}: error {code}");
    Ok(())
}
