//! `kmock report JOURNAL.jsonl -o PATH` and `kmock serve --report PATH` write the timeline page
//! with the journal and the checks' verdicts embedded (the page itself is tested in a browser
//! by tests/tests/timeline_page.rs).

use kmock::Cluster;
use kmock_client::Client;

mod common;

use common::{commit_request, kmock_run, JournalFile, Server};

/// The JSON the page is given, read back out of the HTML file at `path`.
fn embedded(path: &std::path::Path) -> serde_json::Value {
    let html = std::fs::read_to_string(path).unwrap();
    let start = html.find(r#"id="kmock-data">"#).expect("a data slot") + 16;
    let end = start + html[start..].find("</script>").expect("the data ends");
    serde_json::from_str(&html[start..end]).expect("the data is JSON")
}

/// An HTML file no other test uses, removed when dropped.
fn temp_html(name: &str) -> JournalFile {
    JournalFile::with_extension(name, "html")
}

#[tokio::test]
async fn a_journal_with_a_regression_is_drawn_with_its_verdict() {
    let journal = JournalFile::new("report");
    let file = std::fs::File::create(journal.path()).unwrap();
    let cluster = Cluster::builder()
        .topic("t", 1)
        .journal_jsonl(file)
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    for offset in [12, 11] {
        client
            .send(commit_request("billing", "t", offset), 8)
            .await
            .unwrap();
    }
    cluster.shutdown().await;
    let out = temp_html("regression");
    let (code, stdout, stderr) = kmock_run("report", &[journal.path(), "-o", out.path()]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("2 entries, 1 violations, 0 warnings"),
        "{stdout}"
    );
    let data = embedded(out.path().as_ref());
    assert_eq!(data["mode"], "report");
    assert_eq!(data["entries"].as_array().unwrap().len(), 2);
    let violations = data["report"]["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0]["kind"], "offset-commit-regression");
    assert_eq!(data["error_names"]["45"], "OUT_OF_ORDER_SEQUENCE_NUMBER");
}

#[test]
fn an_unreadable_journal_is_exit_status_2() {
    let out = temp_html("unreadable");
    let (code, _, stderr) = kmock_run("report", &["/nonexistent.jsonl", "-o", out.path()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("/nonexistent.jsonl"), "{stderr}");
    assert!(!std::path::Path::new(out.path()).exists());
}

#[test]
fn a_malformed_journal_is_exit_status_2_and_no_report() {
    let journal = JournalFile::new("malformed");
    std::fs::write(journal.path(), "{\"seq\": 1, \"api\": \n").unwrap();
    let out = temp_html("malformed");
    let (code, stdout, stderr) = kmock_run("report", &[journal.path(), "-o", out.path()]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains(journal.path()), "{stderr}");
    assert!(!std::path::Path::new(out.path()).exists());
}

#[test]
fn the_journal_is_not_written_over() {
    let journal = JournalFile::new("same");
    let text = "{\"seq\": 1}\n";
    std::fs::write(journal.path(), text).unwrap();
    let (code, stdout, stderr) = kmock_run("report", &[journal.path(), "-o", journal.path()]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("the output is the journal"), "{stderr}");
    assert_eq!(std::fs::read_to_string(journal.path()).unwrap(), text);
}

#[test]
fn serve_refuses_an_unwritable_report_path_at_start_up() {
    // Refused before the cluster starts; were it not, serve would run (a hang, not a pass).
    let (code, stdout, stderr) = kmock_run(
        "serve",
        &["--port", "0", "--report", "/nonexistent-dir/report.html"],
    );
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("--report"), "{stderr}");
    assert!(stderr.contains("/nonexistent-dir/report.html"), "{stderr}");
}

#[tokio::test]
async fn serve_writes_the_report_at_exit() {
    let out = temp_html("serve");
    let mut server = Server::start(&["--port", "0", "--report", out.path()]);
    let client = Client::connect(server.addrs()[0]).await.unwrap();
    client.api_versions().await.unwrap();
    server.stop();
    let data = embedded(out.path().as_ref());
    let entries = data["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["api"], "ApiVersions");
    assert_eq!(data["report"]["violations"], serde_json::json!([]));
}
