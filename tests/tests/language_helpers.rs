//! The kmock test helpers for other languages (`fixtures/helpers/`, README "In a Python, Go,
//! Java or JavaScript test") and the client tests written with them, run by their own test runners against the
//! `kmock` binary this workspace builds, so that `cargo test --workspace` runs every test:
//!
//! - Python: kmock-pytest's own tests (`fixtures/helpers/python/tests`), then kafka-python,
//!   confluent-kafka 2.x and aiokafka with it (`fixtures/clients/python/pytest`), in the Python 3.11
//!   virtualenv `fixtures/clients/python/pytest/venv.sh` makes from hash-pinned wheels;
//! - Go: kmocktest's own tests (`fixtures/helpers/go/kmocktest`), then franz-go and
//!   segmentio/kafka-go with it (`fixtures/clients/go/kmocktest-clients`), modules from the Go
//!   proxy checked against the committed go.sum;
//! - Java: kmock-junit's own Surefire tests (`fixtures/helpers/java`), then kafka-clients 4.4.0
//!   with it (`fixtures/clients/java/junit`), one Maven reactor (`reactor.xml`) run offline
//!   (`mvn -o`: `.ci/run` fetched its artifacts online once);
//! - JavaScript: kmock-test's own tests (`fixtures/helpers/node`, `node --test`), then kafkajs
//!   2.2.4 with it (`fixtures/clients/node/kmock-test-clients`, installed from its
//!   package-lock.json by `npm ci` when absent), and @confluentinc/kafka-javascript 1.10.1
//!   (`fixtures/clients/node/confluent-kafka-javascript`, installed and its librdkafka built by
//!   its `install.sh` when absent: minutes; `.ci/run` does it first).
//!
//! Each runner's whole output is printed (`--nocapture` shows it; a failure always does), and
//! a runner that fails fails the test. The runners bound their own tests (pytest's helper
//! waits, `go test`'s default 10-minute timeout, the Java and JavaScript helpers' and client
//! tests' hang guards on every wait, node's per-test timeouts), so no guard is added here.

use std::path::{Path, PathBuf};
use std::process::Command;

use kmock_tests::{built_kmock, fixture};

/// Runs `program args…` in `dir` with `KMOCK_BIN` naming the workspace's kmock binary, prints
/// its output, and fails the test if it fails.
fn run_runner(dir: &Path, program: &Path, args: &[&str]) {
    let kmock = built_kmock().unwrap();
    let shown = format!(
        "{} {} (in {})",
        program.display(),
        args.join(" "),
        dir.display()
    );
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("KMOCK_BIN", &kmock)
        .output()
        .unwrap_or_else(|e| panic!("{shown}: {e}"));
    println!("$ {shown}\n{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{shown} failed: {}", out.status);
}

/// The python of the pytest virtualenv, made now unless it is there and up to date.
fn pytest_python() -> PathBuf {
    let script = fixture("clients/python/pytest/venv.sh");
    let out = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed ({}):\n{}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[test]
fn the_python_helper_and_the_python_clients_written_with_it_pass() {
    let python = pytest_python();
    run_runner(
        &fixture("helpers/python"),
        &python,
        &["-m", "pytest", "-p", "no:cacheprovider", "-v", "tests"],
    );
    run_runner(
        &fixture("clients/python/pytest"),
        &python,
        &["-m", "pytest", "-p", "no:cacheprovider", "-v", "."],
    );
}

#[test]
fn the_go_helper_and_the_go_clients_written_with_it_pass() {
    let go = PathBuf::from("go");
    run_runner(
        &fixture("helpers/go/kmocktest"),
        &go,
        &["test", "-count=1", "-v", "./..."],
    );
    run_runner(
        &fixture("clients/go/kmocktest-clients"),
        &go,
        &["test", "-count=1", "-v", "./..."],
    );
}

#[test]
fn the_java_helper_and_the_java_client_written_with_it_pass() {
    // The helper's own tests and the client tests, in one reactor so the client tests use the
    // helper from source.
    run_runner(
        &fixture("clients/java/junit"),
        Path::new("mvn"),
        &["-o", "-q", "-B", "-f", "reactor.xml", "test"],
    );
}

#[test]
fn the_javascript_helper_and_the_javascript_client_written_with_it_pass() {
    let node = Path::new("node");
    run_runner(&fixture("helpers/node"), node, &["--test", "test/"]);
    let clients = fixture("clients/node/kmock-test-clients");
    if !clients.join("node_modules/kafkajs").is_dir() {
        run_runner(
            &clients,
            Path::new("npm"),
            &["ci", "--ignore-scripts", "--no-audit", "--no-fund"],
        );
    }
    run_runner(
        &clients,
        node,
        &["--test", "kafkajs.test.js", "violation.test.js"],
    );
}

#[test]
fn the_confluent_javascript_client_written_with_the_javascript_helper_passes() {
    let dir = fixture("clients/node/confluent-kafka-javascript");
    run_runner(&dir, &dir.join("install.sh"), &[]);
    run_runner(
        &dir,
        Path::new("node"),
        &["--test", "confluent.test.js", "rdkafka.test.js"],
    );
}
