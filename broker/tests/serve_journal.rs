//! The journal's JSON Lines sink: `kmock serve --journal PATH` driven by kcat and by a raw
//! socket, and the in-process sink compared with the in-memory journal.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kmock::journal::{read_jsonl, RequestSummary};
use kmock::Entry;

mod common;

use common::{kcat, JournalFile, Server, SharedBuffer};

/// The entries, one compact line each, for failure messages.
fn lines(entries: &[Entry]) -> String {
    entries
        .iter()
        .map(|e| serde_json::to_string(e).expect("an entry serializes"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn serve_journal_records_kcat_traffic_as_json_lines() {
    let journal = JournalFile::new("kcat");
    let mut server = Server::start(&[
        "--port",
        "0",
        "--topic",
        "orders:3",
        "--journal",
        journal.path(),
    ]);
    let sent: Vec<String> = (0..100).map(|i| format!("line {i:03} of 100")).collect();
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
        ],
        "",
    );
    let mut got: Vec<&str> = out.lines().collect();
    got.sort_unstable();
    assert_eq!(got, sent, "lines consumed back by kcat -C");
    server.stop();

    let entries = journal.read();
    let all = lines(&entries);
    let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=entries.len() as u64).collect::<Vec<_>>(),
        "journal seqs are not 1..=n, each once:\n{all}"
    );
    for api in ["Metadata", "Produce", "Fetch"] {
        assert!(
            entries.iter().any(|e| e.is(api)),
            "no {api} entry in the journal:\n{all}"
        );
    }
    let addr = server.addrs()[0];
    for e in &entries {
        assert_eq!(e.broker, 1, "entry {} is not from broker 1:\n{all}", e.seq);
        assert!(
            e.peer.ip().is_loopback() && e.peer.port() != 0 && e.peer != addr,
            "entry {} has peer {}, not a client's loopback address:\n{all}",
            e.seq,
            e.peer
        );
        assert_eq!(
            e.client_id.as_deref(),
            Some("rdkafka"),
            "entry {} client id:\n{all}",
            e.seq
        );
        assert_eq!(
            e.bad_request, None,
            "entry {} is a bad request:\n{all}",
            e.seq
        );
    }

    // Records produced to each partition, by the Produce entries.
    let mut produced: BTreeMap<i32, i64> = (0..3).map(|p| (p, 0)).collect();
    for e in entries.iter().filter(|e| e.is("Produce")) {
        let Some(RequestSummary::Produce(s)) = &e.request else {
            panic!(
                "Produce entry {} has request {:?}:\n{all}",
                e.seq, e.request
            );
        };
        for p in &s.partitions {
            assert_eq!(&*p.topic, "orders", "Produce entry {}:\n{all}", e.seq);
            assert!(
                p.base_offset.is_some() && p.error_code == Some(0),
                "Produce entry {} partition {} answered base_offset {:?} error_code {:?}:\n{all}",
                e.seq,
                p.partition,
                p.base_offset,
                p.error_code
            );
            *produced.entry(p.partition).or_default() += i64::from(p.record_count);
        }
    }
    assert_eq!(
        produced.values().sum::<i64>(),
        100,
        "records in the journal's Produce batches, by partition {produced:?}:\n{all}"
    );

    // The highest high watermark each partition's answered Fetches reported. A Fetch still
    // long-polling when kcat left, or when kmock was stopped, is never answered: it may only be
    // its connection's last request, and then has no answered fields.
    let mut watermarks: BTreeMap<i32, i64> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.is("Fetch")) {
        let Some(RequestSummary::Fetch(s)) = &e.request else {
            panic!("Fetch entry {} has request {:?}:\n{all}", e.seq, e.request);
        };
        let last_of_connection = entries
            .iter()
            .rfind(|other| other.conn == e.conn)
            .is_some_and(|last| last.seq == e.seq);
        for p in &s.partitions {
            assert_eq!(p.topic, "orders", "Fetch entry {}:\n{all}", e.seq);
            if e.response.is_none() {
                assert!(
                    last_of_connection,
                    "Fetch entry {} is unanswered but not the last request of connection {}:\n{all}",
                    e.seq,
                    e.conn
                );
                assert_eq!(
                    (p.high_watermark, p.records_bytes, p.error_code),
                    (None, None, None),
                    "unanswered Fetch entry {} partition {}:\n{all}",
                    e.seq,
                    p.partition
                );
                continue;
            }
            let Some(high_watermark) = p.high_watermark else {
                panic!(
                    "answered Fetch entry {} partition {} has no high watermark:\n{all}",
                    e.seq, p.partition
                );
            };
            assert_eq!(
                p.error_code,
                Some(0),
                "Fetch entry {} partition {}:\n{all}",
                e.seq,
                p.partition
            );
            let highest = watermarks.entry(p.partition).or_insert(high_watermark);
            *highest = (*highest).max(high_watermark);
        }
    }
    // kcat -e stops once every partition is read to its end, which it learns from a Fetch.
    assert_eq!(
        watermarks, produced,
        "per partition: highest high watermark answered to a Fetch (left), records produced \
         (right):\n{all}"
    );
}

#[test]
fn a_malformed_frame_is_journaled_with_its_reason() {
    let journal = JournalFile::new("malformed");
    let mut server = Server::start(&["--port", "0", "--journal", journal.path()]);
    let mut stream = TcpStream::connect(server.addrs()[0]).expect("connect to the broker");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("set a read timeout");
    // A 3-byte frame: shorter than any request header.
    stream
        .write_all(&[0, 0, 0, 3, 1, 2, 3])
        .expect("write the frame");
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("the broker answered a malformed frame: {:?}", &buf[..n]),
        Err(e) => panic!("the broker did not close the connection: {e}"),
    }
    let client = stream.local_addr().expect("local address");
    server.stop();

    let entries = journal.read();
    let all = lines(&entries);
    let [entry] = entries.as_slice() else {
        panic!("expected exactly one entry:\n{all}");
    };
    assert!(
        entry
            .bad_request
            .as_deref()
            .is_some_and(|reason| reason.contains("too short")),
        "the entry does not say the frame was too short:\n{all}"
    );
    assert_eq!(entry.request, None, "{all}");
    assert_eq!(entry.response, None, "{all}");
    assert_eq!(
        (entry.seq, entry.broker, entry.peer, entry.api.as_deref()),
        (1, 1, client, None),
        "(seq, broker, peer, api):\n{all}"
    );
}

// Multi-threaded on purpose: the broker writes an entry's line to the sink before the completed
// entry can be seen in memory, so a test that saw every entry complete finds every line whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jsonl_sink_matches_the_in_process_journal() {
    let sink = SharedBuffer::default();
    let cluster = kmock::Cluster::builder()
        .topic("t", 2)
        .journal_jsonl(sink.clone())
        .start()
        .await
        .unwrap();
    let client = kmock_client::Client::connect(cluster.bootstrap())
        .await
        .unwrap();
    for partition in 0..2 {
        for batch in 0..3 {
            let records: Vec<_> = (0..4)
                .map(|i| kmock_client::record(b"k", format!("{partition}-{batch}-{i}").as_bytes()))
                .collect();
            let response = client.produce("t", partition, &records, -1).await.unwrap();
            let answer = &response.responses[0].partition_responses[0];
            assert_eq!(
                (answer.error_code, answer.base_offset),
                (0, batch * 4),
                "produce batch {batch} to partition {partition}"
            );
        }
    }
    let fetched = client
        .fetch("t", 1, 0, Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(fetched.responses[0].partitions[0].high_watermark, 12);
    client.metadata(Some(&["t"])).await.unwrap();

    // The client has every answer; the broker completes an entry just after writing its
    // answer: wait for each entry's completion.
    for entry in cluster.journal().entries() {
        let seq = entry.seq;
        cluster
            .wait_for(
                |e| e.seq == seq && e.response.is_some(),
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_else(|e| panic!("entry {seq} unanswered: {e}"));
    }
    let journal = cluster.journal();
    assert_eq!(
        journal.api("Produce").count(),
        6,
        "Produce entries:\n{}",
        lines(journal.entries())
    );
    assert_eq!(journal.entries().len(), 8, "{}", lines(journal.entries()));

    let written = sink.0.lock().unwrap().clone();
    let from_sink = read_jsonl(written.as_slice()).unwrap_or_else(|e| {
        panic!(
            "the sink is not JSON Lines: {e}\n{}",
            String::from_utf8_lossy(&written)
        )
    });
    assert_eq!(
        from_sink,
        journal.entries(),
        "the sink (left) and the in-memory journal (right) differ; the sink wrote:\n{}",
        String::from_utf8_lossy(&written)
    );
}
