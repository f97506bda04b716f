//! The timeline: one HTML page that draws the journal, served live by the control API at
//! `GET /ui` and written as a self-contained report by `kmock report` and `kmock serve
//! --report`.
//!
//! The page is plain HTML, CSS and JavaScript drawing on a canvas (no library, no build step),
//! embedded in the binary with `include_str!` so it works offline. It shows one lane per
//! connection, grouped by broker and client id, each request a bar from arrival to answer
//! coloured by API, with its error codes; fault firings and cluster operations marked; the
//! checks' findings drawn as links between the entries they name; and a per-partition view of
//! committed offsets and producer sequences.
//!
//! The data is the journal's own JSON (the JSON Lines format of [`Entry`]) and the check
//! [`Report`]'s JSON, as `kmock check --format json` gives it: live, the page reads
//! `GET /journal`, `POST /check` and `GET /journal/stream`; in a report, both are embedded in
//! the file as one JSON object in a `<script type="application/json">`.

use std::io::Write;

use serde::Serialize;

use crate::check::Report;
use crate::journal::Entry;

const PAGE: &str = include_str!("assets/timeline.html");
const STYLE: &str = include_str!("assets/timeline.css");
/// The page's script in three parts of one function body (see `assets/data.js`).
const SCRIPTS: [&str; 3] = [
    include_str!("assets/data.js"),
    include_str!("assets/draw.js"),
    include_str!("assets/page.js"),
];

/// Kafka's error codes named, from -1 to this one, for the page's labels.
const LAST_ERROR_CODE: i16 = 140;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The entries or the report did not serialize.
    #[error("report data: {0}")]
    Json(#[source] serde_json::Error),
    /// The page could not be written to the writer it was given.
    #[error("cannot write the report: {0}")]
    Io(#[from] std::io::Error),
    /// The file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl From<serde_json::Error> for ReportError {
    /// An I/O failure met while serializing is the writer's ([`ReportError::Io`]).
    fn from(e: serde_json::Error) -> Self {
        if e.is_io() {
            Self::Io(e.into())
        } else {
            Self::Json(e)
        }
    }
}

/// What the page is given: `mode` `"live"` (it reads the control API) or `"report"` (the
/// entries and the report are here).
#[derive(Serialize)]
struct Data<'a> {
    mode: &'a str,
    title: &'a str,
    entries: &'a [Entry],
    report: Option<&'a Report>,
    /// Entries the journal evicted before these were taken (a report says so at the top).
    evicted: u64,
    /// Kafka's error codes with their names, `{"45": "OUT_OF_ORDER_SEQUENCE_NUMBER"}`.
    error_names: std::collections::BTreeMap<i16, String>,
}

fn error_names() -> std::collections::BTreeMap<i16, String> {
    (-1..=LAST_ERROR_CODE)
        .filter_map(|code| {
            let e = kafka_protocol::ResponseError::try_from_code(code)?;
            Some((code, crate::codec::screaming(&format!("{e:?}"))))
        })
        .collect()
}

/// The page's slots, each filled once where it stands in the template (so a title holding
/// `{{DATA}}` is only text).
const SLOTS: [&str; 5] = [
    "{{CSP}}",
    "{{TITLE}}",
    "{{STYLE}}",
    "{{SCRIPT}}",
    "{{DATA}}",
];

/// The live page's `Content-Security-Policy` header: its own inline script and style, no
/// other origin, only its control API to talk to, in no frame.
pub const LIVE_CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; \
    style-src 'unsafe-inline'; img-src data:; connect-src 'self'; frame-ancestors 'none'";

/// A report's policy, in a `<meta>` (a file has no headers): as [`LIVE_CSP`] with no network
/// at all (`frame-ancestors` is not honoured in a `<meta>`).
const REPORT_CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; \
    style-src 'unsafe-inline'; img-src data:; connect-src 'none'";

/// Writes the page with `data` embedded, the template split once on all its slots. The JSON
/// is streamed with `<` written as `\u003c` (the same inside a JSON string, and JSON holds
/// `<` only there): no `</script>` can end the data early.
fn render(out: &mut impl Write, data: &Data<'_>) -> Result<(), ReportError> {
    let mut rest = PAGE;
    while let Some((at, slot)) = SLOTS
        .iter()
        .filter_map(|slot| rest.find(slot).map(|at| (at, *slot)))
        .min()
    {
        out.write_all(&rest.as_bytes()[..at])?;
        match slot {
            "{{CSP}}" if data.mode == "report" => write!(
                out,
                r#"<meta http-equiv="Content-Security-Policy" content="{REPORT_CSP}">"#
            )?,
            "{{CSP}}" => {}
            "{{TITLE}}" => out.write_all(html_escape(data.title).as_bytes())?,
            "{{STYLE}}" => out.write_all(STYLE.as_bytes())?,
            "{{SCRIPT}}" => {
                for script in SCRIPTS {
                    out.write_all(script.as_bytes())?;
                }
            }
            _ => serde_json::to_writer(EscapeLt(&mut *out), data)?,
        }
        rest = &rest[at + slot.len()..];
    }
    out.write_all(rest.as_bytes())?;
    Ok(())
}

/// A writer that passes bytes on with each `<` written as `\u003c`.
struct EscapeLt<W>(W);

impl<W: Write> Write for EscapeLt<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for (i, part) in buf.split(|&b| b == b'<').enumerate() {
            if i > 0 {
                self.0.write_all(b"\\u003c")?;
            }
            self.0.write_all(part)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The live page of `GET /ui`: no data of its own; it reads the journal and the checks from
/// the control API that served it (with the bearer token given as `#token=…` in its address,
/// when the API has one).
pub fn live_page() -> String {
    let mut out = Vec::new();
    let data = Data {
        mode: "live",
        title: "kmock — live timeline",
        entries: &[],
        report: None,
        evicted: 0,
        error_names: error_names(),
    };
    render(&mut out, &data).expect("the live page renders into memory");
    String::from_utf8(out).expect("the page is UTF-8")
}

/// A self-contained report: the page with `entries` (in arrival order) and the checks'
/// `report` embedded, opened with no network. `evicted` counts entries the journal had
/// dropped before (shown at the top).
///
/// # Errors
/// [`ReportError::Io`] when `out` refuses a write; [`ReportError::Json`] if the data does not
/// serialize (not expected: entries and reports always do).
pub fn write_report(
    out: &mut impl Write,
    title: &str,
    entries: &[Entry],
    report: &Report,
    evicted: u64,
) -> Result<(), ReportError> {
    let data = Data {
        mode: "report",
        title,
        entries,
        report: Some(report),
        evicted,
        error_names: error_names(),
    };
    render(out, &data)
}

/// [`write_report`] into the file at `path` (created or replaced): written to a temporary
/// file beside it (`.NAME.PID.tmp`), then renamed over it, so a failed write leaves no
/// half page and an earlier report stays whole.
///
/// # Errors
/// [`ReportError::Write`] when the file cannot be created, written or renamed;
/// [`ReportError::Json`] as [`write_report`].
pub fn write_report_file(
    path: &std::path::Path,
    title: &str,
    entries: &[Entry],
    report: &Report,
    evicted: u64,
) -> Result<(), ReportError> {
    let failed = |source| ReportError::Write {
        path: path.to_owned(),
        source,
    };
    let temp = temp_path(path);
    let written = (|| {
        let file = std::fs::File::create(&temp).map_err(failed)?;
        let mut out = std::io::BufWriter::new(file);
        match write_report(&mut out, title, entries, report, evicted) {
            Err(ReportError::Io(e)) => return Err(failed(e)),
            other => other?,
        }
        out.flush().map_err(failed)?;
        std::fs::rename(&temp, path).map_err(failed)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp); // nothing more to do if it is gone already
    }
    written
}

/// Whether a report can be written at `path` later: creates the temporary file
/// [`write_report_file`] would write and removes it (`path` itself is not touched). For a
/// start-up check, before a run whose report would otherwise be lost at its end.
///
/// # Errors
/// [`ReportError::Write`] when `path` is a directory or the file cannot be created in its
/// directory.
pub fn check_writable(path: &std::path::Path) -> Result<(), ReportError> {
    if path.is_dir() {
        return Err(ReportError::Write {
            path: path.to_owned(),
            source: std::io::Error::other("a directory, not a file"),
        });
    }
    let temp = temp_path(path);
    std::fs::File::create(&temp).map_err(|source| ReportError::Write {
        path: path.to_owned(),
        source,
    })?;
    let _ = std::fs::remove_file(&temp); // created just now: removing it cannot matter
    Ok(())
}

/// `.NAME.PID.tmp` beside `path`.
fn temp_path(path: &std::path::Path) -> std::path::PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_end_inside_the_data_cannot_end_the_script() {
        let mut entry: Entry = crate::journal::read_jsonl(
            br#"{"seq":1,"at_us":5,"broker":1,"conn":1,"peer":"127.0.0.1:1","client_id":"</script><b>","api":"Metadata","version":9,"correlation_id":1,"request":"other","bad_request":null,"response":null,"faults":[]}"#
                .as_slice(),
        )
        .unwrap()
        .remove(0);
        entry.client_id = Some("</script><b>".into());
        let mut out = Vec::new();
        write_report(&mut out, "t<i>", &[entry], &Report::default(), 0).unwrap();
        let html = String::from_utf8(out).unwrap();
        assert!(!html.contains("</script><b>"), "unescaped");
        assert!(html.contains(r#""client_id":"\u003c/script>\u003cb>""#));
        assert!(html.contains("<title>t&lt;i&gt;</title>"));
        assert!(html.contains(r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'none'">"#));
        assert_eq!(html.matches("</script>").count(), 2, "data and script only");
    }

    #[test]
    fn slots_in_the_title_are_only_text() {
        let mut out = Vec::new();
        let title = "/tmp/{{DATA}}/{{SCRIPT}}/{{STYLE}}/{{CSP}}/{{TITLE}}.jsonl";
        write_report(&mut out, title, &[], &Report::default(), 0).unwrap();
        let html = String::from_utf8(out).unwrap();
        assert_eq!(
            html.matches(title).count(),
            3,
            "<title>, <h1> and the data, as given"
        );
        assert_eq!(
            html.matches(r#"id="kmock-data">{"mode":"report""#).count(),
            1
        );
        assert_eq!(html.matches(SCRIPTS[0]).count(), 1);
        assert_eq!(html.matches(STYLE).count(), 1);
        let data_at = html.find(r#"id="kmock-data">"#).unwrap();
        assert!(html[data_at..].contains(&format!(r#""title":"{title}""#)));
    }

    #[test]
    fn a_failing_writer_is_an_io_error() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let err = write_report(&mut Full, "t", &[], &Report::default(), 0).unwrap_err();
        assert!(matches!(err, ReportError::Io(_)), "{err:?}");
    }

    #[test]
    fn error_codes_are_named_as_kafka_names_them() {
        let names = error_names();
        assert_eq!(names[&45], "OUT_OF_ORDER_SEQUENCE_NUMBER");
        assert_eq!(names[&-1], "UNKNOWN_SERVER_ERROR");
    }
}
