//! The `kmock serve` binary driven by kcat (librdkafka's command-line client): metadata,
//! producing and consuming lines, and a clean stop on SIGTERM.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::{kcat, Server};

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
