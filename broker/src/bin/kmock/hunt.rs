//! `kmock hunt`: its arguments and its run (the search itself is `kmock::hunt`).

use anyhow::{bail, Context};

#[derive(Debug, clap::Args)]
pub(crate) struct Hunt {
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

/// A hunt's time budget or deadline: a duration above zero.
fn parse_budget(s: &str) -> anyhow::Result<std::time::Duration> {
    let d = humantime::parse_duration(s)
        .with_context(|| format!("{s:?} is not a duration such as 10m or 30s"))?;
    if d.is_zero() {
        bail!("a duration of zero leaves no time to run the workload");
    }
    Ok(d)
}

/// Runs a hunt; the exit status: 0 no finding, 1 findings, 2 bad input or a failure to run.
pub(crate) async fn hunt(args: Hunt) -> i32 {
    match hunt_options(&args) {
        Err(e) => {
            eprintln!("kmock hunt: {e:#}");
            2
        }
        Ok(options) => {
            let (program, rest) = args.command.split_first().expect("clap requires COMMAND");
            let workload = kmock::hunt::Workload::command(program, rest);
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
