//! Cluster operations and reset over the control API of `kmock serve`: what clients see
//! afterwards, through Metadata, FindCoordinator, kcat and plain connects.

use std::collections::BTreeMap;
use std::net::TcpStream;

use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest};
use kmock_client::Client;
use serde_json::{json, Value};

mod common;

use common::{kcat, Server};

/// What a Metadata request to `broker` answers: the node ids listed, and each orders
/// partition's (leader, leader epoch).
async fn metadata(broker: &str) -> (Vec<i32>, BTreeMap<i32, (i32, i32)>) {
    let client = Client::connect(broker).await.expect("connects");
    let answer = client
        .send(MetadataRequest::default().with_topics(None), 12)
        .await
        .expect("Metadata is answered");
    let nodes = answer.brokers.iter().map(|b| b.node_id.0).collect();
    let orders = answer
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == "orders"))
        .expect("orders is listed");
    let partitions = orders
        .partitions
        .iter()
        .map(|p| (p.partition_index, (p.leader_id.0, p.leader_epoch)))
        .collect();
    (nodes, partitions)
}

#[tokio::test]
async fn a_broker_taken_down_over_http_is_failed_over_and_serves_again_once_up() {
    let (server, _) = Server::start_json(&["--port", "0", "--brokers", "3", "--topic", "orders:6"]);
    let addrs = server.addrs();
    let first = addrs[0].to_string();
    let (_, before) = metadata(&first).await;
    let led_by_2: Vec<i32> = before
        .iter()
        .filter(|(_, (leader, _))| *leader == 2)
        .map(|(p, _)| *p)
        .collect();
    assert!(!led_by_2.is_empty(), "{before:?}");

    let down = server.http("POST", "/brokers/2/down", None).expect(200);
    assert_eq!(down, json!({"node_id": 2, "up": false}));
    let refused = TcpStream::connect(addrs[1]).expect_err("broker 2 refuses connections");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    let (nodes, after) = metadata(&first).await;
    assert_eq!(nodes, [1, 3], "Metadata lists the live brokers");
    for p in &led_by_2 {
        let (leader, epoch) = after[p];
        assert!(leader == 1 || leader == 3, "partition {p} led by {leader}");
        assert_eq!(
            epoch,
            before[p].1 + 1,
            "partition {p}'s leader epoch is bumped"
        );
    }
    // A client goes on: produce to a partition broker 2 led, through the new leader.
    let partition = led_by_2[0].to_string();
    kcat(
        &[
            "-b",
            &server.bootstrap,
            "-P",
            "-t",
            "orders",
            "-p",
            &partition,
        ],
        "x\n",
    );
    let health = server.http("GET", "/health", None).expect(200);
    assert_eq!(
        health["brokers"][1],
        json!({"node_id": 2, "addr": addrs[1].to_string(), "up": false})
    );
    let again = server.http("POST", "/brokers/2/down", None);
    assert_eq!(again.status, 409, "{}", again.body);

    let up = server.http("POST", "/brokers/2/up", None).expect(200);
    assert_eq!(up, json!({"node_id": 2, "up": true}));
    TcpStream::connect(addrs[1]).expect("broker 2 accepts connections again");
    let (nodes, _) = metadata(&addrs[1].to_string()).await;
    assert_eq!(nodes, [1, 2, 3]);
    kcat(
        &[
            "-b",
            &addrs[1].to_string(),
            "-P",
            "-t",
            "orders",
            "-p",
            &partition,
        ],
        "y\n",
    );
    let out = kcat(
        &[
            "-b",
            &server.bootstrap,
            "-C",
            "-t",
            "orders",
            "-p",
            &partition,
            "-e",
        ],
        "",
    );
    assert_eq!(out, "x\ny\n");
}

#[tokio::test]
async fn leaders_and_coordinators_move_over_http() {
    let (server, _) = Server::start_json(&["--port", "0", "--brokers", "3", "--topic", "orders:3"]);
    let first = server.addrs()[0].to_string();
    let (_, before) = metadata(&first).await;
    let target = if before[&0].0 == 3 { 2 } else { 3 };
    let moved = server
        .http(
            "POST",
            "/partitions/orders/0/leader",
            Some(&format!(r#"{{"broker": {target}}}"#)),
        )
        .expect(200);
    let epoch = before[&0].1 + 1;
    assert_eq!(
        moved,
        json!({"topic": "orders", "partition": 0, "leader": target, "leader_epoch": epoch})
    );
    let (_, after) = metadata(&first).await;
    assert_eq!(after[&0], (target, epoch));

    let coordinator = server
        .http(
            "POST",
            "/groups/billing/coordinator",
            Some(r#"{"broker": 2}"#),
        )
        .expect(200);
    assert_eq!(
        coordinator,
        json!({"group_id": "billing", "coordinator": 2})
    );
    let client = Client::connect(first.as_str()).await.unwrap();
    let found = client
        .send(
            FindCoordinatorRequest::default().with_key("billing".to_string().into()),
            3,
        )
        .await
        .unwrap();
    assert_eq!((found.error_code, found.node_id.0), (0, 2));

    #[rustfmt::skip]
    let cases = [
        ("/partitions/orders/0/leader", r#"{"broker": 9}"#, 404, "no broker 9"),
        ("/partitions/orders/7/leader", r#"{"broker": 1}"#, 404, "no partition 7"),
        ("/partitions/nope/0/leader", r#"{"broker": 1}"#, 404, "of topic \"nope\""),
        ("/partitions/orders/0/leader", r#"{"node": 1}"#, 400, "unknown field `node`"),
        ("/partitions/orders/x/leader", r#"{"broker": 1}"#, 400, "value `x` to a `i32`"),
        ("/groups/billing/coordinator", r#"{"broker": "two"}"#, 400, "invalid type"),
        ("/brokers/9/down", "", 404, "no broker 9"),
        ("/brokers/1/up", "", 409, "not down"),
    ];
    for (path, body, status, reason) in cases {
        let body = Some(body).filter(|b| !b.is_empty());
        let answer = server.http("POST", path, body).expect(status);
        let error = answer["error"].as_str().unwrap_or("").to_owned();
        assert!(error.contains(reason), "{path} {body:?}: {error}");
    }
    let (_, unchanged) = metadata(&first).await;
    assert_eq!(unchanged, after, "refused moves change nothing");
}

#[test]
fn reset_over_http_empties_the_journal_and_the_logs_and_keeps_the_ports() {
    let (server, line) = Server::start_json(&["--port", "0", "--topic", "orders:1"]);
    kcat(&["-b", &server.bootstrap, "-P", "-t", "orders"], "a\nb\n");
    kcat(&["-b", &server.bootstrap, "-P", "-t", "payments"], "c\n");
    let journal = server.http("GET", "/journal", None);
    let last_seq = journal.lines().last().expect("entries")["seq"]
        .as_u64()
        .unwrap();

    let reset = server.http("POST", "/reset", None).expect(200);
    assert_eq!(reset, json!({"reset": true}));
    assert_eq!(
        server.http("GET", "/journal", None).body,
        "",
        "the journal is empty"
    );
    let topics = server.http("GET", "/topics", None).expect(200);
    let names: Vec<&Value> = topics
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(
        names,
        [&json!("orders")],
        "only the configured topic is back"
    );
    assert_eq!(topics[0]["partitions"][0]["high_watermark"], 0, "{topics}");

    let health = server.http("GET", "/health", None).expect(200);
    assert_eq!(
        health["bootstrap"], line["bootstrap"],
        "the ports are unchanged"
    );
    kcat(&["-b", &server.bootstrap, "-P", "-t", "orders"], "d\n");
    let out = kcat(&["-b", &server.bootstrap, "-C", "-t", "orders", "-e"], "");
    assert_eq!(out, "d\n");
    let journal = server.http("GET", "/journal", None).lines();
    assert!(
        journal[0]["seq"].as_u64().unwrap() > last_seq,
        "numbering goes on after a reset"
    );
}
