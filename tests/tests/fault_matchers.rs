//! Each fault-rule matcher picks exactly the requests it names, and no other: API versions,
//! broker, connection, client id, partition, transactional id and producer id, each checked
//! from the journal (every entry lists the rules applied to it); `times` fires on the matching
//! requests whose number lies in its range; a removed rule (`RuleHandle::remove`) no longer
//! fires, and says so when removed twice. The action is a zero delay, so only the matching is
//! under test.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use common::{broker_addr, same, text};
use kafka_protocol::messages::{
    ApiVersionsRequest, InitProducerIdRequest, MetadataRequest, TransactionalId,
};
use kafka_protocol::records::Record;
use kmock::{ApiKey, Cluster, Entry, Rule};
use kmock_client::{record, Client};

/// `rule` acting with a zero delay: it fires (and is journaled) without changing the answer.
fn noting(rule: Rule, name: &str) -> Rule {
    rule.named(name).delay(Duration::ZERO)
}

/// The rules applied to each entry of `api`, sorted, by seq.
fn faults_of(cluster: &Cluster, api: &str) -> Vec<Vec<String>> {
    cluster
        .journal()
        .api(api)
        .map(|e: &Entry| {
            // Each is journaled as "name: action".
            let mut faults: Vec<String> = e
                .faults
                .iter()
                .map(|f| {
                    f.split_once(": ")
                        .map_or(f.as_str(), |(name, _)| name)
                        .to_owned()
                })
                .collect();
            faults.sort();
            faults
        })
        .collect()
}

/// `names` as the sorted list [`faults_of`] gives.
fn applied(names: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn versions_broker_connection_and_client_id_each_match_only_their_requests() -> Result<()> {
    let cluster = Cluster::builder().brokers(2).start().await?;
    let x = Client::connect_with_client_id(broker_addr(&cluster, 1), "x").await?;
    let y = Client::connect_with_client_id(broker_addr(&cluster, 2), "y").await?;
    // y's connection id, from its first request.
    y.send(ApiVersionsRequest::default(), 0).await?;
    let y_conn = cluster
        .journal()
        .entries()
        .last()
        .expect("y's request")
        .conn;
    cluster.add_rule(noting(Rule::on(ApiKey::ApiVersions).versions(3..=3), "v3"))?;
    cluster.add_rule(noting(Rule::on(ApiKey::ApiVersions).broker(2), "broker-2"))?;
    cluster.add_rule(noting(
        Rule::on(ApiKey::ApiVersions).client_id("x"),
        "client-x",
    ))?;
    cluster.add_rule(noting(
        Rule::on(ApiKey::ApiVersions).connection(y_conn),
        "conn-y",
    ))?;
    let v3 = || {
        ApiVersionsRequest::default()
            .with_client_software_name(text("kmock-tests"))
            .with_client_software_version(text("1"))
    };
    x.send(v3(), 3).await?;
    x.send(ApiVersionsRequest::default(), 2).await?;
    y.send(v3(), 3).await?;
    y.send(ApiVersionsRequest::default(), 0).await?;
    // A second connection of client y to broker 2: not conn-y.
    let y2 = Client::connect_with_client_id(broker_addr(&cluster, 2), "y").await?;
    y2.send(ApiVersionsRequest::default(), 1).await?;
    same(
        "rules applied to each ApiVersions, in order",
        faults_of(&cluster, "ApiVersions"),
        vec![
            applied(&[]), // y's first, before the rules
            applied(&["v3", "client-x"]),
            applied(&["client-x"]),
            applied(&["v3", "broker-2", "conn-y"]),
            applied(&["broker-2", "conn-y"]),
            applied(&["broker-2"]),
        ],
    )?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn partition_producer_id_and_transactional_id_each_match_only_their_requests() -> Result<()> {
    let cluster = Cluster::builder()
        .topic("t", 2)
        .auto_create_topics(false)
        .start()
        .await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    cluster.add_rule(noting(
        Rule::on(ApiKey::Produce).topic("t").partition(1),
        "t-1",
    ))?;
    cluster.add_rule(noting(Rule::on(ApiKey::Produce).producer_id(8), "pid-8"))?;
    cluster.add_rule(noting(
        Rule::on(ApiKey::InitProducerId).transactional_id("tx-a"),
        "tx-a",
    ))?;
    let from = |producer_id: i64| Record {
        producer_id,
        producer_epoch: 0,
        sequence: 0,
        ..record(b"k", b"v")
    };
    client.produce("t", 0, &[record(b"k", b"v")], -1).await?;
    client.produce("t", 1, &[record(b"k", b"v")], -1).await?;
    client.produce("t", 0, &[from(7)], -1).await?;
    client.produce("t", 1, &[from(8)], -1).await?;
    same(
        "rules applied to each Produce, in order",
        faults_of(&cluster, "Produce"),
        vec![
            applied(&[]),
            applied(&["t-1"]),
            applied(&[]),
            applied(&["t-1", "pid-8"]),
        ],
    )?;
    for transactional_id in ["tx-a", "tx-b"] {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(text(transactional_id))))
            .with_transaction_timeout_ms(60_000);
        client.send(request, 4).await?;
    }
    same(
        "rules applied to each InitProducerId, in order",
        faults_of(&cluster, "InitProducerId"),
        vec![applied(&["tx-a"]), applied(&[])],
    )?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn times_fires_on_the_matches_in_its_range_and_a_removed_rule_fires_no_more() -> Result<()> {
    let cluster = Cluster::builder().start().await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let second_and_third =
        cluster.add_rule(noting(Rule::on(ApiKey::Metadata).times(2..=3), "2nd-3rd"))?;
    let removable = cluster.add_rule(noting(Rule::on(ApiKey::Metadata), "removable"))?;
    let metadata = || MetadataRequest::default().with_topics(Some(Vec::new()));
    for _ in 0..2 {
        client.send(metadata(), 12).await?;
    }
    assert!(removable.remove(), "the rule was in force");
    assert!(!removable.remove(), "a second remove finds no rule");
    for _ in 0..2 {
        client.send(metadata(), 12).await?;
    }
    same(
        "rules applied to each Metadata, in order",
        faults_of(&cluster, "Metadata"),
        vec![
            applied(&["removable"]),
            applied(&["2nd-3rd", "removable"]),
            applied(&["2nd-3rd"]),
            applied(&[]),
        ],
    )?;
    let counts: BTreeMap<String, (u64, u64)> = cluster
        .rules()
        .into_iter()
        .map(|r| (r.name, (r.matched, r.fired)))
        .collect();
    same(
        "the rules in force, (matched, fired)",
        counts,
        BTreeMap::from([("2nd-3rd".to_owned(), (4, 2))]),
    )?;
    same(
        "the handle's counts",
        (second_and_third.matched(), second_and_third.fired()),
        (4, 2),
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// A `topic` rule on Metadata fires on a request naming the topic, and on a request for all
/// topics (`null`, or an empty list at v0, which Kafka answers with every topic); not on one
/// naming only other topics, nor on an empty list at v1+ (no topic at all).
#[tokio::test]
async fn a_topic_matcher_matches_metadata_naming_the_topic_or_all_topics() -> Result<()> {
    let cluster = Cluster::builder()
        .topic("t", 1)
        .topic("u", 1)
        .auto_create_topics(false)
        .start()
        .await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    cluster.add_rule(noting(Rule::on(ApiKey::Metadata).topic("t"), "t"))?;
    client.metadata(Some(&["t"])).await?;
    client.metadata(Some(&["u"])).await?;
    client.metadata(Some(&["u", "t"])).await?;
    client.metadata(None).await?;
    client
        .send(MetadataRequest::default().with_topics(Some(Vec::new())), 12)
        .await?;
    client
        .send(MetadataRequest::default().with_topics(Some(Vec::new())), 0)
        .await?;
    same(
        "rules applied to each Metadata, in order",
        faults_of(&cluster, "Metadata"),
        vec![
            applied(&["t"]),
            applied(&[]),
            applied(&["t"]),
            applied(&["t"]),
            applied(&[]),
            applied(&["t"]),
        ],
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// An error rule with a `topic` on Metadata puts its error on that topic only: a request for
/// all topics, or naming others too, still lists the others as kmock knows them (with their
/// partitions), as a Kafka broker that cannot serve one topic still lists the rest. A rule
/// without `topic` errs every topic listed.
#[tokio::test]
async fn a_metadata_error_rule_with_a_topic_errs_that_topic_only() -> Result<()> {
    let cluster = Cluster::builder()
        .topic("t", 1)
        .topic("u", 2)
        .auto_create_topics(false)
        .start()
        .await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let only_t = cluster.add_rule(
        Rule::on(ApiKey::Metadata)
            .topic("t")
            .error(kmock::ResponseError::LeaderNotAvailable),
    )?;
    // (topic, error code, partitions) of each topic listed, sorted by name.
    let listed = |answer: kafka_protocol::messages::MetadataResponse| {
        let mut topics: Vec<(String, i16, usize)> = answer
            .topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map_or("?", |n| n.0.as_str()).to_owned();
                (name, t.error_code, t.partitions.len())
            })
            .collect();
        topics.sort();
        topics
    };
    let errs_t = vec![("t".to_owned(), 5, 0), ("u".to_owned(), 0, 2)];
    same(
        "all topics",
        listed(client.metadata(None).await?),
        errs_t.clone(),
    )?;
    same(
        "u and t named",
        listed(client.metadata(Some(&["u", "t"])).await?),
        errs_t,
    )?;
    same(
        "u alone (the rule does not match)",
        listed(client.metadata(Some(&["u"])).await?),
        vec![("u".to_owned(), 0, 2)],
    )?;
    only_t.remove();
    cluster.add_rule(Rule::on(ApiKey::Metadata).error(kmock::ResponseError::LeaderNotAvailable))?;
    same(
        "all topics, a rule without topic",
        listed(client.metadata(None).await?),
        vec![("t".to_owned(), 5, 0), ("u".to_owned(), 5, 0)],
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// `add_rule` refuses a rule whose matchers can never match a request of its API, naming the
/// matcher and the API, and puts nothing in force.
#[tokio::test]
async fn a_rule_that_could_never_fire_is_refused_by_add_rule() -> Result<()> {
    let cluster = Cluster::builder().start().await?;
    let silenced = |rule: Rule| rule.silence();
    for (rule, says) in [
        (
            Rule::on(ApiKey::Produce).group("g"),
            "the `group` matcher can never match Produce: Produce requests carry no group",
        ),
        (
            Rule::on(ApiKey::FindCoordinator).partition(0),
            "the `partition` matcher can never match FindCoordinator",
        ),
        (
            Rule::on(ApiKey::Metadata).topic("t").partition(0),
            "the `partition` matcher can never match Metadata",
        ),
        (
            Rule::on(ApiKey::Fetch).versions(..=3),
            "kmock implements Fetch 4–",
        ),
        (
            Rule::on(ApiKey::Fetch)
                .after(Duration::from_secs(2))
                .until(Duration::from_secs(2)),
            "an empty window",
        ),
    ] {
        let refused = cluster.add_rule(silenced(rule)).map(|h| h.id());
        let message = match refused {
            Err(kmock::Error::Config(message)) => message,
            other => panic!("{says}: got {other:?}"),
        };
        assert!(message.contains(says), "{message}");
    }
    same("rules in force", cluster.rules(), Vec::new())?;
    cluster.shutdown().await;
    Ok(())
}
