//! Every example of CONTROL_API.md runs as written: its `sh` blocks, in document order, against
//! a fresh `kmock serve` started as the document starts it, each block a bash script that must
//! succeed, with every HTTP error failing it; and what each curl command prints is what the
//! `json` block after it shows, line for line (`…` standing for what the document leaves out,
//! and times, client ports and request numbers compared by type only).

use std::process::Command;

mod common;

use common::Server;

const DOC: &str = include_str!("../../CONTROL_API.md");

/// The document's code blocks in order: each ```` ```sh ```` block with the ```` ```json ````
/// block that follows it before the next `sh` block (what its curl commands print), if any.
fn sh_blocks(doc: &str) -> Vec<(String, Option<String>)> {
    let mut blocks: Vec<(String, Option<String>)> = Vec::new();
    let mut current: Option<(&str, String)> = None;
    for line in doc.lines() {
        match (&mut current, line.trim_end()) {
            (None, fence) if fence.starts_with("```") => {
                current = Some((&fence[3..], String::new()));
            }
            (Some((kind, body)), "```") => {
                let body = std::mem::take(body);
                match *kind {
                    "sh" => blocks.push((body, None)),
                    "json" => {
                        let last = blocks.last_mut().expect("a json block after an sh block");
                        assert!(last.1.is_none(), "two json blocks after one sh block");
                        last.1 = Some(body);
                    }
                    _ => {}
                }
                current = None;
            }
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "a code block is not closed");
    blocks
}

/// A string the document's `…` stands for: any value here.
const ANY: &str = "\u{0}ANY";
/// An array element or object key the document's `,…` stands for: more may follow.
const MORE: &str = "\u{0}MORE";
/// Keys whose values vary from run to run (times, client ports, and what the client's own
/// requests number): only their type is compared.
const VARYING: &[&str] = &[
    "at_us",
    "sending_us",
    "peer",
    "seq",
    "conn",
    "correlation_id",
    "version",
];

/// A line of the document's JSON as a pattern: `"…"`, `{…}`, `[…]` and a bare `…` value match
/// anything, `,…]` and `,…}` allow more elements or keys.
fn pattern(line: &str) -> serde_json::Value {
    let any = format!("\"{}\"", ANY.replace('\0', "\\u0000"));
    let more = format!("\"{}\"", MORE.replace('\0', "\\u0000"));
    let text = line
        .replace("\"…\"", &any)
        .replace("{…}", &any)
        .replace("[…]", &any)
        .replace(",…]", &format!(",{more}]"))
        .replace(",…}", &format!(",{more}:null}}"))
        .replace(":…", &format!(":{any}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("CONTROL_API.md JSON {line:?}: {e}"))
}

/// Where `actual` differs from `pattern` (empty: it matches), naming the path.
fn differences(path: &str, pattern: &serde_json::Value, actual: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    match (pattern, actual) {
        (Value::String(s), _) if s == ANY => vec![],
        (Value::Array(want), Value::Array(got)) => {
            let open = want.last().is_some_and(|l| l == MORE);
            let fixed = if open {
                &want[..want.len() - 1]
            } else {
                &want[..]
            };
            let mut out = Vec::new();
            if got.len() < fixed.len() || (!open && got.len() != fixed.len()) {
                out.push(format!(
                    "{path}: {} elements, the document shows {}",
                    got.len(),
                    want.len()
                ));
            }
            for (i, (w, g)) in fixed.iter().zip(got).enumerate() {
                out.extend(differences(&format!("{path}[{i}]"), w, g));
            }
            out
        }
        (Value::Object(want), Value::Object(got)) => {
            let open = want.contains_key(MORE);
            let mut out = Vec::new();
            for (key, w) in want.iter().filter(|(k, _)| *k != MORE) {
                let inner = format!("{path}.{key}");
                match got.get(key) {
                    None => out.push(format!("{inner}: missing")),
                    Some(g) if VARYING.contains(&key.as_str()) => {
                        if std::mem::discriminant(w) != std::mem::discriminant(g) {
                            out.push(format!("{inner}: {g}, of another type than {w}"));
                        }
                    }
                    Some(g) => out.extend(differences(&inner, w, g)),
                }
            }
            if !open {
                for key in got.keys().filter(|k| !want.contains_key(*k)) {
                    out.push(format!("{path}.{key}: not in the document"));
                }
            }
            out
        }
        (w, g) if w == g => vec![],
        (w, g) => vec![format!("{path}: {g}, the document shows {w}")],
    }
}

/// `text` with the broker addresses of this run replaced by the document's (ports 9092, …).
fn as_documented(text: &str, bootstrap: &str) -> String {
    let mut text = text.to_owned();
    for (i, addr) in bootstrap.split(',').enumerate() {
        let documented = format!("127.0.0.1:{}", 9092 + i);
        for end in ['"', ','] {
            text = text.replace(&format!("{addr}{end}"), &format!("{documented}{end}"));
        }
    }
    text
}

fn curl_lines(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("curl ")).count()
}

#[test]
fn every_example_of_control_api_md_runs_against_kmock_serve() {
    assert!(
        DOC.contains("$ kmock serve --brokers 3 --topic orders:6 --control-port 9644\n"),
        "the examples assume this start-up; change the test with it"
    );
    let blocks = sh_blocks(DOC);
    let run: usize = blocks.iter().map(|(b, _)| curl_lines(b)).sum();
    assert_eq!(run, curl_lines(DOC), "every curl example is in an sh block");
    let readme = include_str!("../../README.md");
    assert_eq!(
        curl_lines(readme),
        0,
        "README's curl examples belong in CONTROL_API.md"
    );
    assert!(run >= 15, "only {run} curl examples found");

    let server = Server::start(&["--brokers", "3", "--topic", "orders:6", "--port", "0"]);
    let printed = std::env::temp_dir().join(format!("kmock-control-docs-{}", std::process::id()));
    for (block, documented) in &blocks {
        // curl exits 0 on an HTTP error; --fail-with-body makes it fail, with the reason shown.
        // What curl prints goes to a file of its own, one answer a line, to compare with the
        // document.
        std::fs::write(&printed, "").unwrap();
        let script = format!(
            "set -euo pipefail\ncurl() {{ command curl --fail-with-body --max-time 20 \"$@\" >> \"$PRINTED\"; echo >> \"$PRINTED\"; }}\n{block}"
        );
        let out = Command::new("timeout")
            .args(["60", "bash", "-c", &script])
            .env("KMOCK", &server.control)
            .env("BOOTSTRAP", &server.bootstrap)
            .env("PRINTED", &printed)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "this example failed with {}:\n{block}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = std::fs::read_to_string(&printed).unwrap();
        let printed = as_documented(&printed, &server.bootstrap);
        let answers: Vec<&str> = printed.lines().filter(|l| !l.is_empty()).collect();
        let documented: Vec<&str> = documented.as_deref().unwrap_or("").lines().collect();
        assert_eq!(
            answers.len(),
            documented.len(),
            "this example printed {} answers, the document shows {}:\n{block}\nprinted:\n{}",
            answers.len(),
            documented.len(),
            answers.join("\n")
        );
        for (answer, shown) in answers.iter().zip(&documented) {
            let actual: serde_json::Value =
                serde_json::from_str(answer).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"));
            let diff = differences("$", &pattern(shown), &actual);
            assert!(
                diff.is_empty(),
                "kmock's answer differs from CONTROL_API.md:\n{block}\ndocument: {shown}\nkmock:    {answer}\n{}",
                diff.join("\n")
            );
        }
    }
    let _ = std::fs::remove_file(&printed);
}
