//! kmock benchmarks: kmock side by side with librdkafka's mock cluster and franz-go's kfake,
//! in one run on one machine, every figure the median of several rounds with the peers
//! interleaved, the first peer of each round rotating (kmock, librdkafka, kfake; then
//! librdkafka, kfake, kmock; …), printed as a Markdown table and as JSON.
//!
//! ```sh
//! cargo run --release -p kmock-tests --bin kmock-bench            # every figure, 5 rounds
//! cargo run --release -p kmock-tests --bin kmock-bench -- --quick # one short round
//! cargo run --release -p kmock-tests --bin kmock-bench -- --only latency,scale --rounds 3
//! ```
//!
//! Each peer runs as its own process, started afresh for each measurement: the `kmock` binary
//! (built here with cargo unless `--kmock-bin` is given), librdkafka's mock cluster (this
//! program re-run as `serve-librdkafka-mock`) and kfake (`fixtures/peers/kfake-serve`,
//! built with `go build` unless `--kfake-bin` is given). The clients (rdkafka's producer,
//! kmock-client) run in this process. Start-up (in process) and the journal figure run kmock
//! inside this process. See BENCHMARKS.md for the figures and what limits each.

mod capacity;
mod idle;
mod journal;
mod latency;
mod memory;
mod metadata;
mod peers;
mod producer;
mod proxy;
mod report;
mod retention;
mod scale;
mod startup;
mod wire;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use peers::{Peer, Tools};
use report::{Machine, Report, Row};

/// kmock side by side with librdkafka's mock cluster and franz-go's kfake.
#[derive(Debug, Parser)]
#[command(about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Rounds of each figure (each round measures every peer once); medians are reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// One round of small sizes: checks that every figure runs, measures nothing worth keeping.
    #[arg(long)]
    quick: bool,
    /// Run only these figures (comma-separated).
    #[arg(long, value_delimiter = ',', value_enum)]
    only: Vec<Figure>,
    /// The peers to measure (comma-separated: kmock, librdkafka, kfake).
    #[arg(long, value_delimiter = ',', default_value = "kmock,librdkafka,kfake")]
    peers: Vec<Peer>,
    /// Also write the JSON report (printed on one line after the table) to this file, indented.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// The `kmock` binary to measure (default: built with cargo, in this program's profile).
    #[arg(long, value_name = "PATH")]
    kmock_bin: Option<PathBuf>,
    /// The `kfake-serve` binary (default: built from fixtures/peers/kfake-serve with `go build`).
    #[arg(long, value_name = "PATH")]
    kfake_bin: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve librdkafka's mock cluster until killed, printing `bootstrap: …` first (used by
    /// the benchmark to run that peer in its own process).
    ServeLibrdkafkaMock {
        /// Number of brokers.
        #[arg(long, default_value_t = 1)]
        brokers: usize,
        /// A topic to create, as NAME:PARTITIONS (repeatable).
        #[arg(long = "topic", value_name = "NAME:PARTITIONS", value_parser = parse_topic)]
        topics: Vec<(String, i32)>,
    },
}

/// The issue's figures, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Figure {
    Startup,
    Producer,
    Capacity,
    Latency,
    Journal,
    Memory,
    Scale,
    /// Figure 9: a 100,000-partition Metadata answer.
    Metadata,
    /// Figure 10: idle connections.
    Idle,
    Proxy,
    /// Figure 12: memory under retention (kmock only).
    Retention,
}

/// How much each figure does in one round.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Messages the rdkafka producer sends.
    pub producer_messages: usize,
    /// Batches of ~1 MiB each capacity connection sends.
    pub big_requests: usize,
    /// One-record requests each capacity connection sends.
    pub small_requests: usize,
    /// OffsetCommits timed.
    pub commits: usize,
    /// Requests each journal-figure connection sends.
    pub journal_requests: usize,
    /// Bytes of records produced before memory is read again.
    pub memory_bytes: usize,
    /// Partitions of the topic Metadata describes.
    pub metadata_partitions: i32,
    /// Metadata requests timed.
    pub metadata_requests: usize,
    /// Concurrent producing connections.
    pub connections: usize,
    /// Requests each of them sends.
    pub requests_per_connection: usize,
    /// Partitions (over 20 topics) of the wide Metadata figure.
    pub wide_partitions: i32,
    /// Metadata requests timed in it.
    pub wide_requests: usize,
    /// Idle connections opened.
    pub idle_connections: usize,
    /// Bytes produced in the retention figure.
    pub retention_produced: usize,
    /// Its topic's `retention.bytes`.
    pub retention_bytes: usize,
    /// Its topic's `segment.bytes`.
    pub segment_bytes: usize,
}

impl Sizes {
    fn full() -> Self {
        Self {
            producer_messages: 1_000_000,
            big_requests: 128,
            small_requests: 10_000,
            commits: 2_000,
            journal_requests: 2_500,
            memory_bytes: 1_000_000_000,
            metadata_partitions: 10_000,
            metadata_requests: 20,
            connections: 1_000,
            requests_per_connection: 10,
            wide_partitions: 100_000,
            wide_requests: 10,
            idle_connections: 10_000,
            retention_produced: 8_000_000_000,
            retention_bytes: 64 << 20,
            segment_bytes: 16 << 20,
        }
    }

    fn quick() -> Self {
        Self {
            producer_messages: 10_000,
            big_requests: 4,
            small_requests: 200,
            commits: 100,
            journal_requests: 50,
            memory_bytes: 16 << 20,
            metadata_partitions: 100,
            metadata_requests: 3,
            connections: 20,
            requests_per_connection: 2,
            wide_partitions: 1_000,
            wide_requests: 2,
            idle_connections: 200,
            retention_produced: 96 << 20,
            retention_bytes: 4 << 20,
            segment_bytes: 1 << 20,
        }
    }
}

/// What every figure needs.
#[derive(Debug)]
pub struct Bench {
    pub tools: Tools,
    pub sizes: Sizes,
    pub rounds: usize,
    pub peers: Vec<Peer>,
    pub rt: tokio::runtime::Runtime,
}

impl Bench {
    /// The peers in the order round `round` measures them: the list rotated by one each round,
    /// so that no peer always runs first (on a machine warming up or cooling down).
    pub fn order(&self, round: usize) -> Vec<Peer> {
        let mut peers = self.peers.clone();
        if !peers.is_empty() {
            let by = round % peers.len();
            peers.rotate_left(by);
        }
        peers
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if let Some(Command::ServeLibrdkafkaMock { brokers, topics }) = &cli.command {
        return peers::serve_librdkafka_mock(*brokers, topics);
    }
    if cli.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let kfake_needed = cli.peers.contains(&Peer::Kfake);
    let bench = Bench {
        tools: Tools::find_or_build(cli.kmock_bin.clone(), cli.kfake_bin.clone(), kfake_needed)?,
        sizes: if cli.quick {
            Sizes::quick()
        } else {
            Sizes::full()
        },
        rounds: if cli.quick { 1 } else { cli.rounds },
        peers: cli.peers.clone(),
        rt: tokio::runtime::Runtime::new()?,
    };
    let mut machine = Machine::now();
    eprintln!(
        "kmock-bench: {} cores, {:.1} GiB, load average {:?}, {} round(s){}",
        machine.cores,
        machine.memory_gib,
        machine.load_average_start,
        bench.rounds,
        if cli.quick { ", quick sizes" } else { "" }
    );
    let mut rows: Vec<Row> = Vec::new();
    for figure in Figure::value_variants() {
        if !cli.only.is_empty() && !cli.only.contains(figure) {
            continue;
        }
        // The proxy's figure needs a real Kafka and compares no peers: only when asked for.
        if cli.only.is_empty() && *figure == Figure::Proxy {
            continue;
        }
        let load = report::load_average();
        eprintln!("kmock-bench: {figure:?} (load average {load:?}) …");
        machine
            .load_average_by_figure
            .push((format!("{figure:?}"), load));
        let run = match figure {
            Figure::Startup => startup::run,
            Figure::Producer => producer::run,
            Figure::Capacity => capacity::run,
            Figure::Latency => latency::run,
            Figure::Journal => journal::run,
            Figure::Memory => memory::run,
            Figure::Scale => scale::run,
            Figure::Metadata => metadata::run,
            Figure::Idle => idle::run,
            Figure::Proxy => proxy::run,
            Figure::Retention => retention::run,
        };
        rows.extend(run(&bench).with_context(|| format!("figure {figure:?}"))?);
    }
    machine.load_average_end = report::load_average();
    println!("{}", report::table(&rows));
    let report = Report {
        machine,
        rounds: bench.rounds,
        quick: cli.quick,
        figures: rows.into_iter().map(Into::into).collect(),
    };
    println!("{}", serde_json::to_string(&report)?);
    if let Some(path) = &cli.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn parse_topic(s: &str) -> Result<(String, i32)> {
    let Some((name, partitions)) = s.rsplit_once(':') else {
        bail!("expected NAME:PARTITIONS, e.g. orders:6");
    };
    let partitions: i32 = partitions
        .parse()
        .with_context(|| format!("partition count {partitions:?} is not a number"))?;
    Ok((name.to_owned(), partitions))
}
