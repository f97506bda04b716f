//! `kmock serve`: its arguments, their parsers, and the cluster it runs until a signal.

use std::net::IpAddr;

use anyhow::{bail, Context};

#[derive(Debug, clap::Args)]
pub(crate) struct Serve {
    /// A YAML scenario: cluster shape, fault rules and checks to run at the end (see the
    /// README). Cannot be combined with the shape flags.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["brokers", "topics", "host", "port", "no_auto_create_topics", "default_partitions"])]
    config: Option<std::path::PathBuf>,
    /// Number of brokers (node ids 1..=N).
    #[arg(long, default_value_t = 1)]
    brokers: usize,
    /// A topic to create at start, as NAME:PARTITIONS (repeatable).
    #[arg(long = "topic", value_name = "NAME:PARTITIONS", value_parser = parse_topic)]
    topics: Vec<(String, i32)>,
    /// Address to listen on and advertise.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port of the first broker; the others take the next ports. 0 picks free ports.
    #[arg(long, default_value_t = 9092)]
    port: u16,
    /// Refuse to create unknown topics on Metadata requests (Kafka's
    /// auto.create.topics.enable=false).
    #[arg(long)]
    no_auto_create_topics: bool,
    /// Partitions of an auto-created topic (Kafka's num.partitions).
    #[arg(long, default_value_t = 1)]
    default_partitions: i32,
    /// The Apache Kafka version to emulate, 2.4 or later (e.g. 2.8, 3.6): the API versions its
    /// broker advertised and the behaviours that changed since (see the README). Overrides a
    /// scenario's `kafka_version`. Default 4.4.
    #[arg(long, value_name = "VERSION", value_parser = parse_kafka_version)]
    kafka_version: Option<kmock::KafkaVersion>,
    /// A cap on the bytes of record batches stored in all partitions together, as a number
    /// with an optional KiB, MiB or GiB suffix: a batch that would pass it is refused with
    /// KAFKA_STORAGE_ERROR (Kafka's answer when its log directory cannot be written), so a
    /// long run cannot grow without bound. Overrides a scenario's `max_stored_bytes`. Default:
    /// no cap.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    max_stored_bytes: Option<usize>,
    /// How often retention (`retention.ms`, `retention.bytes`) is checked on every partition
    /// (`30s`, `500ms`; Kafka's log.retention.check.interval.ms). `retention.bytes` is also
    /// checked after every append. Overrides a scenario's `retention_check_interval`. Default
    /// 5m, as Kafka; at least 100ms (each check walks every partition under the state lock).
    #[arg(long, value_name = "DURATION", value_parser = parse_retention_check_interval)]
    retention_check_interval: Option<std::time::Duration>,
    #[command(flatten)]
    groups: GroupFlags,
    #[command(flatten)]
    common: Common,
}

/// The settings of KIP-848 consumer groups (`group.protocol=consumer`), as the scenario's
/// `consumer_groups:` section has them; each overrides the scenario's.
#[derive(Debug, clap::Args)]
struct GroupFlags {
    /// A member that sends no heartbeat for this long is removed (Kafka's
    /// group.consumer.session.timeout.ms; e.g. 45s). Default 45s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    consumer_group_session_timeout: Option<std::time::Duration>,
    /// The heartbeat interval members are told (Kafka's group.consumer.heartbeat.interval.ms);
    /// below the session timeout. Default 5s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    consumer_group_heartbeat_interval: Option<std::time::Duration>,
    /// The least time between two target assignments of a group (Kafka's
    /// group.consumer.assignment.interval.ms; `0s` for a target on every change). Default 1s.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    consumer_group_assignment_interval: Option<std::time::Duration>,
    /// Members a consumer group may have (Kafka's group.consumer.max.size). Default
    /// unlimited.
    #[arg(long, value_name = "N")]
    consumer_group_max_size: Option<usize>,
    /// The server-side assignors, comma-separated, the first the default (Kafka's
    /// group.consumer.assignors: uniform, range). Default uniform,range.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    consumer_group_assignors: Option<Vec<String>>,
    /// Which online conversions between a classic group and a consumer group the
    /// coordinator makes (Kafka's group.consumer.migration.policy): bidirectional, upgrade,
    /// downgrade or disabled. Default bidirectional.
    #[arg(long, value_name = "POLICY", value_parser = kmock::MigrationPolicy::parse)]
    group_consumer_migration_policy: Option<kmock::MigrationPolicy>,
}

impl GroupFlags {
    fn spec(&self) -> kmock::scenario::ConsumerGroupsSpec {
        kmock::scenario::ConsumerGroupsSpec {
            session_timeout: self.consumer_group_session_timeout,
            heartbeat_interval: self.consumer_group_heartbeat_interval,
            assignment_interval: self.consumer_group_assignment_interval,
            max_size: self.consumer_group_max_size,
            assignors: self.consumer_group_assignors.clone(),
            migration_policy: self.group_consumer_migration_policy,
        }
    }
}

/// The flags `kmock serve` and `kmock proxy` share: journal, control API, connection limits,
/// the start-up line.
#[derive(Debug, clap::Args)]
pub(crate) struct Common {
    /// Write every request to this file as JSON Lines, one entry a line, flushed after each
    /// (lines come in completion order; `seq` gives arrival order).
    #[arg(long, value_name = "PATH")]
    journal: Option<std::path::PathBuf>,
    /// At exit, write the journal in memory and the checks' verdicts (the scenario's checks,
    /// else all) as a self-contained HTML timeline to this file (see `kmock report`).
    #[arg(long, value_name = "PATH")]
    report: Option<std::path::PathBuf>,
    /// Bytes of journal kept in memory (each entry's heap size estimated), as a number with
    /// an optional KiB, MiB or GiB suffix; past them the oldest entries go. Overrides a
    /// scenario's `journal_max_bytes`. Default 512MiB.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    journal_max_bytes: Option<usize>,
    /// Address the HTTP control API listens on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    control_host: IpAddr,
    /// Port of the HTTP control API; 0 picks a free one. Never a broker's port.
    #[arg(long, default_value_t = 0)]
    control_port: u16,
    /// Bearer token every control API request must carry (`Authorization: Bearer TOKEN`);
    /// overrides the scenario's `control_token`. Also read from the environment, so that it
    /// need not show in the process list. Default: none (loopback and same-origin checks
    /// only).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "KMOCK_CONTROL_TOKEN",
        hide_env_values = true
    )]
    control_token: Option<String>,
    /// A file holding the control API's bearer token (its first line), instead of
    /// `--control-token`.
    #[arg(long, value_name = "FILE")]
    control_token_file: Option<std::path::PathBuf>,
    /// Close a connection with no byte read or written for this long (Kafka's
    /// connections.max.idle.ms; e.g. 10m, 30s), or never with `off`. Default 10m; overrides
    /// the scenario's.
    #[arg(long, value_name = "DURATION|off", value_parser = parse_idle)]
    connections_max_idle: Option<Idle>,
    /// Open connections per broker beyond which the newest is closed (Kafka's
    /// max.connections). Default unlimited; overrides the scenario's.
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Print the start-up line as one JSON object, `{"bootstrap", "control", "ui", "brokers"}`,
    /// instead of the `bootstrap:`, `control:` and `timeline:` lines.
    #[arg(long)]
    print_json: bool,
}

fn parse_duration(s: &str) -> anyhow::Result<std::time::Duration> {
    let d = humantime::parse_duration(s)
        .with_context(|| format!("{s:?} is not a duration such as 10m or 30s"))?;
    if d.is_zero() {
        bail!("a duration of zero would close every connection at once");
    }
    Ok(d)
}

/// A `--retention-check-interval` value: a duration of at least
/// [`kmock::MIN_RETENTION_CHECK_INTERVAL`].
fn parse_retention_check_interval(s: &str) -> anyhow::Result<std::time::Duration> {
    let d = parse_duration(s)?;
    if d < kmock::MIN_RETENTION_CHECK_INTERVAL {
        bail!(
            "{s} is below the floor of {:?}: each check walks every partition under the state lock",
            kmock::MIN_RETENTION_CHECK_INTERVAL
        );
    }
    Ok(d)
}

/// A `--connections-max-idle` value: a duration, or `None` for `off`.
#[derive(Debug, Clone, Copy)]
struct Idle(Option<std::time::Duration>);

fn parse_idle(s: &str) -> Result<Idle, String> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(Idle(None));
    }
    parse_duration(s)
        .map(|d| Idle(Some(d)))
        .map_err(|e| format!("{e:#}, or `off` to never close an idle connection"))
}

/// The control API's token: `--control-token` (or `KMOCK_CONTROL_TOKEN`), else the first line
/// of `--control-token-file`, else the scenario's.
fn control_token(
    args: &Common,
    scenario: Option<&kmock::Scenario>,
) -> anyhow::Result<Option<String>> {
    let from_file = match &args.control_token_file {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --control-token-file {}", path.display()))?;
            let token = text.lines().next().unwrap_or("").trim().to_owned();
            if token.is_empty() {
                bail!("--control-token-file {} holds no token", path.display());
            }
            Some(token)
        }
    };
    if from_file.is_some() && args.control_token.is_some() {
        bail!("give the control token once: --control-token (or KMOCK_CONTROL_TOKEN) or --control-token-file");
    }
    Ok(from_file
        .or_else(|| args.control_token.clone())
        .or_else(|| scenario.and_then(|s| s.control_token.clone())))
}

fn parse_bytes(s: &str) -> anyhow::Result<usize> {
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, ""),
    };
    let shift = match unit {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        _ => bail!("expected a byte count such as 536870912, 64MiB or 1GiB, not {s:?}"),
    };
    let n: usize = digits
        .parse()
        .with_context(|| format!("byte count {s:?} does not start with a number"))?;
    n.checked_mul(1 << shift)
        .with_context(|| format!("byte count {s:?} is too large"))
}

fn parse_topic(s: &str) -> anyhow::Result<(String, i32)> {
    let Some((name, partitions)) = s.rsplit_once(':') else {
        bail!("expected NAME:PARTITIONS, e.g. orders:6");
    };
    let partitions: i32 = partitions
        .parse()
        .with_context(|| format!("partition count {partitions:?} is not a number"))?;
    if partitions < 1 {
        bail!("a topic needs at least one partition");
    }
    Ok((name.to_owned(), partitions))
}

pub(crate) async fn serve(args: Serve) -> anyhow::Result<()> {
    let scenario = match &args.config {
        Some(path) => Some(kmock::Scenario::load(path)?),
        None => None,
    };
    let builder = match &scenario {
        Some(scenario) => {
            if scenario.upstream.is_some() {
                bail!("the scenario names an upstream: run it with `kmock proxy --config`");
            }
            scenario.builder()?
        }
        None => {
            if args.brokers == 0 {
                bail!("--brokers must be at least 1");
            }
            let mut builder = kmock::Cluster::builder()
                .brokers(args.brokers)
                .host(args.host)
                .port(args.port)
                .auto_create_topics(!args.no_auto_create_topics)
                .default_partitions(args.default_partitions);
            for (name, partitions) in &args.topics {
                builder = builder.topic(name, *partitions);
            }
            builder
        }
    };
    let builder = match args.kafka_version {
        Some(version) => builder.kafka_version(version),
        None => builder,
    };
    let builder = match args.max_stored_bytes {
        Some(bytes) => builder.max_stored_bytes(bytes as u64),
        None => builder,
    };
    let builder = match args.retention_check_interval {
        Some(interval) => builder.retention_check_interval(interval),
        None => builder,
    };
    // The group flags over the scenario's section, checked together as one.
    let flags = args.groups.spec();
    let builder = if flags == kmock::scenario::ConsumerGroupsSpec::default() {
        builder
    } else {
        let from_scenario = scenario
            .as_ref()
            .and_then(|s| s.consumer_groups.clone())
            .unwrap_or_default();
        from_scenario.overridden_by(&flags).apply(builder)?
    };
    run(builder, scenario, args.common).await
}

/// Starts the cluster (or proxy) `builder` describes with the `common` flags, prints its
/// start-up line, and runs until SIGINT or SIGTERM; then the scenario's checks, and exits.
pub(crate) async fn run(
    mut builder: kmock::ClusterBuilder,
    scenario: Option<kmock::Scenario>,
    args: Common,
) -> anyhow::Result<()> {
    if let Some(Idle(idle)) = args.connections_max_idle {
        builder = builder.connections_max_idle(idle);
    }
    if let Some(max) = args.max_connections {
        builder = builder.max_connections(Some(max));
    }
    if let Some(path) = &args.journal {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot create journal file {}", path.display()))?;
        builder = builder.journal_jsonl(std::io::BufWriter::new(file));
    }
    if let Some(path) = &args.report {
        // Found out now, not after the run whose report it is.
        kmock::timeline::check_writable(path).context("--report")?;
    }
    if let Some(bytes) = args.journal_max_bytes {
        builder = builder.journal_max_bytes(bytes);
    }
    let token = control_token(&args, scenario.as_ref())?;
    let mut stop = StopSignals::new()?;
    let cluster = builder.start().await?;
    let control_addr = std::net::SocketAddr::new(args.control_host, args.control_port);
    let control =
        kmock::control::ControlApi::start_with_token(cluster.clone(), control_addr, token).await?;
    let checks = match &scenario {
        Some(scenario) => {
            for rule in scenario.rules()? {
                cluster.add_rule(rule)?;
            }
            // Ends with the process; repeating operations run until then.
            tokio::spawn(kmock::schedule::run(
                cluster.clone(),
                scenario.operations.clone(),
            ));
            scenario.checks()?
        }
        None => None,
    };
    if args.print_json {
        let line = serde_json::json!({
            "bootstrap": cluster.bootstrap(),
            "control": control.url(),
            "ui": format!("{}/ui", control.url()),
            "brokers": kmock::control::brokers_json(&cluster),
        });
        println!("{line}");
    } else {
        println!("bootstrap: {}", cluster.bootstrap());
        println!("control: {}", control.url());
        println!("timeline: {}/ui", control.url());
    }
    stop.wait().await;
    tracing::info!("stopping");
    control.shutdown().await;
    cluster.shutdown().await;
    let (report, expectations) = kmock::scenario::finish(&cluster, checks.as_ref());
    let mut failed = false;
    if let Some(path) = &args.report {
        let journal = cluster.journal();
        let verdicts = match &report {
            Some(report) => report.clone(),
            None => cluster.check(&kmock::Checks::default()),
        };
        let title = "kmock serve: the run's timeline";
        match kmock::timeline::write_report_file(
            path,
            title,
            journal.entries(),
            &verdicts,
            journal.evicted(),
        ) {
            Ok(()) => tracing::info!(path = %path.display(), "timeline report written"),
            Err(e) => {
                eprintln!("kmock: --report: {e}");
                failed = true;
            }
        }
    }
    if let Some(report) = report {
        print!("{report}");
        failed |= !report.is_clean();
    }
    if let Err(unmet) = expectations {
        println!("{unmet}");
        failed = true;
    }
    // Exit without dropping the cluster: its drop would report unmet expectations again.
    std::io::Write::flush(&mut std::io::stdout())?;
    std::process::exit(i32::from(failed));
}

/// SIGINT and SIGTERM, listened for from creation: make it before telling anyone the cluster
/// is up, so a signal sent right after the bootstrap line is not lost (or fatal).
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn wait(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

fn parse_kafka_version(s: &str) -> Result<kmock::KafkaVersion, String> {
    let version: kmock::KafkaVersion = s.parse().map_err(|e: kmock::Error| e.to_string())?;
    version.check().map_err(|e| e.to_string())?;
    Ok(version)
}
