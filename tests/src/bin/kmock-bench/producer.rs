//! Figures 2 and 3: the rdkafka producer (librdkafka) with its batching defaults, acks=all,
//! 100-byte values to a 6-partition topic on 3 brokers, against each peer's process.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

use crate::peers::Server;
use crate::report::{Better, Row};
use crate::Bench;

const FIGURE: &str = "2-3 rdkafka producer";
const TOPIC: &str = "bench";
const PARTITIONS: i32 = 6;
const BROKERS: usize = 3;
const VALUE_BYTES: usize = 100;

pub fn run(bench: &Bench) -> Result<Vec<Row>> {
    let n = bench.sizes.producer_messages;
    let what =
        format!("{n} × {VALUE_BYTES} B, acks=all, {PARTITIONS} partitions, {BROKERS} brokers");
    let mut messages = Row::new(
        FIGURE,
        &format!("messages/s ({what})"),
        "msg/s",
        Better::Higher,
    )
    .note(
        "one librdkafka producer (linger.ms 5, batch.num.messages 10,000 defaults) in the \
         benchmark process and the broker process share the machine's cores: the broker's CPU time \
         is taken from the producer",
    );
    let mut megabytes = Row::new(FIGURE, "MB/s of values", "MB/s", Better::Higher);
    let mut cpu = Row::new(
        FIGURE,
        "broker CPU time per million messages",
        "s",
        Better::Lower,
    );
    for round in 0..bench.rounds {
        for peer in bench.order(round) {
            let server = Server::spawn(bench.tools.command(peer, BROKERS, &[(TOPIC, PARTITIONS)]))?;
            let cpu_before = server.cpu_seconds()?;
            let took = produce(&server, n)?.as_secs_f64();
            cpu.push(
                peer,
                (server.cpu_seconds()? - cpu_before) / (n as f64 / 1e6),
            );
            messages.push(peer, n as f64 / took);
            megabytes.push(peer, (n * VALUE_BYTES) as f64 / took / 1e6);
        }
    }
    Ok(vec![messages, megabytes, cpu])
}

/// Counts delivery reports.
#[derive(Debug, Default)]
struct Counting {
    delivered: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl ClientContext for Counting {}

impl ProducerContext for Counting {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, (): ()) {
        match result {
            Ok(_) => self.delivered.fetch_add(1, Ordering::Relaxed),
            Err((e, _)) => {
                let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
                first.get_or_insert_with(|| e.to_string());
                self.failed.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

/// Produces `n` messages and waits for every delivery report: the time from the first send to
/// the last report (metadata is fetched before the clock starts).
fn produce(server: &Server, n: usize) -> Result<Duration> {
    let bootstrap = server.bootstrap();
    let producer: ThreadedProducer<Counting> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .create_with_context(Counting::default())?;
    producer
        .client()
        .fetch_metadata(Some(TOPIC), Duration::from_secs(10))?;
    let value = [b'x'; VALUE_BYTES];
    let started = Instant::now();
    for _ in 0..n {
        let mut record = BaseRecord::<(), [u8]>::to(TOPIC).payload(&value[..]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err((e, _)) => bail!("send: {e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(300))?;
    let took = started.elapsed();
    let context = producer.context();
    let failed = context.failed.load(Ordering::Relaxed);
    let first = context
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    ensure!(
        failed == 0,
        "{failed} messages failed, the first with {first:?}"
    );
    let delivered = context.delivered.load(Ordering::Relaxed);
    ensure!(
        delivered == n as u64,
        "{delivered} of {n} messages delivered"
    );
    Ok(took)
}
