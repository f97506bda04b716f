//! KIP-848 subscriptions by regular expression (`SubscribedTopicRegex`), resolved by the
//! coordinator against the cluster's topics as Kafka 4.4 resolves them: on the wire with
//! kmock-client (a regex that does not compile is INVALID_REGULAR_EXPRESSION and creates
//! nothing; one that does assigns exactly the topics whose whole name it matches), and with
//! librdkafka subscribing to `^orders-.*` with `group.protocol=consumer`, where a topic
//! created later joins the member's assignment (within Kafka's 10 s batch interval for
//! resolving regexes again) and a topic the pattern does not match is never consumed.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::consumer_group::{said, send};
use common::member::{wait_members, Member, SETTLE_TIMEOUT};
use common::{same, text};
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, GroupId};
use kafka_protocol::ResponseError;
use kmock::journal::RequestSummary;
use kmock::{Checks, Cluster};
use kmock_client::Client;
use kmock_tests::consumer_group::{beat, join};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

const GROUP: &str = "g";

/// A join subscribing by `regex` only.
fn join_by_regex(
    member: &str,
    regex: &str,
) -> kafka_protocol::messages::ConsumerGroupHeartbeatRequest {
    join(GROUP, member, &[])
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(text(regex)))
}

#[tokio::test]
async fn a_regex_that_does_not_compile_is_refused_and_one_that_does_assigns_the_topics_it_matches(
) -> Result<()> {
    // Every change gets its target at once (Kafka 4.4 computes one at most every second).
    let cluster = Cluster::builder()
        .topic("orders-a", 2)
        .topic("xorders-b", 2)
        .topic("payments", 2)
        .consumer_group_assignment_interval(Duration::ZERO)
        .start()
        .await?;
    let c = Client::connect(cluster.brokers()[0].addr).await?;
    let ids = c
        .metadata(Some(&["orders-a", "xorders-b", "payments"]))
        .await?;
    let orders = ids.topics[0].topic_id;
    let describe = || {
        c.send(
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(GROUP))]),
            0,
        )
    };

    // A join with a regex that does not compile: Kafka's error and message; no group made.
    let bad = send(&c, join_by_regex("member-a", "orders-(")).await?;
    same(
        "a bad regex's error code",
        bad.error_code,
        ResponseError::InvalidRegularExpression.code(),
    )?;
    let message = bad
        .error_message
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default();
    ensure!(
        message.starts_with("SubscribedTopicRegex `orders-(` is not a valid regular expression: "),
        "a bad regex's message: {message:?}"
    );
    let d = describe().await?;
    same(
        "the group after the refused join",
        d.groups[0].error_code,
        ResponseError::GroupIdNotFound.code(),
    )?;

    // `orders-.*` matches a whole name: orders-a, not xorders-b, not payments.
    // As in Kafka, the join starts the resolution and gets nothing; the next heartbeat gets
    // what it resolved to.
    let a = send(&c, join_by_regex("member-a", "orders-.*")).await?;
    ensure!(
        a.error_code == 0
            && a.assignment
                .as_ref()
                .is_some_and(|x| x.topic_partitions.is_empty()),
        "A's join: {}",
        said(&a)
    );
    let a = send(&c, beat(GROUP, "member-a", a.member_epoch, orders, None)).await?;
    ensure!(a.error_code == 0, "A's next heartbeat: {}", said(&a));
    let assigned: BTreeSet<_> = a
        .assignment
        .iter()
        .flat_map(|x| &x.topic_partitions)
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    same(
        "A's assignment",
        assigned,
        BTreeSet::from([(orders, 0), (orders, 1)]),
    )?;

    // A second member with a bad regex is refused; the group keeps its one member, whose
    // regex ConsumerGroupDescribe shows.
    let b = send(&c, join_by_regex("member-b", "[z-a]")).await?;
    same(
        "B's bad regex's error code",
        b.error_code,
        ResponseError::InvalidRegularExpression.code(),
    )?;
    let d = describe().await?;
    let members: Vec<(String, Option<String>)> = d.groups[0]
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.subscribed_topic_regex.as_ref().map(|r| r.to_string()),
            )
        })
        .collect();
    same(
        "the group's members and regexes",
        members,
        vec![("member-a".to_owned(), Some("orders-.*".to_owned()))],
    )?;
    cluster.check(&Checks::default()).assert_clean();
    Ok(())
}

/// Produces `numbers` to `topic`, each acknowledged.
async fn produce(
    producer: &FutureProducer,
    topic: &str,
    numbers: std::ops::Range<usize>,
) -> Result<()> {
    for n in numbers {
        let value = n.to_string();
        producer
            .send(
                FutureRecord::<(), _>::to(topic).payload(&value),
                Duration::from_secs(30),
            )
            .await
            .map_err(|(e, _)| e)
            .with_context(|| format!("producing {n} to {topic}"))?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_subscribed_by_pattern_consumes_a_topic_created_later() -> Result<()> {
    // Heartbeats every 500 ms (Kafka's default is 5 s), so the member learns of changes soon.
    let cluster = Cluster::builder()
        .topic("orders-a", 3)
        .topic("payments", 2)
        .consumer_group_heartbeat_interval(Duration::from_millis(500))
        .start()
        .await?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("linger.ms", "0")
        .create()?;
    produce(&producer, "orders-a", 0..30).await?;
    produce(&producer, "payments", 1_000..1_010).await?;
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", cluster.bootstrap())
        .set("group.id", GROUP)
        .set("group.protocol", "consumer")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("topic.metadata.refresh.interval.ms", "1000");
    let member = Member::start(config, "^orders-.*", "consumer-1", Some(1))?;
    wait_members(
        "orders-a consumed",
        &[&member],
        SETTLE_TIMEOUT,
        |_, consumed| (0..30).all(|n| consumed[0].contains(&n)),
    )
    .await?;

    // A topic the pattern matches, created now: the coordinator resolves the regex again
    // (within 10 s) and assigns it; its messages are consumed.
    cluster.create_topic("orders-b", 2)?;
    produce(&producer, "orders-b", 30..60).await?;
    wait_members(
        "orders-b consumed",
        &[&member],
        SETTLE_TIMEOUT,
        |_, consumed| (30..60).all(|n| consumed[0].contains(&n)),
    )
    .await?;
    let consumed = member.consumed();
    let errors = member.close();
    ensure!(
        consumed.iter().all(|n| *n < 60),
        "messages of payments consumed: {:?}",
        consumed.iter().filter(|n| **n >= 60).collect::<Vec<_>>()
    );

    // What librdkafka sent: its pattern as the regex, no topic names.
    let journal = cluster.journal();
    let regexes: BTreeSet<Option<String>> = journal
        .api("ConsumerGroupHeartbeat")
        .filter_map(|e| match &e.request {
            Some(RequestSummary::ConsumerGroupHeartbeat(h)) => {
                Some(h.subscribed_topic_regex.clone())
            }
            _ => None,
        })
        .collect();
    println!("regexes sent: {regexes:?}; client errors: {errors:?}");
    ensure!(
        regexes.iter().flatten().any(|r| r.contains("orders-")),
        "no heartbeat carried the pattern: {regexes:?}"
    );
    let report = cluster.check(&Checks::default());
    ensure!(report.is_clean(), "checks: {report:?}");
    Ok(())
}
