//! `kmock check`: its arguments and its run over a journal file.

#[derive(Debug, clap::Args)]
pub(crate) struct Check {
    /// The journal, one JSON entry a line.
    journal: std::path::PathBuf,
    /// Run only this check (repeatable); all by default. The checks: offset-commit-regression,
    /// commit-for-unassigned-partition, stale-generation-commit, sequence-gap,
    /// sequence-reorder, sequence-overlap, epoch-not-reset, epoch-regression,
    /// inflight-exceeded, duplicate-write, out-of-order-write, lost-write (the last three need
    /// the partition logs: skipped here), stuck-client (a client sending a request again after
    /// an error without the recovery step Kafka's protocol defines; see --stuck-after),
    /// reorder-on-retry, sequence-reused, and the transaction checks
    /// txn-offset-commit-regression, produce-after-end-txn, end-txn-with-produce-in-flight,
    /// read-committed-saw-aborted.
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

/// Runs the checks; the exit status: 0 clean, 1 violations, 2 unreadable input or bad flags.
pub(crate) fn check(args: &Check) -> i32 {
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
    let Some(entries) = crate::read_journal("check", &args.journal) else {
        return 2;
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
