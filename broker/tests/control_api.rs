//! The control API of `kmock serve`, driven over HTTP with curl against the binary: fault
//! rules, the journal, checks and topics.

use std::io::Read;
use std::process::Command;

use kmock_client::Client;
use serde_json::{json, Value};

mod common;

use common::{commit_request, http, kcat, kmock_check, open_stream, JournalFile, Server};

/// The entries of a `GET /journal` answer.
fn journal(server: &Server, query: &str) -> Vec<Value> {
    let answer = server.http("GET", &format!("/journal{query}"), None);
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.lines()
}

#[test]
fn the_json_line_gives_the_bootstrap_the_control_url_and_the_brokers() {
    let (server, line) = Server::start_json(&["--port", "0", "--brokers", "2"]);
    let brokers = line["brokers"].as_array().expect("a broker list");
    let addrs: Vec<String> = server.addrs().iter().map(|a| a.to_string()).collect();
    assert_eq!(
        brokers,
        &vec![
            json!({"node_id": 1, "addr": addrs[0]}),
            json!({"node_id": 2, "addr": addrs[1]})
        ]
    );
    assert!(server.control.starts_with("http://127.0.0.1:"), "{line}");
    let health = server.http("GET", "/health", None).expect(200);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["bootstrap"], line["bootstrap"]);
}

#[test]
fn a_delay_rule_added_over_http_names_the_delayed_entries_in_the_journal() {
    let (server, _) = Server::start_json(&["--port", "0", "--topic", "orders:1"]);
    let rule = r#"{"name": "slow-produce", "api": "Produce", "topic": "orders", "delay": "300ms"}"#;
    let added = server.http("POST", "/rules", Some(rule)).expect(201);
    assert_eq!(added["name"], "slow-produce");

    kcat(
        &["-b", &server.bootstrap, "-P", "-t", "orders"],
        "a\nb\nc\n",
    );

    let produces = journal(&server, "?api=Produce");
    assert!(!produces.is_empty(), "no Produce entry");
    for entry in &produces {
        assert_eq!(
            entry["faults"],
            json!(["slow-produce: delay(300ms)"]),
            "{entry}"
        );
        let answered = entry["response"]["at_us"].as_u64().expect("answered");
        let held = answered - entry["at_us"].as_u64().unwrap();
        assert!(held >= 300_000, "answered {held} µs after arrival: {entry}");
    }
    let others = journal(&server, "");
    let metadata: Vec<&Value> = others.iter().filter(|e| e["api"] == "Metadata").collect();
    assert!(!metadata.is_empty());
    assert!(metadata.iter().all(|e| e["faults"] == json!([])));

    let rules = server.http("GET", "/rules", None).expect(200);
    assert_eq!(
        rules,
        json!([{"id": added["id"], "name": "slow-produce", "matched": produces.len(), "fired": produces.len()}])
    );
}

#[tokio::test]
async fn journal_queries_filter_by_seq_api_topic_group_and_count() {
    let (server, _) = Server::start_json(&["--port", "0", "--topic", "orders:1"]);
    kcat(&["-b", &server.bootstrap, "-P", "-t", "orders"], "a\n");
    kcat(&["-b", &server.bootstrap, "-P", "-t", "payments"], "b\n");
    // Commits of two groups, interleaved, on the one broker (their coordinator).
    let client = Client::connect(server.addrs()[0]).await.unwrap();
    for (group, offset) in [("billing", 1), ("audit", 1), ("billing", 2)] {
        let answer = client
            .send(commit_request(group, "orders", offset), 8)
            .await
            .unwrap();
        assert_eq!(answer.topics[0].partitions[0].error_code, 0);
    }
    let all = journal(&server, "");
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "arrival order: {seqs:?}"
    );

    let after = seqs[2];
    assert_eq!(
        journal(&server, &format!("?after={after}")),
        all[3..].to_vec()
    );
    assert_eq!(journal(&server, "?limit=2"), all[..2].to_vec());
    let orders = journal(&server, "?topic=orders");
    assert!(!orders.is_empty());
    assert!(
        orders.iter().all(|e| {
            let request = &e["request"];
            let summary = if e["api"] == "Produce" {
                &request["produce"]
            } else {
                &request["offset_commit"]
            };
            summary["partitions"][0]["topic"] == "orders"
        }),
        "{orders:?}"
    );
    assert_eq!(
        orders.iter().filter(|e| e["api"] == "OffsetCommit").count(),
        3,
        "the commits are about orders too"
    );
    let of_group = |group: &str| -> Vec<Value> {
        all.iter()
            .filter(|e| e["request"]["offset_commit"]["group_id"] == group)
            .cloned()
            .collect()
    };
    let billing = journal(&server, "?group=billing");
    assert_eq!(billing.len(), 2, "{billing:?}");
    assert_eq!(billing, of_group("billing"));
    assert_eq!(journal(&server, "?group=audit"), of_group("audit"));
    assert_eq!(journal(&server, "?group=audit").len(), 1);
    assert!(journal(&server, "?group=nobody").is_empty());
    let produces = journal(&server, "?api=Produce&limit=1");
    assert_eq!(produces.len(), 1);
    assert_eq!(
        produces[0]["request"]["produce"]["partitions"][0]["topic"],
        "orders"
    );
}

#[test]
fn the_stream_sends_entries_as_they_complete_and_replays_from_a_seq() {
    let (server, _) = Server::start_json(&["--port", "0", "--topic", "orders:1"]);
    let (mut stream, mut out) = open_stream(&server, "?api=Produce&limit=2");
    kcat(&["-b", &server.bootstrap, "-P", "-t", "orders"], "a\n");
    kcat(&["-b", &server.bootstrap, "-P", "-t", "orders"], "b\n");
    let mut body = String::new();
    out.read_to_string(&mut body).unwrap();
    let status = stream.wait().unwrap();
    assert!(status.success(), "curl: {status}");
    let streamed: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(streamed.len(), 2, "{body}");
    assert!(
        streamed
            .iter()
            .all(|e| e["api"] == "Produce" && e["response"].is_object()),
        "{body}"
    );
    assert_eq!(
        streamed,
        journal(&server, "?api=Produce"),
        "the stream and the journal agree"
    );

    let replay = server.http("GET", "/journal/stream?after=0&api=Produce&limit=2", None);
    assert_eq!(replay.status, 200);
    assert_eq!(replay.lines(), streamed, "entries in memory come first");
}

#[tokio::test]
async fn check_over_http_names_a_regression_and_passes_clean_traffic_like_kmock_check() {
    let file = JournalFile::new("control-check");
    let (mut server, _) = Server::start_json(&[
        "--port",
        "0",
        "--topic",
        "orders:1",
        "--journal",
        file.path(),
    ]);
    kcat(
        &[
            "-b",
            &server.bootstrap,
            "-P",
            "-t",
            "orders",
            "-X",
            "enable.idempotence=true",
        ],
        "a\nb\nc\n",
    );
    kcat(
        &[
            "-b",
            &server.bootstrap,
            "-C",
            "-t",
            "orders",
            "-e",
            "-o",
            "beginning",
        ],
        "",
    );
    let clean = server.http("POST", "/check", None).expect(200);
    assert_eq!(clean["violations"], json!([]), "{clean}");
    assert_eq!(
        clean["checks"].as_array().unwrap().len(),
        kmock::check::ALL.len()
    );

    let client = Client::connect(server.addrs()[0]).await.unwrap();
    for offset in [12, 11] {
        client
            .send(commit_request("billing", "orders", offset), 8)
            .await
            .unwrap();
    }
    let only = r#"{"checks": ["offset-commit-regression"]}"#;
    let report = server.http("POST", "/check", Some(only)).expect(200);
    assert_eq!(report["checks"], json!(["offset-commit-regression"]));
    let violations = report["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 1, "{report}");
    assert_eq!(violations[0]["kind"], "offset-commit-regression");
    assert_eq!(violations[0]["key"], "billing/orders-0");

    server.stop();
    let (code, stdout, stderr) = kmock_check(&[
        file.path(),
        "--check",
        "offset-commit-regression",
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "{stderr}");
    let offline: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(offline, report, "kmock check gives the same JSON");
}

#[test]
fn topics_created_over_http_are_served_to_clients() {
    let (server, _) = Server::start_json(&["--port", "0", "--brokers", "2"]);
    let body = r#"{"name": "audit", "partitions": 3, "configs": {"cleanup.policy": "delete"}}"#;
    let created = server.http("POST", "/topics", Some(body)).expect(201);
    assert_eq!(created["name"], "audit");
    let leaders: Vec<&Value> = created["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["leader"])
        .collect();
    assert_eq!(leaders, [&json!(1), &json!(2), &json!(1)]);

    kcat(
        &["-b", &server.bootstrap, "-P", "-t", "audit", "-p", "2"],
        "x\ny\n",
    );
    let topics = server.http("GET", "/topics", None).expect(200);
    assert_eq!(topics[0]["name"], "audit");
    assert_eq!(topics[0]["configs"], json!({"cleanup.policy": "delete"}));
    assert_eq!(topics[0]["partitions"][2]["high_watermark"], 2, "{topics}");
    let listing = kcat(&["-b", &server.bootstrap, "-L", "-t", "audit"], "");
    assert!(
        listing.contains("topic \"audit\" with 3 partitions"),
        "{listing}"
    );
}

#[test]
fn bad_requests_get_a_4xx_with_the_reason_and_change_nothing() {
    let (server, _) = Server::start_json(&["--port", "0", "--topic", "orders:1"]);
    // (method and path, JSON body or "" for none, status, part of the reason)
    #[rustfmt::skip]
    let cases = [
        ("POST /rules", r#"{"api": "Produce", "delai": "1s"}"#, 400, "unknown field `delai`"),
        ("POST /rules", r#"{"api": "Produce", "delay": "fast"}"#, 400, "bad duration \"fast\""),
        ("POST /rules", r#"{"api": "Produse", "silence": true}"#, 400, "unknown API \"Produse\""),
        ("POST /rules", r#"{"api": "Produce", "silence": true, "delay": "1s"}"#, 400, "more than one action"),
        ("POST /rules", r#"{"api": "Produce", "error": "NOT_A_THING"}"#, 400, "unknown Kafka error"),
        ("POST /rules", r#"{"api": "Produce", "nth": 0, "silence": true}"#, 400, "nth counts from 1"),
        ("POST /rules", r#"{"api": "Produce", "group": "g", "silence": true}"#, 400, "the `group` matcher can never match Produce: Produce requests carry no group"),
        ("POST /rules", r#"{"api": "FindCoordinator", "partition": 0, "silence": true}"#, 400, "the `partition` matcher can never match FindCoordinator"),
        ("POST /rules", r#"{"api": "Fetch", "after": "2s", "until": "1s", "silence": true}"#, 400, "an empty window"),
        ("POST /rules", r#"{"api": "Fetch", "first": 0, "silence": true}"#, 400, "no number (they count from 1), it would never fire"),
        ("POST /rules", "", 400, "the text is empty"),
        ("POST /rules", "[1, 2", 400, "invalid type: sequence"),
        ("DELETE /rules/99", "", 404, "no rule 99 is in force"),
        ("DELETE /rules/x", "", 400, "Cannot parse `x`"),
        ("POST /topics", r#"{"name": "t", "partitions": 0}"#, 400, "number of partitions"),
        ("POST /topics", r#"{"name": "bad/name", "partitions": 1}"#, 400, "holds '/'"),
        ("POST /topics", r#"{"name": "orders", "partitions": 1}"#, 409, "already exists"),
        ("POST /topics", r#"{"name": "t", "partitions": 1, "configs": {"cleanup.policy": "shred"}}"#, 400, "cleanup.policy"),
        ("POST /check", r#"{"checks": ["no-such-check"]}"#, 400, "unknown check"),
        ("POST /check", r#"{"check": []}"#, 400, "unknown field `check`"),
        ("GET /journal?api=Produse", "", 400, "unknown API"),
        ("GET /journal?after=-1", "", 400, "after: invalid digit"),
        ("GET /journal?page=2", "", 400, "unknown field `page`"),
        ("GET /journal/stream?api=Produse", "", 400, "unknown API"),
        ("GET /nowhere", "", 404, "no such endpoint"),
        ("PUT /rules", "", 405, "does not take this method"),
    ];
    for (request, body, status, reason) in cases {
        let (method, path) = request.split_once(' ').unwrap();
        let body = Some(body).filter(|b| !b.is_empty());
        let answer = server.http(method, path, body);
        let error = answer.expect(status)["error"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(error.contains(reason), "{request} {body:?}: {error}");
    }
    let form = http(
        "POST",
        &format!("{}/rules", server.control),
        Some((
            "application/x-www-form-urlencoded",
            r#"{"api": "Produce", "silence": true}"#,
        )),
    );
    let error = form.expect(415)["error"].to_string();
    assert!(error.contains("neither JSON nor YAML"), "{error}");

    assert_eq!(
        server.http("GET", "/rules", None).expect(200),
        json!([]),
        "no rule was added"
    );
    let topics = server.http("GET", "/topics", None).expect(200);
    let names: Vec<&Value> = topics
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(names, [&json!("orders")], "no topic was created");
}

#[test]
fn rules_are_taken_as_yaml_and_removed_one_by_one_or_all_at_once() {
    let (server, _) = Server::start_json(&["--port", "0"]);
    let yaml = "api: OffsetCommit\ngroup: billing\nevery: 2\ndelay: 40ms\n";
    let first = http(
        "POST",
        &format!("{}/rules", server.control),
        Some(("application/yaml", yaml)),
    )
    .expect(201);
    assert_eq!(first["name"], format!("OffsetCommit#{}", first["id"]));
    let second = server
        .http(
            "POST",
            "/rules",
            Some(r#"{"api": "Fetch", "nth": 1, "disconnect": true}"#),
        )
        .expect(201);
    let third = server
        .http(
            "POST",
            "/rules",
            Some(r#"{"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}"#),
        )
        .expect(201);
    let ids = |rules: Value| -> Vec<Value> {
        rules
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].clone())
            .collect()
    };
    assert_eq!(
        ids(server.http("GET", "/rules", None).expect(200)),
        [
            first["id"].clone(),
            second["id"].clone(),
            third["id"].clone()
        ]
    );
    let removed = server
        .http("DELETE", &format!("/rules/{}", second["id"]), None)
        .expect(200);
    assert_eq!(removed, json!({"removed": [second["id"]]}));
    let removed = server.http("DELETE", "/rules", None).expect(200);
    assert_eq!(removed, json!({"removed": [first["id"], third["id"]]}));
    assert_eq!(server.http("GET", "/rules", None).expect(200), json!([]));
}

#[test]
fn the_control_port_cannot_be_a_broker_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_kmock"))
        .args(["serve", "--port", &port, "--control-port", &port])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is broker 1's Kafka port"), "{stderr}");
}

#[test]
fn stopping_kmock_ends_a_live_stream() {
    let (mut server, _) = Server::start_json(&["--port", "0"]);
    let (stream, _body) = open_stream(&server, "");
    server.stop();
    let status = stream.wait_with_output().unwrap().status;
    assert!(status.success(), "the stream ended cleanly: {status}");
}
