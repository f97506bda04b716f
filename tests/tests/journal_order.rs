//! The journal numbers every request in one cluster-wide arrival order, at the moment its frame
//! is read: across connections and brokers, and ahead of requests still being handled.

mod common;

use std::time::Duration;

use common::jsonl::JsonlBuffer;
use kafka_protocol::ResponseError;
use kmock::journal::RequestSummary;
use kmock::Cluster;
use kmock_client::{record, Client};

#[tokio::test]
async fn requests_alternating_over_two_connections_are_journaled_in_send_order() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let addr = cluster.brokers()[0].addr;
    let (a, b) = (
        Client::connect(addr).await.unwrap(),
        Client::connect(addr).await.unwrap(),
    );
    // Each produce is answered before the next is sent: a barrier between sends.
    let mut sent = Vec::new();
    for i in 0..10 {
        let (client, name) = if i % 2 == 0 { (&a, "a") } else { (&b, "b") };
        let value = format!("{name}-{i}");
        client
            .produce("t", 0, &[record(b"k", value.as_bytes())], -1)
            .await
            .unwrap();
        sent.push((client.local_addr(), i as i64));
    }
    let journal = cluster.journal();
    let produced: Vec<_> = journal
        .produce_batches()
        .into_iter()
        .map(|b| (b.entry.peer, b.batch.base_offset.unwrap()))
        .collect();
    assert_eq!(
        produced, sent,
        "journal order (peer, offset) differs from send order"
    );
    let conns: Vec<u64> = journal.api("Produce").map(|e| e.conn).collect();
    assert!(
        conns.windows(2).all(|w| w[0] != w[1]),
        "produces must alternate connections: {conns:?}"
    );
    let seqs: Vec<u64> = journal.entries().iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "seq is dense from 1"
    );
}

#[tokio::test]
async fn a_request_waiting_behind_a_slow_one_keeps_its_arrival_seq() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let addr = cluster.brokers()[0].addr;
    let (slow, fast) = (
        Client::connect(addr).await.unwrap(),
        Client::connect(addr).await.unwrap(),
    );
    // On `slow`, a Fetch long-polls (until data arrives) and a Produce queues behind it; `fast`
    // produces once that Produce has arrived, and is answered first (its data ends the long
    // poll, and only then is the queued Produce handled). Seq must follow arrival, not handling.
    let patience = Duration::from_secs(30); // a hang guard only
    let (_, queued, later) = tokio::join!(
        slow.fetch("t", 0, 0, Duration::from_secs(30)),
        async {
            cluster.wait_for(|e| e.is("Fetch"), patience).await.unwrap();
            slow.produce("t", 0, &[record(b"k", b"queued")], -1)
                .await
                .unwrap()
        },
        async {
            let slow_peer = slow.local_addr();
            cluster
                .wait_for(|e| e.is("Produce") && e.peer == slow_peer, patience)
                .await
                .unwrap();
            fast.produce("t", 0, &[record(b"k", b"later")], -1)
                .await
                .unwrap()
        }
    );
    let queued_offset = queued.responses[0].partition_responses[0].base_offset;
    let later_offset = later.responses[0].partition_responses[0].base_offset;
    assert_eq!(
        (later_offset, queued_offset),
        (0, 1),
        "`fast` was handled first"
    );
    let batches = cluster.journal().produce_batches();
    let (first, second) = (&batches[0], &batches[1]);
    assert_eq!(
        first.entry.peer,
        slow.local_addr(),
        "the queued produce arrived first: {batches:#?}"
    );
    assert_eq!(second.entry.peer, fast.local_addr());
    assert!(first.entry.seq < second.entry.seq);
    assert!(
        first.entry.response.as_ref().unwrap().at_us
            > second.entry.response.as_ref().unwrap().at_us,
        "yet it was answered after the later one"
    );
}

#[tokio::test]
async fn a_frame_too_short_for_a_header_is_journaled_as_a_bad_request() {
    let cluster = Cluster::builder().start().await.unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    client.write_bytes(&[0, 0, 0, 3, 1, 2, 3]).await.unwrap();
    assert!(client.wait_closed(Duration::from_secs(5)).await);
    let entry = cluster
        .wait_for(|e| e.bad_request.is_some(), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        entry.bad_request.as_deref().unwrap().contains("too short"),
        "{entry:?}"
    );
    assert_eq!(entry.request, None);
    assert_eq!(entry.peer, client.local_addr());
}

#[tokio::test]
async fn produce_entries_record_the_batch_header_and_the_answer() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    client
        .produce("t", 0, &[record(b"k", b"1"), record(b"k", b"2")], 1)
        .await
        .unwrap();
    client
        .produce("t", 5, &[record(b"k", b"x")], 1)
        .await
        .unwrap();
    let journal = cluster.journal();
    let batches = journal.produce_batches();
    assert_eq!(batches.len(), 2);
    let (ok, bad) = (&batches[0].batch, &batches[1].batch);
    assert_eq!((&*ok.topic, ok.partition, ok.record_count), ("t", 0, 2));
    assert_eq!((ok.base_offset, ok.error_code), (Some(0), Some(0)));
    assert_eq!(
        (ok.producer_id, ok.base_sequence),
        (-1, -1),
        "not idempotent"
    );
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!((bad.base_offset, bad.error_code), (None, Some(unknown)));
    assert_eq!(
        batches[1].entry.response.as_ref().unwrap().error_codes,
        vec![unknown]
    );
    let Some(RequestSummary::Produce(summary)) = &batches[0].entry.request else {
        panic!("a Produce summary expected: {:?}", batches[0].entry)
    };
    assert_eq!(
        (summary.acks, summary.timeout_ms),
        (1, kmock_client::PRODUCE_TIMEOUT_MS)
    );
    assert_eq!(
        batches[0].entry.client_id.as_deref(),
        Some(kmock_client::DEFAULT_CLIENT_ID)
    );
}

#[tokio::test]
async fn when_full_the_journal_drops_the_oldest_entries_and_counts_them() {
    let cluster = Cluster::builder()
        .journal_capacity(3)
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    for _ in 0..5 {
        client.api_versions().await.unwrap();
    }
    let journal = cluster.journal();
    let seqs: Vec<u64> = journal.entries().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [3, 4, 5]);
    assert_eq!(journal.evicted(), 2);
}

#[tokio::test]
async fn wait_for_times_out_with_the_last_entries_seen() {
    let cluster = Cluster::builder().start().await.unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    client.api_versions().await.unwrap();
    let err = cluster
        .wait_for(|e| e.is("Produce"), Duration::from_millis(100))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("\"api\":\"ApiVersions\""),
        "the message lists what arrived: {message}"
    );
}

#[tokio::test]
async fn the_sink_gets_every_entry_even_those_memory_no_longer_holds() {
    let sink = JsonlBuffer::default();
    let cluster = Cluster::builder()
        .topic("t", 1)
        .journal_capacity(2)
        .journal_jsonl(sink.clone())
        .start()
        .await
        .unwrap();
    let addr = cluster.brokers()[0].addr;
    let (waiting, busy) = (
        Client::connect(addr).await.unwrap(),
        Client::connect(addr).await.unwrap(),
    );
    // A long poll stays unanswered while five more requests push it out of memory.
    let (fetched, ()) = tokio::join!(
        waiting.fetch("t", 0, 0, Duration::from_millis(300)),
        async {
            for _ in 0..5 {
                busy.api_versions().await.unwrap();
            }
        }
    );
    fetched.unwrap();
    let journal = cluster.journal();
    assert_eq!(journal.entries().len(), 2);
    assert_eq!(journal.evicted(), 4);
    let written = sink.entries();
    let seqs: Vec<u64> = written.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        [1, 2, 3, 4, 5, 6],
        "every entry reaches the sink once complete"
    );
    let fetch = written.iter().find(|e| e.is("Fetch")).unwrap();
    assert!(
        fetch.response.is_some(),
        "the evicted Fetch was written with its answer: {fetch:?}"
    );
}

#[tokio::test]
async fn a_capacity_of_zero_keeps_nothing_in_memory_but_the_sink_gets_all() {
    let sink = JsonlBuffer::default();
    let cluster = Cluster::builder()
        .journal_capacity(0)
        .journal_jsonl(sink.clone())
        .start()
        .await
        .unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    for _ in 0..3 {
        client.api_versions().await.unwrap();
    }
    assert!(cluster.journal().entries().is_empty());
    assert_eq!(cluster.journal().evicted(), 3);
    assert_eq!(sink.entries().len(), 3);
}

/// An OffsetCommit from outside group management (generation -1) of `offset` to t-0.
fn commit(group: &str, offset: i64) -> kafka_protocol::messages::OffsetCommitRequest {
    common::requests::offset_commit(group, -1, "", "t", &[(0, offset)])
}

#[tokio::test]
async fn offset_commits_alternating_over_two_connections_come_back_in_send_order() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let addr = cluster.brokers()[0].addr;
    let (a, b) = (
        Client::connect(addr).await.unwrap(),
        Client::connect(addr).await.unwrap(),
    );
    let offsets = [12, 11, 30, 29, 31, 40];
    let mut sent = Vec::new();
    for (i, offset) in offsets.into_iter().enumerate() {
        let client = if i % 2 == 0 { &a } else { &b };
        let answer = client.send(commit("billing", offset), 8).await.unwrap();
        assert_eq!(
            answer.topics[0].partitions[0].error_code, 0,
            "commit {offset}"
        );
        sent.push((client.local_addr(), offset));
    }
    let commits = cluster.journal().offset_commits();
    let journaled: Vec<_> = commits
        .iter()
        .map(|c| (c.entry.peer, c.commit.offset))
        .collect();
    assert_eq!(
        journaled, sent,
        "(peer, offset) in journal order vs send order"
    );
    assert!(commits.iter().all(|c| c.group_id == "billing"
        && c.generation_id == -1
        && c.commit.error_code == Some(0)));
    let conns: Vec<u64> = commits.iter().map(|c| c.entry.conn).collect();
    assert!(
        conns.windows(2).all(|w| w[0] != w[1]),
        "alternating connections: {conns:?}"
    );
    assert_eq!(cluster.journal().group("billing").count(), offsets.len());
}

#[tokio::test]
async fn a_subscriber_receives_each_entry_once_complete_in_completion_order() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let mut completed = cluster.subscribe_journal();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    client
        .produce("t", 0, &[record(b"k", b"v")], -1)
        .await
        .unwrap();
    cluster.move_leader("t", 0, 1).unwrap(); // already the leader: an operation all the same
    let first = completed.recv().await.unwrap();
    assert!(first.is("Produce"), "{first:?}");
    assert!(first.response.is_some(), "sent before it was answered");
    let second = completed.recv().await.unwrap();
    assert!(second.operation.is_some(), "{second:?}");
    assert!(second.seq > first.seq);
    assert!(completed.try_recv().is_err(), "nothing else happened");
    cluster.shutdown().await;
}
