//! Helpers for the tests that drive the `kmock` binary: a served cluster killed on drop, its
//! control API over HTTP (with curl), and kcat.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kmock::journal::read_jsonl;
use kmock::Entry;

mod requests;
#[allow(unused_imports)] // not every test binary sends these requests
pub use requests::*;

/// kcat, found on PATH (`.ci/run` installs it when PATH has none).
pub const KCAT: &str = "kcat";

/// curl, found on PATH (`.ci/run` installs it when PATH has none).
pub const CURL: &str = "curl";

/// A running `kmock serve`, killed when dropped so that a failing test leaves nothing behind.
pub struct Server {
    pub child: Child,
    pub bootstrap: String,
    /// Base URL of the HTTP control API, `http://127.0.0.1:PORT`.
    pub control: String,
    /// Kept open so the server never writes to a closed pipe.
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    /// Starts `kmock serve ARGS` and reads its `bootstrap: …` and `control: …` lines.
    pub fn start(args: &[&str]) -> Server {
        Server::start_with_env(args, &[])
    }

    /// Starts `kmock serve ARGS` with `env` set, and reads its `bootstrap: …` and `control: …`
    /// lines.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        let (mut server, lines) = Server::spawn(args, env, 2);
        let field = |line: &str, prefix: &str| {
            line.trim_end()
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("stdout line {line:?} is not `{prefix}…`"))
                .to_owned()
        };
        server.bootstrap = field(&lines[0], "bootstrap: ");
        server.control = field(&lines[1], "control: ");
        server
    }

    /// Starts `kmock serve --print-json ARGS` and reads its JSON line, returned too.
    pub fn start_json(args: &[&str]) -> (Server, serde_json::Value) {
        Server::start_json_as("serve", args)
    }

    /// `kmock proxy --print-json ARGS…`, as [`Server::start_json`] for `kmock serve`.
    pub fn start_proxy_json(args: &[&str]) -> (Server, serde_json::Value) {
        Server::start_json_as("proxy", args)
    }

    fn start_json_as(command: &str, args: &[&str]) -> (Server, serde_json::Value) {
        let args: Vec<&str> = ["--print-json"].iter().chain(args).copied().collect();
        let (mut server, lines) = Server::spawn_as(command, &args, &[], 1);
        let json: serde_json::Value = serde_json::from_str(&lines[0])
            .unwrap_or_else(|e| panic!("stdout line {:?} is not JSON: {e}", lines[0]));
        let text = |key: &str| {
            json[key]
                .as_str()
                .unwrap_or_else(|| panic!("no {key:?} string in {json}"))
                .to_owned()
        };
        server.bootstrap = text("bootstrap");
        server.control = text("control");
        (server, json)
    }

    /// Spawns `kmock serve ARGS` with `env` set and reads its first `lines` lines of stdout.
    fn spawn(args: &[&str], env: &[(&str, &str)], lines: usize) -> (Server, Vec<String>) {
        Server::spawn_as("serve", args, env, lines)
    }

    fn spawn_as(
        command: &str,
        args: &[&str],
        env: &[(&str, &str)],
        lines: usize,
    ) -> (Server, Vec<String>) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kmock"))
            .arg(command)
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kmock starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        // Read on a thread, so a silent server fails the test instead of hanging it.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let read: std::io::Result<Vec<String>> = (0..lines)
                .map(|_| {
                    let mut line = String::new();
                    stdout.read_line(&mut line).map(|_| line)
                })
                .collect();
            let _ = tx.send((read, stdout));
        });
        let first_lines = rx.recv_timeout(Duration::from_secs(10));
        // From here on the child is killed on drop, whatever happens below.
        let Ok((read, stdout)) = first_lines else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kmock {command} {args:?} printed not {lines} line(s) within 10 s");
        };
        let server = Server {
            child,
            bootstrap: String::new(),
            control: String::new(),
            _stdout: stdout,
        };
        (server, read.expect("kmock's stdout is readable"))
    }

    /// `METHOD control/PATH` over HTTP, with a JSON body if given.
    pub fn http(&self, method: &str, path: &str, json: Option<&str>) -> Answer {
        let body = json.map(|b| ("application/json", b));
        http(method, &format!("{}{path}", self.control), body)
    }

    /// The broker addresses of the bootstrap line.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.bootstrap
            .split(',')
            .map(|a| {
                a.parse()
                    .unwrap_or_else(|e| panic!("bootstrap entry {a:?}: {e}"))
            })
            .collect()
    }

    /// Sends SIGTERM and waits up to 5 s for a clean exit (status 0).
    pub fn stop(&mut self) {
        self.stop_with("TERM");
    }

    /// Sends SIG`signal` (`TERM`, `INT`) and waits up to 5 s (a hang guard) for a clean exit
    /// (status 0).
    pub fn stop_with(&mut self, signal: &str) {
        let kill = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(kill.success(), "kill -{signal} failed: {kill}");
        let status = self
            .wait_exit(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("kmock still runs 5 s after SIG{signal}"));
        assert_eq!(
            status.code(),
            Some(0),
            "kmock exited with {status} on SIG{signal}"
        );
    }

    /// Sends SIGTERM, then returns the exit code and whatever stdout printed after the start-up
    /// lines (a scenario's verdict).
    pub fn stop_with_output(mut self) -> (i32, String) {
        let kill = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(kill.success(), "kill -TERM failed: {kill}");
        let mut out = String::new();
        std::io::Read::read_to_string(&mut self._stdout, &mut out).expect("stdout is readable");
        let status = self.child.wait().expect("kmock exits");
        (status.code().unwrap_or(-1), out)
    }

    /// Waits up to `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            // Polling: std's Child has no wait with a time limit, so no event can be awaited.
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs kcat with `args` (under `timeout 30`) feeding it `stdin`; panics unless it succeeds.
pub fn kcat(args: &[&str], stdin: &str) -> String {
    kcat_with(args, stdin, String::new)
}

/// kcat's arguments with `-b BOOTSTRAP` in front.
pub fn at_bootstrap<'a>(bootstrap: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    ["-b", bootstrap].iter().chain(args).copied().collect()
}

/// As [`kcat`], with `context()` (say, the journal's view of the traffic) added to the failure
/// message.
pub fn kcat_with(args: &[&str], stdin: &str, context: impl FnOnce() -> String) -> String {
    kcat_within(30, args, stdin, context)
}

/// As [`kcat_with`], under `timeout SECONDS` (a hang guard) instead of 30 s.
pub fn kcat_within(
    seconds: u32,
    args: &[&str],
    stdin: &str,
    context: impl FnOnce() -> String,
) -> String {
    let mut child = Command::new("timeout")
        .args([&seconds.to_string(), KCAT])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat starts");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    let input = stdin.to_owned();
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("kcat runs");
    writer
        .join()
        .expect("stdin writer")
        .expect("kcat reads its stdin");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr),
    );
    assert!(
        status.success(),
        "kcat {args:?} failed with {status} (124 = timed out)\nstdout:\n{stdout}\nstderr:\n{stderr}\n{}",
        context()
    );
    stdout.into_owned()
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!("HTTP {} body is not JSON ({e}): {}", self.status, self.body)
        })
    }

    /// The body as JSON Lines, one value a line.
    pub fn lines(&self) -> Vec<serde_json::Value> {
        self.body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?}: {e}")))
            .collect()
    }

    /// The body as JSON, after checking the status.
    #[track_caller]
    pub fn expect(&self, status: u16) -> serde_json::Value {
        assert_eq!(self.status, status, "HTTP status; body: {}", self.body);
        self.json()
    }
}

/// `curl -X METHOD URL`, with `body` as `(content type, text)` if given; any status counts as
/// an answer, a failure to connect panics.
pub fn http(method: &str, url: &str, body: Option<(&str, &str)>) -> Answer {
    http_with(method, url, &[], body)
}

/// As [`http`], with extra `headers` (`"Name: value"`; `"Name:"` removes one curl would send,
/// and a `Content-Type` of `""` in `body` sends the body without one).
pub fn http_with(method: &str, url: &str, headers: &[&str], body: Option<(&str, &str)>) -> Answer {
    let mut args = vec![
        "-sS",
        "--max-time",
        "30",
        "-X",
        method,
        "-w",
        "\n%{http_code}",
    ];
    let content_type;
    if let Some((kind, _)) = body {
        content_type = format!("Content-Type: {kind}");
        let content_type = if kind.is_empty() {
            "Content-Type:"
        } else {
            &content_type
        };
        args.extend(["-H", content_type, "--data-binary", "@-"]);
    }
    for header in headers {
        args.extend(["-H", header]);
    }
    args.push(url);
    let mut child = Command::new(CURL)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("curl starts");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    if let Some((_, text)) = body {
        stdin
            .write_all(text.as_bytes())
            .expect("curl reads its stdin");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("curl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "curl {args:?} failed with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let (body, status) = stdout.rsplit_once('\n').expect("curl wrote the status");
    Answer {
        status: status.parse().expect("an HTTP status"),
        body: body.to_owned(),
    }
}

/// `curl -N control/journal/stream QUERY`, once its headers have come: the stream is
/// subscribed then. The body is left to read.
pub fn open_stream(server: &Server, query: &str) -> (Child, BufReader<ChildStdout>) {
    let url = format!("{}/journal/stream{query}", server.control);
    let mut curl = Command::new(CURL)
        .args(["-sSN", "--max-time", "30", "-D", "-", &url])
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl starts");
    let mut out = BufReader::new(curl.stdout.take().expect("stdout is piped"));
    let mut line = String::new();
    let headers = loop {
        line.clear();
        match out.read_line(&mut line) {
            Ok(0) => break Err("end of output".to_owned()),
            Ok(_) if line.trim().is_empty() => break Ok(()),
            Ok(_) => {}
            Err(e) => break Err(e.to_string()),
        }
    };
    if let Err(e) = headers {
        let _ = curl.kill();
        let status = curl.wait();
        panic!("the stream ended before its headers ({e}); curl: {status:?}");
    } else {
        (curl, out)
    }
}

/// An in-memory JSON Lines sink the test can read while the cluster writes to it.
#[derive(Clone, Default)]
pub struct SharedBuffer(pub Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A journal file (or, with [`JournalFile::with_extension`], any file) under the temp
/// directory with a name no other test (or run) uses, removed when dropped.
pub struct JournalFile(PathBuf);

impl JournalFile {
    /// `kmock-journal-TEST-PID-NANOS.jsonl`.
    pub fn new(test: &str) -> JournalFile {
        JournalFile::with_extension(test, "jsonl")
    }

    /// `kmock-journal-TEST-PID-NANOS.EXT` (e.g. `html` for a report).
    pub fn with_extension(test: &str, ext: &str) -> JournalFile {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        JournalFile(std::env::temp_dir().join(format!(
            "kmock-journal-{test}-{}-{nanos}.{ext}",
            std::process::id()
        )))
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("the temp dir is UTF-8")
    }

    /// Every entry of the file, in arrival order.
    pub fn read(&self) -> Vec<Entry> {
        let text = std::fs::read_to_string(&self.0)
            .unwrap_or_else(|e| panic!("journal {}: {e}", self.0.display()));
        read_jsonl(text.as_bytes())
            .unwrap_or_else(|e| panic!("journal {}: {e}\n{text}", self.0.display()))
    }
}

impl Drop for JournalFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `kmock check ARGS`: exit status, stdout and stderr.
pub fn kmock_check(args: &[&str]) -> (i32, String, String) {
    kmock_run("check", args)
}

/// `kmock SUBCOMMAND ARGS`: exit status, stdout and stderr.
pub fn kmock_run(subcommand: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kmock"))
        .arg(subcommand)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("kmock {subcommand} does not run: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
