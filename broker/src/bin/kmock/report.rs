//! `kmock report`: a JSON Lines journal and its check verdicts as one self-contained HTML
//! timeline page.

#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// The journal, one JSON entry a line (from `serve --journal`).
    journal: std::path::PathBuf,
    /// The HTML file to write (no network needed to open it).
    #[arg(short, long, value_name = "PATH", default_value = "report.html")]
    output: std::path::PathBuf,
}

/// Writes the report; the exit status: 0 written, 2 unreadable journal, unwritable output or
/// an output that is the journal.
/// (Violations are shown in the report, not in the exit status: `kmock check` gives that.)
pub(crate) fn report(args: &ReportArgs) -> i32 {
    let same = |a: &std::path::Path, b: &std::path::Path| matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b);
    if same(&args.journal, &args.output) {
        eprintln!(
            "kmock report: {}: the output is the journal itself (give another -o)",
            args.output.display()
        );
        return 2;
    }
    let Some(entries) = crate::read_journal("report", &args.journal) else {
        return 2;
    };
    let report = kmock::check::run(&entries, &kmock::Checks::default());
    let title = format!("kmock report: {}", args.journal.display());
    match kmock::timeline::write_report_file(&args.output, &title, &entries, &report, 0) {
        Ok(()) => {
            println!(
                "{}: {} entries, {} violations, {} warnings",
                args.output.display(),
                entries.len(),
                report.count(kmock::check::Severity::Violation),
                report.count(kmock::check::Severity::Warning)
            );
            0
        }
        Err(e) => {
            eprintln!("kmock report: {e}");
            2
        }
    }
}
