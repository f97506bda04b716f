//! Every example of CONTROL_API.md runs as written: its `sh` blocks, in document order, against
//! a fresh `kmock serve` started as the document starts it, each block a bash script that must
//! succeed, with every HTTP error failing it.

use std::process::Command;

mod common;

use common::Server;

const DOC: &str = include_str!("../../CONTROL_API.md");

/// The bodies of the document's ```` ```sh ```` blocks.
fn sh_blocks(doc: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an sh block is not closed");
    blocks
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
    let run: usize = blocks.iter().map(|b| curl_lines(b)).sum();
    assert_eq!(run, curl_lines(DOC), "every curl example is in an sh block");
    let readme = include_str!("../../README.md");
    assert_eq!(
        curl_lines(readme),
        0,
        "README's curl examples belong in CONTROL_API.md"
    );
    assert!(run >= 15, "only {run} curl examples found");

    let server = Server::start(&["--brokers", "3", "--topic", "orders:6", "--port", "0"]);
    for block in &blocks {
        // curl exits 0 on an HTTP error; --fail-with-body makes it fail, with the reason shown.
        let script = format!(
            "set -euo pipefail\ncurl() {{ command curl --fail-with-body --max-time 20 \"$@\"; }}\n{block}"
        );
        let out = Command::new("timeout")
            .args(["60", "bash", "-c", &script])
            .env("KMOCK", &server.control)
            .env("BOOTSTRAP", &server.bootstrap)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "this example failed with {}:\n{block}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
