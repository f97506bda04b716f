//! kmock benchmarks. So far one figure: produce throughput with the journal on and off, in
//! one run, rounds interleaved on/off, reported as medians and their ratio.
//!
//! ```sh
//! cargo run --release -p kmock-tests --bin kmock-bench
//! ```
//!
//! The load is kmock-client's, not a Kafka client's: 4 connections (one per partition), each
//! keeping 32 Produce requests in flight, each request one pre-encoded batch of 100 records of
//! 100 bytes (acks=1), so the broker, not a client, is what is measured.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{self, StreamExt};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::records::Compression;
use kmock::Cluster;
use kmock_client::{encode_batch, record, Client};

const PARTITIONS: i32 = 4;
const REQUESTS_PER_CONNECTION: usize = 2_500;
const IN_FLIGHT: usize = 32;
const RECORDS_PER_BATCH: usize = 100;
const VALUE_BYTES: usize = 100;
const ROUNDS: usize = 5;

fn produce(batch: &Bytes, partition: i32) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName("bench".to_string().into()))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch.clone()))])])
}

/// One round: the time to produce every batch, journal on or off.
async fn round(journal: bool, batch: &Bytes) -> Duration {
    let mut builder = Cluster::builder().topic("bench", PARTITIONS);
    if !journal {
        builder = builder.journal_capacity(0);
    }
    let cluster = builder.start().await.expect("cluster starts");
    let addr = cluster.brokers()[0].addr;
    let mut clients = Vec::new();
    for _ in 0..PARTITIONS {
        clients.push(Client::connect(addr).await.expect("connects"));
    }
    let started = Instant::now();
    let connections = clients.iter().enumerate().map(|(p, client)| async move {
        stream::iter(0..REQUESTS_PER_CONNECTION)
            .map(|_| client.send(produce(batch, p as i32), 9))
            .buffer_unordered(IN_FLIGHT)
            .for_each(|answer| async move {
                let answer = answer.expect("answered");
                assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
            })
            .await;
    });
    futures::future::join_all(connections).await;
    let took = started.elapsed();
    cluster.shutdown().await;
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let value = vec![b'x'; VALUE_BYTES];
    let records: Vec<_> = (0..RECORDS_PER_BATCH)
        .map(|_| record(b"key", &value))
        .collect();
    let batch = encode_batch(&records, Compression::None).expect("encodes");
    let (mut on, mut off) = (Vec::new(), Vec::new());
    round(true, &batch).await; // warm-up
    for _ in 0..ROUNDS {
        on.push(round(true, &batch).await);
        off.push(round(false, &batch).await);
    }
    let requests = PARTITIONS as usize * REQUESTS_PER_CONNECTION;
    let records = requests * RECORDS_PER_BATCH;
    let megabytes = (requests * batch.len()) as f64 / 1e6;
    let report = |name: &str, d: Duration| {
        let s = d.as_secs_f64();
        println!(
            "journal {name:3}: median {:7.1} ms  {:10.0} records/s  {:7.1} MB/s  {:8.0} requests/s",
            s * 1e3,
            records as f64 / s,
            megabytes / s,
            requests as f64 / s
        );
    };
    let (on, off) = (median(on), median(off));
    println!("{requests} Produce requests of {RECORDS_PER_BATCH} records ({} bytes each), {ROUNDS} rounds each", batch.len());
    report("on", on);
    report("off", off);
    println!(
        "throughput ratio on/off: {:.3}",
        off.as_secs_f64() / on.as_secs_f64()
    );
}
