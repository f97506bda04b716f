//! The `kmock` binary: a fake Kafka cluster for tests in any language.

use std::net::IpAddr;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// A Kafka wire-protocol fake broker for tests.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a fake cluster until SIGINT or SIGTERM.
    Serve(Serve),
    /// Run the ordering checks on a JSON Lines journal (from `serve --journal`). Exit status:
    /// 0 clean, 1 violations, 2 unreadable input.
    Check(Check),
    /// Search seeded fault schedules for ones that make a workload break an ordering guarantee,
    /// and shrink each to a scenario that reproduces it: `kmock hunt [OPTIONS] -- COMMAND
    /// [ARGS…]`. COMMAND runs once a run against a fresh cluster, with
    /// KAFKA_BOOTSTRAP_SERVERS and KMOCK_CONTROL in its environment, and exits. The first run
    /// has no faults and shows what the workload sends; each later run draws 1–3 faults over
    /// that from the seed (see the README's "Hunting"). A violation, a failure exit status or a
    /// hang past --deadline is a finding: written to DIR/finding-N.yaml (a scenario for `kmock
    /// serve --config`), finding-N.txt and finding-N.journal.jsonl. Exit status: 0 no finding,
    /// 1 findings, 2 bad input.
    Hunt(Hunt),
}

#[derive(Debug, clap::Args)]
struct Hunt {
    /// A YAML scenario with the cluster's shape and topics (rules and operations in it stay
    /// in force in every run). Default: one broker, topics auto-created.
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Schedules to try after the fault-free run (default 20, unless --time is given).
    #[arg(long, value_name = "N")]
    runs: Option<usize>,
    /// Time budget of the search (e.g. 10m); a shrink under way is finished.
    #[arg(long, value_name = "DURATION", value_parser = parse_budget)]
    time: Option<std::time::Duration>,
    /// Seed of the schedules: the same seed and workload draw the same schedules.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Judge with this check only (repeatable); default the scenario's `checks:`, else all.
    #[arg(long = "check", value_name = "NAME")]
    checks: Vec<String>,
    /// Directory the findings are written to.
    #[arg(long, value_name = "DIR", default_value = "kmock-hunt")]
    out: std::path::PathBuf,
    /// A workload still running this long after its start is killed and is a finding.
    #[arg(long, value_name = "DURATION", value_parser = parse_budget, default_value = "2m")]
    deadline: std::time::Duration,
    /// k: a shrinking candidate counts when it shows the finding in k of k runs.
    #[arg(long, value_name = "K", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    reruns: u64,
    /// Candidates the shrinker may try per finding.
    #[arg(long, value_name = "N", default_value_t = 30)]
    shrink_tries: usize,
    /// Stop after this many findings.
    #[arg(long, value_name = "N")]
    max_findings: Option<usize>,
    /// Also draw errors no client can recover from (authorization failures, invalid
    /// records): a correct workload fails on them, so read those findings with care.
    #[arg(long)]
    fatal_errors: bool,
    /// Runs at once, each on a cluster of its own. The schedules come from the seed and are
    /// judged in the order of their numbers, so the findings do not depend on it.
    #[arg(long, value_name = "J", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    jobs: u64,
    /// The workload and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<std::ffi::OsString>,
}

#[derive(Debug, clap::Args)]
struct Check {
    /// The journal, one JSON entry a line.
    journal: std::path::PathBuf,
    /// Run only this check (repeatable); all by default. The checks: offset-commit-regression,
    /// commit-for-unassigned-partition, stale-generation-commit, sequence-gap,
    /// sequence-reorder, sequence-overlap, epoch-not-reset, epoch-regression,
    /// inflight-exceeded, duplicate-write, out-of-order-write, lost-write (the last three need
    /// the partition logs: skipped here), stuck-client (a client sending a request again after
    /// an error without the recovery step Kafka's protocol defines; see --stuck-after),
    /// reorder-on-retry.
    #[arg(long = "check", value_name = "NAME")]
    checks: Vec<String>,
    /// Produce requests any producer may have outstanding on one connection (the client's
    /// configured limit), with or without a producer id. Unset: only idempotent producers are
    /// held, to 5 (Kafka's bound for idempotence).
    #[arg(long)]
    max_in_flight: Option<usize>,
    /// Which commits `offset-commit-regression` compares: a member's own within one
    /// generation, or every commit to the group (as `POST /check`'s `commit_scope`).
    #[arg(long, value_enum, default_value_t = Scope::Member)]
    commit_scope: Scope,
    /// Retries a client may send after an error without the recovery step Kafka's protocol
    /// defines for it (FindCoordinator, Metadata, JoinGroup, a new producer epoch) before
    /// `stuck-client` names it.
    #[arg(long, value_name = "N", default_value_t = kmock::check::DEFAULT_STUCK_AFTER)]
    stuck_after: usize,
    /// How soon after the error a client past --stuck-after retries must have recovered (taken
    /// the step, or been answered without error) not to be named, as `5s` or `500ms`; a client
    /// that never recovers is named whatever this is.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = humantime::parse_duration)]
    stuck_for: std::time::Duration,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// `kmock::check::CommitScope` on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Scope {
    Member,
    Group,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
struct Serve {
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
    /// Write every request to this file as JSON Lines, one entry a line, flushed after each
    /// (lines come in completion order; `seq` gives arrival order).
    #[arg(long, value_name = "PATH")]
    journal: Option<std::path::PathBuf>,
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
    /// Print the start-up line as one JSON object, `{"bootstrap", "control", "brokers"}`,
    /// instead of the `bootstrap:` and `control:` lines.
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

/// A hunt's time budget or deadline: a duration above zero.
fn parse_budget(s: &str) -> anyhow::Result<std::time::Duration> {
    let d = humantime::parse_duration(s)
        .with_context(|| format!("{s:?} is not a duration such as 10m or 30s"))?;
    if d.is_zero() {
        bail!("a duration of zero leaves no time to run the workload");
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
    args: &Serve,
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

/// Exit status: 0, 1 for violations or unmet expectations (`check`, `serve --config`), 2 for
/// bad input (flags, scenario, journal) or a failure to start.
#[tokio::main]
async fn main() {
    let cli = cli();
    // A hunt starts a cluster per run: their start lines would bury its progress lines.
    let default_level = match cli.command {
        Command::Hunt(_) => "warn",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command {
        Command::Serve(args) => {
            if let Err(e) = serve(args).await {
                eprintln!("kmock: {e:#}");
                std::process::exit(2);
            }
        }
        Command::Check(args) => std::process::exit(check(&args)),
        Command::Hunt(args) => std::process::exit(hunt(args).await),
    }
}

/// The command line, parsed; `kmock check --help` lists every check ([`kmock::check::ALL`]).
fn cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let help = format!(
        "Run only this check (repeatable); all by default. The checks: {}",
        kmock::check::ALL.join(", ")
    );
    let command = Cli::command().mut_subcommand("check", |check| {
        check.mut_arg("checks", |arg| arg.help(help))
    });
    Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit())
}

/// Runs the checks; the exit status: 0 clean, 1 violations, 2 unreadable input or bad flags.
fn check(args: &Check) -> i32 {
    let checks = if args.checks.is_empty() {
        Ok(kmock::Checks::default())
    } else {
        kmock::Checks::only(&args.checks)
    };
    let checks = match checks {
        Ok(checks) => {
            let checks = checks
                .stuck_after(args.stuck_after)
                .stuck_for(args.stuck_for)
                .commit_scope(match args.commit_scope {
                    Scope::Member => kmock::check::CommitScope::Member,
                    Scope::Group => kmock::check::CommitScope::Group,
                });
            match args.max_in_flight {
                Some(limit) => checks.max_in_flight(limit),
                None => checks,
            }
        }
        Err(e) => {
            eprintln!("kmock check: {e}");
            return 2;
        }
    };
    let entries = std::fs::File::open(&args.journal)
        .map_err(|e| e.to_string())
        .and_then(|f| {
            kmock::journal::read_jsonl(std::io::BufReader::new(f)).map_err(|e| e.to_string())
        });
    let entries = match entries {
        Ok(entries) => entries,
        Err(e) => {
            eprintln!("kmock check: {}: {e}", args.journal.display());
            return 2;
        }
    };
    let report = kmock::check::run(&entries, &checks);
    match args.format {
        Format::Text => print!("{report}"),
        Format::Json => match serde_json::to_string_pretty(&report) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("kmock check: {e}");
                return 2;
            }
        },
    }
    i32::from(!report.is_clean())
}

/// Runs a hunt; the exit status: 0 no finding, 1 findings, 2 bad input or a failure to run.
async fn hunt(args: Hunt) -> i32 {
    match hunt_options(&args) {
        Err(e) => {
            eprintln!("kmock hunt: {e:#}");
            2
        }
        Ok(options) => {
            let (program, rest) = args.command.split_first().expect("clap requires COMMAND");
            let workload = kmock::hunt::Workload {
                program: program.clone(),
                args: rest.to_vec(),
            };
            match kmock::hunt::hunt(&options, &workload, &mut |line| eprintln!("{line}")).await {
                Err(e) => {
                    eprintln!("kmock hunt: {e}");
                    2
                }
                Ok(summary) => {
                    print!("{}", kmock::hunt::table(&summary));
                    i32::from(!summary.findings.is_empty())
                }
            }
        }
    }
}

fn hunt_options(args: &Hunt) -> anyhow::Result<kmock::hunt::Options> {
    let base = match &args.config {
        Some(path) => kmock::Scenario::load(path)?,
        None => kmock::Scenario::default(),
    };
    let names = if args.checks.is_empty() {
        base.checks.clone()
    } else {
        args.checks.clone()
    };
    let mut options = kmock::hunt::Options::new(base);
    if !names.is_empty() {
        options.checks = kmock::Checks::named(&names).map_err(anyhow::Error::msg)?;
        if let Some(n) = options.base.stuck_after {
            options.checks = options.checks.stuck_after(n);
        }
    }
    options.check_names = names;
    options.runs = args.runs;
    options.time = args.time;
    options.seed = args.seed;
    options.out.clone_from(&args.out);
    options.deadline = args.deadline;
    options.reruns = usize::try_from(args.reruns)?;
    options.shrink_tries = args.shrink_tries;
    options.max_findings = args.max_findings;
    options.fatal_errors = args.fatal_errors;
    options.jobs = usize::try_from(args.jobs)?;
    Ok(options)
}

async fn serve(args: Serve) -> anyhow::Result<()> {
    let scenario = match &args.config {
        Some(path) => Some(kmock::Scenario::load(path)?),
        None => None,
    };
    let mut builder = match &scenario {
        Some(scenario) => scenario.builder()?,
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
            "brokers": kmock::control::brokers_json(&cluster),
        });
        println!("{line}");
    } else {
        println!("bootstrap: {}", cluster.bootstrap());
        println!("control: {}", control.url());
    }
    stop.wait().await;
    tracing::info!("stopping");
    control.shutdown().await;
    cluster.shutdown().await;
    let (report, expectations) = kmock::scenario::finish(&cluster, checks.as_ref());
    let mut failed = false;
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
