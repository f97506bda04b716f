//! The `kmock` binary: a fake Kafka cluster for tests in any language.

mod check;
mod hunt;
mod proxy;
mod report;
mod serve;

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
    Serve(serve::Serve),
    /// Run the ordering checks on a JSON Lines journal (from `serve --journal`). Exit status:
    /// 0 clean, 1 violations, 2 unreadable input.
    Check(check::Check),
    /// Search seeded fault schedules for ones that make a workload break an ordering guarantee,
    /// and shrink each to a scenario that reproduces it: `kmock hunt [OPTIONS] -- COMMAND
    /// [ARGS…]`. COMMAND runs once a run against a fresh cluster, with
    /// KAFKA_BOOTSTRAP_SERVERS and KMOCK_CONTROL in its environment, and exits. The first run
    /// has no faults and shows what the workload sends; each later run draws 1–3 faults over
    /// that from the seed (see the README's "Hunting"). A violation, a failure exit status or a
    /// hang past --deadline is a finding: written to DIR/finding-N.yaml (a scenario for `kmock
    /// serve --config`), finding-N.txt, finding-N.journal.jsonl and finding-N.html (a timeline
    /// report). Exit status: 0 no finding, 1 findings, 2 bad input.
    Hunt(hunt::Hunt),
    /// Draw a JSON Lines journal (from `serve --journal`) and the checks' verdicts as one
    /// self-contained HTML timeline (`-o report.html`), to open offline in a browser. Exit
    /// status: 0 written, 2 unreadable input or unwritable output.
    Report(report::ReportArgs),
    /// Put kmock's journal, fault rules, checks and control API in front of a real Kafka
    /// cluster, until SIGINT or SIGTERM.
    Proxy(proxy::Proxy),
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
            if let Err(e) = serve::serve(args).await {
                eprintln!("kmock: {e:#}");
                std::process::exit(2);
            }
        }
        Command::Proxy(args) => {
            if let Err(e) = proxy::proxy(args).await {
                eprintln!("kmock: {e:#}");
                std::process::exit(2);
            }
        }
        Command::Check(args) => std::process::exit(check::check(&args)),
        Command::Hunt(args) => std::process::exit(hunt::hunt(args).await),
        Command::Report(args) => std::process::exit(report::report(&args)),
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

/// Reads a journal written as JSON Lines (`--journal` of `kmock serve`) for a subcommand that
/// reads one; on failure prints `kmock SUBCOMMAND: PATH: reason` to stderr and gives `None`
/// (the caller exits 2).
fn read_journal(subcommand: &str, path: &std::path::Path) -> Option<Vec<kmock::Entry>> {
    let entries = std::fs::File::open(path)
        .map_err(|e| e.to_string())
        .and_then(|f| {
            kmock::journal::read_jsonl(std::io::BufReader::new(f)).map_err(|e| e.to_string())
        });
    entries
        .map_err(|e| eprintln!("kmock {subcommand}: {}: {e}", path.display()))
        .ok()
}
