//! `kmock serve`'s flags do what README's table says: `--no-auto-create-topics` (Metadata
//! refuses unknown topics), `--default-partitions` (the partitions of an auto-created topic),
//! `--control-host` (where the control API listens); SIGINT stops it cleanly and frees the
//! ports while a client is connected; an unmet `expect` of a scenario's rule makes it exit 1;
//! `--connections-max-idle off` keeps an idle connection open that the scenario's limit would
//! close; `--kafka-version` lists that release's API versions, and one older than kmock
//! emulates is refused; the `--consumer-group-*` flags set what the scenario's
//! `consumer_groups:` section sets, and a heartbeat interval not below the session timeout is
//! refused; `--group-consumer-migration-policy disabled` keeps classic members out of a
//! consumer group, and a policy Kafka does not have is refused.

mod common;

use std::net::{SocketAddr, TcpListener};

use common::Server;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::ResponseError;
use kmock_client::Client;

/// `(error code, partitions)` of topic `name` by a Metadata v12 that may create it.
async fn auto_create(addr: SocketAddr, name: &str) -> (i16, usize) {
    let client = Client::connect(addr).await.unwrap();
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(name.to_string().into())))
        ]))
        .with_allow_auto_topic_creation(true);
    let answer = client.send(request, 12).await.unwrap();
    (
        answer.topics[0].error_code,
        answer.topics[0].partitions.len(),
    )
}

#[tokio::test]
async fn auto_creation_follows_no_auto_create_topics_and_default_partitions() {
    let mut plain = Server::start(&["--port", "0"]);
    assert_eq!(
        auto_create(plain.addrs()[0], "fresh").await,
        (0, 1),
        "by default"
    );
    plain.stop();
    let mut three = Server::start(&["--port", "0", "--default-partitions", "3"]);
    assert_eq!(
        auto_create(three.addrs()[0], "fresh").await,
        (0, 3),
        "--default-partitions 3"
    );
    three.stop();
    let mut none = Server::start(&["--port", "0", "--no-auto-create-topics"]);
    assert_eq!(
        auto_create(none.addrs()[0], "fresh").await,
        (ResponseError::UnknownTopicOrPartition.code(), 0),
        "--no-auto-create-topics"
    );
    none.stop();
}

/// 127.0.0.2 is a loopback address on Linux, distinct from 127.0.0.1.
#[test]
fn the_control_api_listens_on_control_host() {
    let mut serve = Server::start(&["--port", "0", "--control-host", "127.0.0.2"]);
    let port = serve
        .control
        .strip_prefix("http://127.0.0.2:")
        .unwrap_or_else(|| panic!("control line {:?} names 127.0.0.2", serve.control))
        .to_owned();
    serve.http("GET", "/health", None).expect(200);
    assert!(
        std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err(),
        "the control port also answers on 127.0.0.1"
    );
    serve.stop();
}

#[tokio::test]
async fn sigint_stops_it_with_a_client_connected_and_frees_the_ports() {
    let mut serve = Server::start(&["--port", "0", "--brokers", "2"]);
    let addrs = serve.addrs();
    let client = Client::connect(addrs[0]).await.unwrap();
    client.api_versions().await.unwrap();
    let control = serve.control.clone();
    serve.stop_with("INT");
    for addr in addrs {
        TcpListener::bind(addr).unwrap_or_else(|e| panic!("{addr} is not free after SIGINT: {e}"));
    }
    let control: SocketAddr = control.strip_prefix("http://").unwrap().parse().unwrap();
    TcpListener::bind(control).expect("the control port is free after SIGINT");
}

/// A scenario with one rule on Produce expecting `expect` firings, served with no traffic and
/// stopped: the exit code and what it printed after the start-up lines.
fn serve_without_traffic(expect: &str) -> (i32, String) {
    let path = std::env::temp_dir().join(format!(
        "kmock-expect-{}-{}.yaml",
        std::process::id(),
        expect.replace('.', "_")
    ));
    std::fs::write(
        &path,
        format!(
            "port: 0\nrules:\n  - name: never-produced\n    api: Produce\n    delay: 1ms\n    \
             expect: \"{expect}\"\n"
        ),
    )
    .unwrap();
    let serve = Server::start(&["--config", path.to_str().unwrap()]);
    let stopped = serve.stop_with_output();
    std::fs::remove_file(&path).unwrap();
    stopped
}

#[test]
fn an_unmet_expectation_makes_serve_exit_1_naming_the_rule() {
    let (code, out) = serve_without_traffic("1..");
    assert_eq!(code, 1, "stdout after start-up: {out}");
    assert!(out.contains("never-produced"), "names the rule: {out}");
    // Its counterpart: the same rule expecting no firing is met, and the exit is 0.
    let (code, out) = serve_without_traffic("0");
    assert_eq!(code, 0, "stdout after start-up: {out}");
}

/// A connection to `addr` that sends nothing; `closed` waits (up to `limit`) for the broker
/// to close it.
struct Idle(std::net::TcpStream);

impl Idle {
    fn open(addr: SocketAddr) -> Idle {
        Idle(std::net::TcpStream::connect(addr).unwrap())
    }

    /// Whether the broker closed the connection within `limit`.
    fn closed(&self, limit: std::time::Duration) -> bool {
        use std::io::Read as _;
        self.0.set_read_timeout(Some(limit)).unwrap();
        let mut byte = [0u8; 1];
        match (&self.0).read(&mut byte) {
            Ok(0) => true,
            Ok(_) => panic!("the broker wrote to a connection that sent nothing"),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
            Err(_) => false, // timed out: still open
        }
    }
}

#[test]
fn connections_max_idle_off_keeps_an_idle_connection_the_scenario_would_close() {
    let path = std::env::temp_dir().join(format!("kmock-idle-{}.yaml", std::process::id()));
    std::fs::write(&path, "port: 0\nconnections_max_idle: 1s\n").unwrap();
    let config = path.to_str().unwrap();
    let limited = Server::start(&["--config", config]);
    let unlimited = Server::start(&["--config", config, "--connections-max-idle", "off"]);
    std::fs::remove_file(&path).unwrap();
    // Hang guard only: the limited broker closes its idle connection after about 1 s.
    let guard = std::time::Duration::from_secs(60);
    let kept = Idle::open(unlimited.addrs()[0]);
    // Opened after `kept`: once the scenario's limit has closed it, `kept` has been idle
    // longer than that limit.
    let later = Idle::open(limited.addrs()[0]);
    assert!(
        later.closed(guard),
        "the scenario's 1 s limit closes an idle connection"
    );
    assert!(
        !kept.closed(std::time::Duration::from_millis(1)),
        "with --connections-max-idle off, an idle connection stays open"
    );
    // And it still serves: ApiVersions v0 (key 18, correlation id 7, null client id).
    use std::io::{Read as _, Write as _};
    let mut stream = kept.0;
    stream.set_read_timeout(Some(guard)).unwrap();
    stream
        .write_all(&[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff])
        .unwrap();
    let mut head = [0u8; 8];
    stream.read_exact(&mut head).expect("an answer");
    assert_eq!(head[4..], [0, 0, 0, 7], "the answer's correlation id");
}

/// The highest Metadata version ApiVersions lists.
async fn metadata_max(addr: SocketAddr) -> i16 {
    let client = Client::connect(addr).await.unwrap();
    let answer = client.api_versions().await.unwrap();
    let metadata = answer.api_keys.iter().find(|k| k.api_key == 3);
    metadata.expect("Metadata listed").max_version
}

#[tokio::test]
async fn kafka_version_lists_that_releases_versions_and_refuses_one_too_old() {
    let mut old = Server::start(&["--port", "0", "--kafka-version", "2.8"]);
    assert_eq!(
        metadata_max(old.addrs()[0]).await,
        11,
        "Kafka 2.8's Metadata"
    );
    old.stop();
    let mut default = Server::start(&["--port", "0"]);
    assert_eq!(
        metadata_max(default.addrs()[0]).await,
        13,
        "Kafka 4.4's Metadata"
    );
    default.stop();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kmock"))
        .args(["serve", "--port", "0", "--kafka-version", "2.3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "clap's usage error: {stderr}");
    assert!(stderr.contains("2.4 and later"), "{stderr}");
}

#[tokio::test]
async fn consumer_group_flags_set_the_heartbeat_interval_and_the_group_size() {
    let mut server = Server::start(&[
        "--port",
        "0",
        "--topic",
        "t:2",
        "--consumer-group-heartbeat-interval",
        "1500ms",
        "--consumer-group-max-size",
        "1",
    ]);
    let client = Client::connect(server.addrs()[0]).await.unwrap();
    let first = client
        .send(common::consumer_group_join("g", "m1", &["t"]), 1)
        .await
        .unwrap();
    assert_eq!(first.error_code, 0, "{first:?}");
    assert_eq!(
        first.heartbeat_interval_ms, 1500,
        "the interval members are told"
    );
    let second = client
        .send(common::consumer_group_join("g", "m2", &["t"]), 1)
        .await
        .unwrap();
    assert_eq!(
        second.error_code,
        ResponseError::GroupMaxSizeReached.code(),
        "a second member past --consumer-group-max-size 1: {second:?}"
    );
    server.stop();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kmock"))
        .args([
            "serve",
            "--port",
            "0",
            "--consumer-group-session-timeout",
            "10s",
            "--consumer-group-heartbeat-interval",
            "10s",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "refused at start as a usage error: {stderr}"
    );
    assert!(
        stderr.contains("heartbeat_interval must be below session_timeout"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_migration_policy_flag_keeps_classic_members_out_and_refuses_unknown_policies() {
    let mut server = Server::start(&[
        "--port",
        "0",
        "--topic",
        "t:2",
        "--group-consumer-migration-policy",
        "disabled",
    ]);
    let client = Client::connect(server.addrs()[0]).await.unwrap();
    let joined = client
        .send(common::consumer_group_join("g", "m1", &["t"]), 1)
        .await
        .unwrap();
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let classic = client.send(common::join_request("g", ""), 9).await.unwrap();
    assert_eq!(
        classic.error_code,
        ResponseError::InconsistentGroupProtocol.code(),
        "a classic JoinGroup to a consumer group under policy disabled: {classic:?}"
    );
    server.stop();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kmock"))
        .args([
            "serve",
            "--port",
            "0",
            "--group-consumer-migration-policy",
            "sideways",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a usage error: {stderr}");
    assert!(
        stderr.contains("one of bidirectional, upgrade, downgrade, disabled"),
        "{stderr}"
    );
}
