//! Proxy mode in front of the real Apache Kafka 4.4 (the one `.ci/run` started,
//! `KMOCK_KAFKA_BOOTSTRAP`, or one started here with `fixtures/kafka/kafka.sh`; as for the
//! conformance tests, a missing Java or Maven fails these tests instead of skipping them):
//! librdkafka produces, consumes and commits in a group through the proxy with the journal
//! and checks clean, an answer lost after forwarding is retried and deduplicated by Kafka, and
//! the fake-only operations are refused. Each test uses topic and group names of its own.

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::proxy::{create_topic, fresh, proxy};
use kmock::{ApiKey, Checks, Rule};
use kmock_tests::real_kafka::RealKafka;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::FutureProducer;
use rdkafka::Message;

const PARTITIONS: i32 = 3;
const MESSAGES: usize = 3_000;
/// A hang guard only: reading what was produced takes about a second.
const PATIENCE: Duration = Duration::from_secs(120);

fn idempotent_producer(bootstrap: &str) -> Result<FutureProducer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_produces_consumes_and_commits_in_a_group_through_the_proxy() -> Result<()> {
    let kafka = RealKafka::start()?;
    let proxy = proxy(kafka.bootstrap()).await?;
    let bootstrap = proxy.bootstrap();
    let topic = fresh("proxy-roundtrip");
    let group = fresh("proxy-group");
    create_topic(&bootstrap, &topic, PARTITIONS).await?;

    // Every broker the client learns of is one of the proxy's listeners.
    let metadata: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()?;
    let listed = metadata.fetch_metadata(Some(&topic), Duration::from_secs(30))?;
    let mut advertised: Vec<String> = listed
        .brokers()
        .iter()
        .map(|b| format!("{}:{}", b.host(), b.port()))
        .collect();
    advertised.sort();
    let mut listeners: Vec<String> = proxy.brokers().iter().map(|b| b.addr.to_string()).collect();
    listeners.sort();
    ensure!(
        advertised == listeners,
        "Metadata through the proxy lists {advertised:?}, expected the proxy's listeners {listeners:?}"
    );

    let producer = idempotent_producer(&bootstrap)?;
    let produced = kmock_tests::produce_numbered(
        &producer,
        &topic,
        PARTITIONS,
        MESSAGES,
        (MESSAGES, Duration::ZERO),
    )
    .await?;

    // A group member reads everything and commits where it got to.
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()?;
    consumer.subscribe(&[&topic])?;
    let mut consumed = 0;
    while consumed < MESSAGES {
        let message = tokio::time::timeout(PATIENCE, consumer.recv())
            .await
            .with_context(|| {
                format!("the group member read {consumed} of {MESSAGES} messages")
            })??;
        ensure!(message.topic() == topic, "a message of {}", message.topic());
        consumed += 1;
    }
    consumer.commit_consumer_state(CommitMode::Sync)?;
    consumer.unsubscribe();

    let stored = kmock_tests::read_log(&bootstrap, &topic, PARTITIONS, PATIENCE).await?;
    kmock_tests::exactly_once_in_order(&stored, &produced, |_, _| String::new())?;

    // Every connection ends with the proxy: every journal entry is complete.
    drop((producer, consumer, metadata));
    proxy.shutdown().await;
    let journal = proxy.journal();
    let batches: Vec<_> = journal
        .produce_batches()
        .into_iter()
        .filter(|b| *b.batch.topic == *topic)
        .collect();
    let records: i32 = batches.iter().map(|b| b.batch.record_count).sum();
    ensure!(
        records as usize == MESSAGES,
        "the journal's Produce batches hold {records} records, {MESSAGES} were produced"
    );
    ensure!(
        batches
            .iter()
            .all(|b| b.batch.producer_id >= 0 && b.batch.error_code == Some(0)),
        "every batch idempotent and accepted by Kafka: {:?}",
        batches
            .iter()
            .map(|b| (b.batch.producer_id, b.batch.error_code))
            .collect::<Vec<_>>()
    );
    let apis = |api: &str| {
        journal
            .entries()
            .iter()
            .filter(|e| e.api.as_deref() == Some(api) && e.response.is_some())
            .count()
    };
    for api in [
        "JoinGroup",
        "SyncGroup",
        "OffsetCommit",
        "Fetch",
        "InitProducerId",
    ] {
        ensure!(apis(api) > 0, "no answered {api} in the proxy's journal");
    }
    let bad: Vec<_> = journal
        .entries()
        .iter()
        .filter(|e| e.bad_request.is_some())
        .collect();
    ensure!(bad.is_empty(), "bad requests: {bad:?}");
    proxy.check(&Checks::default()).assert_clean();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_lost_after_forwarding_is_retried_and_kafka_keeps_the_batch_once() -> Result<()> {
    const SENT: usize = 20;
    let kafka = RealKafka::start()?;
    let proxy = proxy(kafka.bootstrap()).await?;
    let bootstrap = proxy.bootstrap();
    let topic = fresh("proxy-lost-answer");
    create_topic(&bootstrap, &topic, 1).await?;
    // Kafka appends the first Produce; its answer is lost when the proxy closes the connection.
    let lost = proxy.add_rule(
        Rule::on(ApiKey::Produce)
            .topic(&topic)
            .nth(1)
            .disconnect_after_apply()
            .expect(1),
    )?;

    let producer = idempotent_producer(&bootstrap)?;
    let produced =
        kmock_tests::produce_numbered(&producer, &topic, 1, SENT, (SENT, Duration::ZERO)).await?;
    let stored = kmock_tests::read_log(&bootstrap, &topic, 1, PATIENCE).await?;
    kmock_tests::exactly_once_in_order(&stored, &produced, |_, _| String::new())?;

    // Every connection ends with the proxy: every journal entry is complete.
    drop(producer);
    proxy.shutdown().await;
    let batches: Vec<_> = proxy
        .journal()
        .produce_batches()
        .into_iter()
        .filter(|b| *b.batch.topic == *topic)
        .collect();
    let first = batches
        .first()
        .context("no Produce to the topic journaled")?;
    ensure!(
        first.entry.faults.len() == 1,
        "the first Produce carries the fault: {:?}",
        first.entry.faults
    );
    ensure!(
        first.entry.response.is_none(),
        "the first Produce's answer was lost, yet the journal has {:?}",
        first.entry.response
    );
    ensure!(
        first.entry.closed.as_deref() == Some("fault: disconnect after forwarding"),
        "the first Produce's entry says why its connection closed: {:?}",
        first.entry.closed
    );
    // The producer sent the same batch again (same producer id, epoch and sequence) on a new
    // connection, and Kafka answered it as the duplicate it is: at offset 0, stored once.
    let retry = batches[1..]
        .iter()
        .find(|b| {
            (
                b.batch.producer_id,
                b.batch.producer_epoch,
                b.batch.base_sequence,
            ) == (
                first.batch.producer_id,
                first.batch.producer_epoch,
                first.batch.base_sequence,
            )
        })
        .with_context(|| format!("no retry of the lost batch among {batches:?}"))?;
    ensure!(
        retry.entry.conn != first.entry.conn
            && retry.batch.record_count == first.batch.record_count
            && retry.batch.error_code == Some(0)
            && retry.batch.base_offset == Some(0),
        "the retry {:?} of the lost batch {:?}: expected the same records on a new connection, accepted at offset 0",
        retry.batch,
        first.batch
    );
    ensure!(lost.fired() == 1, "the rule fired {} times", lost.fired());
    proxy.verify()?;
    proxy.check(&Checks::default()).assert_clean();
    Ok(())
}

#[tokio::test]
async fn a_proxy_refuses_fake_only_operations_and_takes_its_listener_down() -> Result<()> {
    let kafka = RealKafka::start()?;
    let proxy = proxy(kafka.bootstrap()).await?;
    let broker = proxy.brokers()[0].clone();
    let refused = [
        proxy.create_topic("t", 1).map(|_| ()),
        proxy.move_leader("t", 0, broker.node_id),
        proxy.move_coordinator("g", broker.node_id),
        proxy.move_transaction_coordinator("tx", broker.node_id),
    ];
    for result in refused {
        let e = result.err().context("a fake-only operation went through")?;
        ensure!(
            e.to_string().contains("fake-only operation"),
            "refused with {e}"
        );
    }
    proxy.broker_down(broker.node_id).await?;
    ensure!(
        tokio::net::TcpStream::connect(broker.addr).await.is_err(),
        "the listener of a broker down still accepts"
    );
    proxy.broker_up(broker.node_id).await?;
    let client = kmock_client::Client::connect(broker.addr).await?;
    let answer = client.metadata(Some(&[])).await?;
    let brokers: Vec<_> = answer
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    ensure!(
        brokers
            == [(
                broker.node_id,
                broker.addr.ip().to_string(),
                i32::from(broker.addr.port())
            )],
        "Metadata through the proxy after the broker came back: {brokers:?}"
    );
    let ops: Vec<_> = proxy
        .journal()
        .entries()
        .iter()
        .filter_map(|e| e.operation.clone())
        .collect();
    ensure!(ops.len() == 2, "journaled operations: {ops:?}");
    proxy.shutdown().await;
    Ok(())
}

/// ApiVersions one version past the codec's (v6, the codec reading v5): the proxy cannot
/// decode it, forwards it untouched and journals what its header says; the client gets Kafka's
/// own verdict (Kafka 4.4 answers v6 with the v0 UNSUPPORTED_VERSION answer, KIP-511).
#[tokio::test]
async fn a_request_the_codec_cannot_decode_is_forwarded_and_kafka_s_verdict_kept() -> Result<()> {
    let kafka = RealKafka::start()?;
    let proxy = proxy(kafka.bootstrap()).await?;
    let newer = ApiKey::ApiVersions.valid_versions().max + 1;
    // Client software name and version (compact strings), no tagged fields.
    let mut body = vec![11];
    body.extend(b"kmock-test");
    body.extend([2, b'1', 0]);
    let send = |addr: String| {
        let body = body.clone();
        async move {
            let client = kmock_client::Client::connect(addr).await?;
            let answer = client
                .send_frame(ApiKey::ApiVersions as i16, newer, 2, 0, &body)
                .await;
            anyhow::Ok(answer.map(|_| ()).map_err(|e| e.to_string()))
        }
    };
    let direct = send(kafka.bootstrap().to_owned()).await?;
    let proxied = send(proxy.brokers()[0].addr.to_string()).await?;
    ensure!(
        proxied == direct,
        "ApiVersions v{newer}: through the proxy {proxied:?}, from Kafka directly {direct:?}"
    );
    proxy.shutdown().await;
    let journal = proxy.journal();
    let entry = journal
        .entries()
        .iter()
        .find(|e| e.version == Some(newer))
        .context("no entry for the undecodable ApiVersions")?;
    ensure!(
        entry.api.as_deref() == Some("ApiVersions") && entry.bad_request.is_none(),
        "journaled as {entry:?}"
    );
    Ok(())
}
