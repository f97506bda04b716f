//! The `kmock serve` binary with kcat in balanced-consumer mode (`-G`, librdkafka's consumer
//! groups): one consumer reads everything and commits, the next in the same group reads
//! nothing, and SIGTERM still stops the server with status 0.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const KCAT: &str = "/usr/bin/kcat";
const LINES: usize = 300;

/// A child process killed (and reaped) when dropped, so a failing test leaves nothing behind.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `kmock serve`, journaling to a file.
struct Server {
    process: Guard,
    bootstrap: String,
    journal: std::path::PathBuf,
    /// Kept open so the server never writes to a closed pipe.
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    /// Starts `kmock serve ARGS --journal FILE` and waits for its `bootstrap: …` line.
    fn start(args: &[&str]) -> Server {
        let journal = std::env::temp_dir().join(format!(
            "kmock-serve-kcat-groups-{}-{}.jsonl",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let mut process = Guard(
            Command::new(env!("CARGO_BIN_EXE_kmock"))
                .arg("serve")
                .args(args)
                .arg("--journal")
                .arg(&journal)
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("kmock starts"),
        );
        let stdout = process.0.stdout.take().expect("stdout is piped");
        // Read the first line on a thread, so a silent server fails the test instead of hanging it.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            let read = stdout.read_line(&mut line).map(|_| line);
            let _ = tx.send((read, stdout));
        });
        let (line, stdout) = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("kmock serve {args:?} printed no line within 10 s"));
        let line = line.expect("kmock's stdout is readable");
        let bootstrap = line
            .trim_end()
            .strip_prefix("bootstrap: ")
            .unwrap_or_else(|| panic!("first stdout line {line:?} is not `bootstrap: …`"))
            .to_owned();
        Server {
            process,
            bootstrap,
            journal,
            _stdout: stdout,
        }
    }

    /// The group requests journaled so far, one line each in arrival order, for failure
    /// messages.
    fn group_traffic(&self) -> String {
        let Ok(file) = std::fs::File::open(&self.journal) else {
            return "  (no journal)".to_owned();
        };
        let mut entries = match kmock::journal::read_jsonl(BufReader::new(file)) {
            Ok(entries) => entries,
            Err(e) => return format!("  (journal unreadable: {e})"),
        };
        entries.sort_by_key(|e| e.seq);
        let group_apis = [
            "FindCoordinator",
            "JoinGroup",
            "SyncGroup",
            "Heartbeat",
            "LeaveGroup",
            "OffsetCommit",
            "OffsetFetch",
        ];
        entries
            .iter()
            .filter(|e| group_apis.iter().any(|api| e.is(api)))
            .map(|e| {
                format!(
                    "  seq {} broker {} conn {} {} v{} -> {:?}",
                    e.seq,
                    e.broker,
                    e.conn,
                    e.api.as_deref().unwrap_or("?"),
                    e.version.unwrap_or(-1),
                    e.response.as_ref().map(|r| &r.error_codes)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits up to `limit` for the process to exit.
    fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.process.0.try_wait().expect("try_wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.journal);
    }
}

/// Runs kcat with `args` (under `timeout 30`, and killed if the test fails first) feeding it
/// `stdin`; returns its stdout, or panics unless it succeeds.
fn kcat(server: &Server, args: &[&str], stdin: &str) -> String {
    let mut child = Guard(
        Command::new("timeout")
            .args(["30", KCAT, "-b", &server.bootstrap])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kcat starts"),
    );
    let mut pipe = child.0.stdin.take().expect("stdin is piped");
    let input = stdin.to_owned();
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let read_all = |mut from: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = from.read_to_string(&mut text);
            text
        })
    };
    let stdout = read_all(Box::new(child.0.stdout.take().expect("stdout is piped")));
    let stderr = read_all(Box::new(child.0.stderr.take().expect("stderr is piped")));
    let status = child.0.wait().expect("kcat runs");
    writer
        .join()
        .expect("stdin writer")
        .expect("kcat reads its stdin");
    let (stdout, stderr) = (
        stdout.join().expect("stdout reader"),
        stderr.join().expect("stderr reader"),
    );
    assert!(
        status.success(),
        "kcat {args:?} failed with {status} (124 = timed out)\nstdout:\n{stdout}\nstderr:\n{stderr}\
         \ngroup requests:\n{}",
        server.group_traffic()
    );
    stdout
}

#[test]
fn a_kcat_group_consumer_commits_what_it_read_and_the_next_one_in_the_group_reads_nothing() {
    let mut server = Server::start(&["--port", "0", "--brokers", "3", "--topic", "orders:3"]);
    let sent: Vec<String> = (0..LINES)
        .map(|i| format!("key-{}:line {i:03} of {LINES}", i % 10))
        .collect();
    kcat(
        &server,
        &["-P", "-t", "orders", "-K:"],
        &(sent.join("\n") + "\n"),
    );

    // The first member of group grp: everything from the beginning, then exit at the end.
    let started = Instant::now();
    let out = kcat(
        &server,
        &[
            "-G",
            "grp",
            "orders",
            "-e",
            "-q",
            "-o",
            "beginning",
            "-f",
            "%k:%s\n",
        ],
        "",
    );
    let first_took = started.elapsed();
    let mut got: Vec<&str> = out.lines().collect();
    got.sort_unstable();
    let mut expected: Vec<&str> = sent.iter().map(String::as_str).collect();
    expected.sort_unstable();
    let missing: Vec<&&str> = expected
        .iter()
        .filter(|s| got.binary_search(s).is_err())
        .collect();
    assert!(
        got == expected,
        "kcat -G grp read {} lines, expected the {LINES} produced (as a multiset); missing \
         {missing:?}\ngroup requests:\n{}",
        got.len(),
        server.group_traffic()
    );

    // The next member of grp starts from the offsets the first committed when it closed. With
    // auto.offset.reset=earliest it would read everything again if there were none.
    let started = Instant::now();
    let again = kcat(
        &server,
        &[
            "-G",
            "grp",
            "orders",
            "-e",
            "-q",
            "-X",
            "auto.offset.reset=earliest",
            "-f",
            "%k:%s\n",
        ],
        "",
    );
    let second_took = started.elapsed();
    assert!(
        again.is_empty(),
        "a second kcat -G grp read {} lines, expected none (the first committed its offsets): \
         {:?}\ngroup requests:\n{}",
        again.lines().count(),
        again.lines().take(5).collect::<Vec<_>>(),
        server.group_traffic()
    );
    eprintln!(
        "kcat -G read {LINES} lines in {first_took:?}; the next one read none in {second_took:?}"
    );

    let kill = Command::new("kill")
        .args(["-TERM", &server.process.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success(), "kill -TERM failed: {kill}");
    let status = server
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("kmock still runs 5 s after SIGTERM"));
    assert_eq!(
        status.code(),
        Some(0),
        "kmock exited with {status} on SIGTERM"
    );
}
