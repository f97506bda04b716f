//! The control API of `kmock serve` refuses what a web page in a browser on the same machine
//! could send it — a foreign `Origin`, a foreign `Host` (DNS rebinding), a body without a JSON
//! or YAML `Content-Type` — and, with `--control-token`, a request without the token; each
//! refusal applies nothing (the state is read back), and a normal client is served right after.

use kmock_client::Client;
use serde_json::Value;

mod common;

use common::{http_with, Answer, Server};

const RULE: &str = r#"{"api": "Produce", "delay": "10ms"}"#;

/// What a request that got through would have changed: brokers up, rules, journal length.
#[derive(Debug, PartialEq)]
struct Seen {
    brokers_up: Vec<bool>,
    rules: usize,
    journal: usize,
}

/// A served cluster of two brokers, and its control API's `host:port`.
fn serve(extra: &[&str]) -> (Server, String) {
    let args: Vec<&str> = ["--brokers", "2", "--port", "0"]
        .iter()
        .chain(extra)
        .copied()
        .collect();
    let server = Server::start(&args);
    let host = server
        .control
        .strip_prefix("http://")
        .expect("an http URL")
        .to_owned();
    (server, host)
}

/// `METHOD control/PATH` with `headers` and, if given, a JSON body.
fn call(server: &Server, method: &str, path: &str, headers: &[&str], json: Option<&str>) -> Answer {
    let body = json.map(|b| ("application/json", b));
    http_with(method, &format!("{}{path}", server.control), headers, body)
}

/// The state as the owner reads it (with `auth`, the owner's headers).
fn seen(server: &Server, auth: &[&str]) -> Seen {
    let health = call(server, "GET", "/health", auth, None).expect(200);
    let brokers_up = health["brokers"]
        .as_array()
        .expect("brokers")
        .iter()
        .map(|b| b["up"].as_bool().expect("up"))
        .collect();
    let rules = call(server, "GET", "/rules", auth, None).expect(200);
    let journal = call(server, "GET", "/journal", auth, None);
    assert_eq!(journal.status, 200, "{}", journal.body);
    Seen {
        brokers_up,
        rules: rules.as_array().expect("a list").len(),
        journal: journal.lines().len(),
    }
}

/// One request on the first broker, so the journal has an entry a reset would remove.
async fn one_request(server: &Server) {
    let client = Client::connect(server.addrs()[0]).await.unwrap();
    client.api_versions().await.unwrap();
}

/// What a page would try: reset, stop a broker, add a rule, read the journal.
const ATTACKS: [(&str, &str, Option<&str>); 4] = [
    ("POST", "/reset", None),
    ("POST", "/brokers/2/down", None),
    ("POST", "/rules", Some(RULE)),
    ("GET", "/journal", None),
];

/// Each attack with `headers` is refused with `status`, an error naming `why`; nothing changes.
fn all_refused(server: &Server, headers: &[&str], status: u16, why: &str, auth: &[&str]) {
    let before = seen(server, auth);
    for (method, path, body) in ATTACKS {
        let answer = call(server, method, path, headers, body);
        let error = answer.expect(status)["error"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(
            error.contains(why),
            "{method} {path} with {headers:?}: error {error:?} does not say {why:?}"
        );
    }
    assert_eq!(
        seen(server, auth),
        before,
        "a refused request changed the cluster"
    );
}

/// A normal client is served: a rule is added and removed again.
fn served(server: &Server, auth: &[&str]) {
    let added = call(server, "POST", "/rules", auth, Some(RULE)).expect(201);
    assert_eq!(seen(server, auth).rules, 1);
    let id = added["id"].as_u64().expect("an id");
    call(server, "DELETE", &format!("/rules/{id}"), auth, None).expect(200);
}

#[tokio::test]
async fn a_foreign_origin_is_refused_and_nothing_applied() {
    let (server, host) = serve(&[]);
    one_request(&server).await;
    for origin in [
        "Origin: http://evil.example",
        "Origin: null",
        "Origin: http://127.0.0.1:1",
        &format!("Origin: https://{host}"),
    ] {
        all_refused(&server, &[origin], 403, "Origin", &[]);
        served(&server, &[]);
    }
    // The API's own origin (a page it served, were it to serve one) passes.
    served(&server, &[&format!("Origin: http://{host}")]);
}

#[tokio::test]
async fn a_foreign_host_is_refused_and_nothing_applied() {
    let (server, host) = serve(&[]);
    one_request(&server).await;
    let port = host.rsplit_once(':').expect("host:port").1;
    // DNS rebinding: the page's own name, resolved to 127.0.0.1, on the API's port.
    for foreign in [
        format!("Host: rebound.example:{port}"),
        format!("Host: 127.0.0.2:{port}"),
        "Host: 127.0.0.1".to_owned(),
    ] {
        all_refused(&server, &[&foreign], 403, "Host", &[]);
        served(&server, &[]);
    }
    served(&server, &[&format!("Host: localhost:{port}")]);
}

#[tokio::test]
async fn a_body_without_a_json_or_yaml_content_type_is_refused_and_nothing_applied() {
    let (server, _) = serve(&[]);
    one_request(&server).await;
    let before = seen(&server, &[]);
    let url = format!("{}/rules", server.control);
    for kind in ["", "text/plain", "application/x-www-form-urlencoded"] {
        let answer = http_with("POST", &url, &[], Some((kind, RULE)));
        let error = answer.expect(415)["error"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(error.contains("Content-Type"), "{kind:?}: {error}");
        assert_eq!(seen(&server, &[]), before, "a {kind:?} body was applied");
        served(&server, &[]);
    }
    // A POST without a body needs no Content-Type, as `curl -X POST …/reset` sends it.
    let reset = http_with("POST", &format!("{}/reset", server.control), &[], None);
    assert_eq!(reset.expect(200), serde_json::json!({"reset": true}));
}

#[tokio::test]
async fn a_missing_or_wrong_token_is_refused_and_nothing_applied() {
    let (server, _) = serve(&["--control-token", "s3cret"]);
    one_request(&server).await;
    let owner = ["Authorization: Bearer s3cret"];
    all_refused(&server, &[], 401, "Bearer", &owner);
    served(&server, &owner);
    all_refused(
        &server,
        &["Authorization: Bearer s3cre"],
        401,
        "token",
        &owner,
    );
    served(&server, &owner);
    all_refused(
        &server,
        &["Authorization: Basic czNjcmV0"],
        401,
        "Bearer",
        &owner,
    );
    served(&server, &owner);
    // The token does not make a foreign origin welcome.
    let foreign = [
        "Authorization: Bearer s3cret",
        "Origin: http://evil.example",
    ];
    all_refused(&server, &foreign, 403, "Origin", &owner);
    served(&server, &owner);
}

#[tokio::test]
async fn the_timeline_page_needs_no_token_but_its_data_does() {
    let (server, _) = serve(&["--control-token", "s3cret"]);
    for path in ["/ui", "/"] {
        let page = call(&server, "GET", path, &[], None);
        assert_eq!(page.status, 200, "GET {path}: {}", page.body);
        assert!(
            page.body.contains(r#"<canvas id="timeline">"#),
            "{}",
            page.body
        );
        assert!(!page.body.contains("s3cret"), "the page holds the token");
    }
    // Its policy: its own inline script and style, this API only, in no frame.
    let out = std::process::Command::new(common::CURL)
        .args(["-sS", "-o", "/dev/null", "-D", "-"])
        .arg(format!("{}/ui", server.control))
        .output()
        .expect("curl runs");
    let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(
        head.contains("\r\ncontent-security-policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; frame-ancestors 'none'\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nx-frame-options: deny\r\n"), "{head}");
    call(&server, "GET", "/journal", &[], None).expect(401);
    call(&server, "POST", "/ui", &[], None).expect(401);
    let foreign = ["Origin: http://evil.example"];
    call(&server, "GET", "/ui", &foreign, None).expect(403);
}

#[tokio::test]
async fn a_scenario_control_token_is_required_too() {
    let path =
        std::env::temp_dir().join(format!("kmock-control-token-{}.yaml", std::process::id()));
    std::fs::write(&path, "brokers: 2\nport: 0\ncontrol_token: from-yaml\n").unwrap();
    let server = Server::start(&["--config", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    one_request(&server).await;
    let owner = ["Authorization: Bearer from-yaml"];
    all_refused(&server, &[], 401, "Bearer", &owner);
    served(&server, &owner);
    let health: Value = call(&server, "GET", "/health", &owner, None).expect(200);
    assert_eq!(health["status"], "ok");
}

#[tokio::test]
async fn a_token_from_the_environment_or_a_file_is_required_too() {
    let path = std::env::temp_dir().join(format!("kmock-control-token-{}.txt", std::process::id()));
    std::fs::write(&path, "from-file\n").unwrap();
    let from_file = Server::start(&[
        "--port",
        "0",
        "--control-token-file",
        path.to_str().unwrap(),
    ]);
    std::fs::remove_file(&path).unwrap();
    let from_env = Server::start_with_env(&["--port", "0"], &[("KMOCK_CONTROL_TOKEN", "from-env")]);
    for (server, token) in [(&from_file, "from-file"), (&from_env, "from-env")] {
        one_request(server).await;
        let owner = [format!("Authorization: Bearer {token}")];
        let owner: Vec<&str> = owner.iter().map(String::as_str).collect();
        all_refused(server, &[], 401, "Bearer", &owner);
        served(server, &owner);
    }
}
