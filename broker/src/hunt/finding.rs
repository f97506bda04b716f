//! A hunt's finding and the files it is written to: `finding-N.yaml` (a scenario `kmock serve
//! --config` accepts), `finding-N.txt` (the verdicts, the workload's output, a journal
//! excerpt), `finding-N.journal.jsonl` (the journal of a reproducing run) and `finding-N.html`
//! (that journal and its verdicts as a timeline report, [`crate::timeline`]).

use std::fmt::Write as _;
use std::path::PathBuf;

use super::{Fault, Options, Outcome, Workload};
use crate::check::Severity;
use crate::error::Error;
use crate::journal::Entry;
use crate::scenario::Scenario;

/// Journal entries shown either side of a violation's first entry.
const EXCERPT: u64 = 5;
/// Violations of the finding's kind listed one by one.
const LISTED: usize = 20;

/// One finding of a hunt.
#[derive(Debug, Clone)]
pub struct Finding {
    /// From 1, in the order found.
    pub number: usize,
    /// The check that found a violation, or [`super::WORKLOAD_FAILED`] /
    /// [`super::WORKLOAD_HUNG`].
    pub kind: String,
    /// The run whose schedule showed it (0: the fault-free run).
    pub run: u64,
    /// The schedule as drawn.
    pub before: Vec<Fault>,
    /// The schedule as shrunk.
    pub after: Vec<Fault>,
    /// Shrinking candidates judged.
    pub tried: usize,
    /// Runs of the shrunk schedule that showed the kind, of how many.
    pub reproduced: (usize, usize),
    /// The scenario written to `finding-N.yaml`.
    pub scenario: Scenario,
    /// The files written.
    pub files: Vec<PathBuf>,
}

impl Finding {
    /// Writes the finding's files into `options.out`, with `shown` (a run that reproduced it)
    /// as its evidence; the finding with its scenario and files.
    pub(super) fn write(
        mut self,
        options: &Options,
        workload: &Workload,
        shown: &Outcome,
    ) -> Result<Self, Error> {
        let checks = if self.kind.starts_with("workload-") {
            options.check_names.clone()
        } else {
            vec![self.kind.clone()]
        };
        self.scenario = options.scenario(self.run, &self.after, checks);
        // The hunt's runs were on free ports: so is the finding, unless the base chose a port
        // (without one, `kmock serve --config` would take 9092).
        self.scenario.port.get_or_insert(0);
        let command = workload.describe();
        let body = serde_yaml::to_string(&self.scenario)
            .map_err(|e| Error::Config(format!("cannot write the finding's scenario: {e}")))?;
        let yaml = format!(
            "# kmock hunt, finding {n}: {kind}, reproduced in {hits} of {k} runs of this schedule.\n\
             # Found by run {run} of the hunt with --seed {seed} ({before} faults, shrunk to {after} in {tried}\n\
             # candidates). Workload: {command}\n\
             # Serve it, then run the workload against the bootstrap it prints:\n\
             #   kmock serve --config finding-{n}.yaml\n{body}",
            n = self.number,
            kind = self.kind,
            hits = self.reproduced.0,
            k = self.reproduced.1,
            run = self.run,
            seed = options.seed,
            before = self.before.len(),
            after = self.after.len(),
            tried = self.tried,
        );
        // What `kmock serve --config` will read: refuse to write what it would refuse.
        Scenario::parse(&yaml)
            .map_err(|e| Error::Config(format!("the finding's scenario does not load: {e}")))?;
        let dir = &options.out;
        let stem = format!("finding-{}", self.number);
        let write = |name: String, bytes: &[u8]| -> Result<PathBuf, Error> {
            let path = dir.join(name);
            std::fs::write(&path, bytes)
                .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
            Ok(path)
        };
        let text = self.text(&command, shown);
        let mut journal = Vec::new();
        shown
            .journal
            .write_jsonl(&mut journal)
            .map_err(|e| Error::Config(format!("cannot write the journal: {e}")))?;
        let mut html = Vec::new();
        crate::timeline::write_report(
            &mut html,
            &format!("kmock hunt: finding {} ({})", self.number, self.kind),
            shown.journal.entries(),
            &shown.report,
            shown.journal.evicted(),
        )
        .map_err(|e| Error::Config(format!("cannot write the report: {e}")))?;
        self.files = vec![
            write(format!("{stem}.yaml"), yaml.as_bytes())?,
            write(format!("{stem}.txt"), text.as_bytes())?,
            write(format!("{stem}.journal.jsonl"), &journal)?,
            write(format!("{stem}.html"), &html)?,
        ];
        Ok(self)
    }

    /// `finding-N.txt`.
    fn text(&self, command: &str, shown: &Outcome) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "Finding {}: {} (reproduced in {} of {} runs of the shrunk schedule)\nWorkload: {command}\n",
            self.number, self.kind, self.reproduced.0, self.reproduced.1
        );
        let of_kind: Vec<_> = shown
            .report
            .of_kind(&self.kind)
            .filter(|v| v.severity == Severity::Violation)
            .collect();
        let _ = writeln!(
            t,
            "Verdicts of the run shown ({} violations of this kind):",
            of_kind.len()
        );
        for v in of_kind.iter().take(LISTED) {
            let _ = writeln!(t, "  {} [{}]: {}", v.kind, v.key, v.message);
        }
        let _ = writeln!(
            t,
            "All findings of that run: {} violations, {} warnings; kinds {:?}\n",
            shown.report.count(Severity::Violation),
            shown.report.count(Severity::Warning),
            shown.kinds()
        );
        let _ = writeln!(
            t,
            "Workload: {} after {:.2?}; last lines of its output:",
            shown.exit, shown.took
        );
        for line in &shown.output_tail {
            let _ = writeln!(t, "  | {line}");
        }
        let _ = writeln!(t, "\nRules (fired of matched):");
        for (name, fired, matched) in &shown.rules_fired {
            let _ = writeln!(t, "  {name}: {fired} of {matched}");
        }
        let schedule = |faults: &[Fault]| {
            faults
                .iter()
                .map(|f| match f {
                    Fault::Rule(r) => serde_json::to_string(r).unwrap_or_default(),
                    Fault::Operations(ops) => serde_json::to_string(ops).unwrap_or_default(),
                })
                .collect::<Vec<_>>()
        };
        let _ = writeln!(t, "\nSchedule as drawn:");
        for f in schedule(&self.before) {
            let _ = writeln!(t, "  {f}");
        }
        let _ = writeln!(t, "Schedule as shrunk ({} candidates judged):", self.tried);
        for f in schedule(&self.after) {
            let _ = writeln!(t, "  {f}");
        }
        if let Some(first) = of_kind.first().and_then(|v| v.entries.first()) {
            let _ = writeln!(t, "\nJournal around seq {}:", first.seq);
            let near = shown
                .journal
                .entries()
                .iter()
                .filter(|e| e.seq + EXCERPT >= first.seq && e.seq <= first.seq + EXCERPT);
            for e in near {
                let _ = writeln!(t, "  {}", line(e));
            }
        }
        t
    }
}

/// One journal entry on one line.
fn line(e: &Entry) -> String {
    let what = match (&e.api, &e.operation) {
        (_, Some(op)) => format!("{op:?}"),
        (Some(api), None) => format!("{api} v{}", e.version.unwrap_or(-1)),
        (None, None) => "bad frame".to_owned(),
    };
    let answer = match &e.response {
        Some(r) => format!("errors {:?}", r.error_codes),
        None => "unanswered".to_owned(),
    };
    format!(
        "seq {} +{}us broker {} conn {}: {what}, {answer}, faults {:?}",
        e.seq, e.at_us, e.broker, e.conn, e.faults
    )
}
