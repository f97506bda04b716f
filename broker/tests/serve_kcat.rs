//! The `kmock serve` binary driven by kcat (librdkafka's command-line client): metadata,
//! producing and consuming lines, and a clean stop on SIGTERM.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const KCAT: &str = "/usr/bin/kcat";

/// A running `kmock serve`, killed when dropped so that a failing test leaves nothing behind.
struct Server {
    child: Child,
    bootstrap: String,
    /// Kept open so the server never writes to a closed pipe.
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    /// Starts `kmock serve ARGS` and waits for its `bootstrap: …` line.
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kmock"))
            .arg("serve")
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kmock starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        // Read the first line on a thread, so a silent server fails the test instead of hanging it.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            let read = stdout.read_line(&mut line).map(|_| line);
            let _ = tx.send((read, stdout));
        });
        let first_line = rx.recv_timeout(Duration::from_secs(10));
        // From here on the child is killed on drop, whatever happens below.
        let Ok((line, stdout)) = first_line else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kmock serve {args:?} printed no line within 10 s");
        };
        let mut server = Server {
            child,
            bootstrap: String::new(),
            _stdout: stdout,
        };
        let line = line.expect("kmock's stdout is readable");
        server.bootstrap = line
            .trim_end()
            .strip_prefix("bootstrap: ")
            .unwrap_or_else(|| panic!("first stdout line {line:?} is not `bootstrap: …`"))
            .to_owned();
        server
    }

    /// The broker addresses of the bootstrap line.
    fn addrs(&self) -> Vec<SocketAddr> {
        self.bootstrap
            .split(',')
            .map(|a| {
                a.parse()
                    .unwrap_or_else(|e| panic!("bootstrap entry {a:?}: {e}"))
            })
            .collect()
    }

    /// Waits up to `limit` for the process to exit.
    fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
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
fn kcat(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("timeout")
        .args(["30", KCAT])
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
        "kcat {args:?} failed with {status} (124 = timed out)\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout.into_owned()
}

#[test]
fn kcat_lists_three_brokers_and_a_topic_with_six_led_partitions() {
    let server = Server::start(&["--brokers", "3", "--topic", "orders:6", "--port", "0"]);
    let out = kcat(&["-b", &server.bootstrap, "-L", "-m", "10"], "");

    // "  broker 1 at 127.0.0.1:40001 (controller)"
    let brokers: BTreeMap<i32, SocketAddr> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("broker "))
        .map(|rest| {
            let mut words = rest.split_whitespace();
            let id = words.next().and_then(|w| w.parse().ok());
            let addr = words.nth(1).and_then(|w| w.parse().ok());
            (id.zip(addr)).unwrap_or_else(|| panic!("unreadable broker line {rest:?}\n{out}"))
        })
        .collect();
    let expected: BTreeMap<i32, SocketAddr> = (1..).zip(server.addrs()).collect();
    assert_eq!(brokers, expected, "brokers listed by kcat -L:\n{out}");
    assert!(out.contains(" 3 brokers:"), "kcat -L output:\n{out}");

    assert!(
        out.contains("topic \"orders\" with 6 partitions:"),
        "no topic orders with 6 partitions in kcat -L output:\n{out}"
    );
    // "    partition 0, leader 1, replicas: 1, isrs: 1"
    let leaders: BTreeMap<i32, i32> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("partition "))
        .map(|rest| {
            let fields: Vec<&str> = rest.split(", ").collect();
            let partition = fields[0].parse().ok();
            let leader = fields
                .get(1)
                .and_then(|f| f.strip_prefix("leader ")?.parse().ok());
            (partition.zip(leader)).unwrap_or_else(|| panic!("unreadable line {rest:?}\n{out}"))
        })
        .collect();
    assert_eq!(
        leaders.keys().copied().collect::<Vec<_>>(),
        (0..6).collect::<Vec<_>>(),
        "partitions listed by kcat -L:\n{out}"
    );
    for (partition, leader) in &leaders {
        assert!(
            brokers.contains_key(leader),
            "partition {partition} is led by {leader}, not one of the brokers {:?}:\n{out}",
            brokers.keys()
        );
    }
    assert!(!out.contains("err"), "kcat -L reports an error:\n{out}");
}

#[test]
fn a_thousand_lines_produced_by_kcat_are_consumed_back_by_kcat() {
    let server = Server::start(&["--brokers", "3", "--topic", "orders:6", "--port", "0"]);
    let sent: Vec<String> = (0..1_000).map(|i| format!("line {i:04} of 1000")).collect();
    kcat(
        &["-b", &server.bootstrap, "-P", "-t", "orders"],
        &(sent.join("\n") + "\n"),
    );

    let out = kcat(
        &[
            "-b",
            &server.bootstrap,
            "-C",
            "-t",
            "orders",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%p\t%o\t%s\n",
        ],
        "",
    );
    let mut by_partition: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    for line in out.lines() {
        let mut fields = line.splitn(3, '\t');
        let (Some(p), Some(o), Some(s)) = (fields.next(), fields.next(), fields.next()) else {
            panic!("unreadable kcat -C line {line:?}");
        };
        let (p, o) = (p.parse().expect("partition"), o.parse().expect("offset"));
        by_partition.entry(p).or_default().push((o, s.to_owned()));
    }

    let mut got: Vec<&String> = by_partition.values().flatten().map(|(_, s)| s).collect();
    got.sort();
    assert_eq!(
        got.len(),
        sent.len(),
        "kcat -C read {} lines, expected {}; per partition: {:?}",
        got.len(),
        sent.len(),
        by_partition
            .iter()
            .map(|(p, ms)| (p, ms.len()))
            .collect::<Vec<_>>()
    );
    let missing: Vec<_> = sent
        .iter()
        .filter(|s| got.binary_search(s).is_err())
        .collect();
    assert!(missing.is_empty(), "lines never consumed: {missing:?}");
    for (p, messages) in &by_partition {
        let offsets: Vec<i64> = messages.iter().map(|(o, _)| *o).collect();
        let contiguous: Vec<i64> = (0..messages.len() as i64).collect();
        assert_eq!(offsets, contiguous, "offsets of partition {p}");
        // One producer, no retries: each partition keeps the order lines were written in.
        let lines: Vec<&String> = messages.iter().map(|(_, s)| s).collect();
        assert!(
            lines.windows(2).all(|w| w[0] < w[1]),
            "partition {p} holds lines out of order: {lines:?}"
        );
    }
}

#[test]
fn sigterm_stops_the_server_with_status_zero_and_frees_its_ports() {
    let mut server = Server::start(&["--brokers", "3", "--topic", "orders:6", "--port", "0"]);
    kcat(&["-b", &server.bootstrap, "-L", "-m", "10"], "");
    // Idle client connections must not hold the shutdown up.
    let idle: Vec<TcpStream> = server
        .addrs()
        .iter()
        .map(|a| TcpStream::connect(a).expect("connect to a broker"))
        .collect();

    let sent_at = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success(), "kill -TERM failed: {kill}");
    let status = server.wait_exit(Duration::from_secs(5));
    let status = status.unwrap_or_else(|| panic!("kmock still runs 5 s after SIGTERM"));
    assert_eq!(
        status.code(),
        Some(0),
        "kmock exited with {status} on SIGTERM"
    );
    eprintln!("kmock exited {:?} after SIGTERM", sent_at.elapsed());
    drop(idle);

    for addr in server.addrs() {
        TcpListener::bind(addr)
            .unwrap_or_else(|e| panic!("port {addr} is still taken after kmock exited: {e}"));
    }
}
