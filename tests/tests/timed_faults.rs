//! Timed fault rules (`after`, `until`) on Tokio's paused clock (`start_paused`): the window is
//! judged at each request's arrival on the clock the journal's `at_us` reads, so a request sent
//! at an instant of the paused clock arrives at exactly that instant (the sockets are real
//! loopback sockets: a request written to one is readable at once, and the clock moves only
//! when every task waits for a timer). Each test checks the answers, the journal's `faults`
//! and `at_us`, and the rule's counters, all exact.

mod common;

use std::time::Duration;

use anyhow::Result;
use common::{err, same};
use kmock::{ApiKey, Cluster, ResponseError, Rule, RuleStats};
use kmock_client::Client;
use tokio::time::{sleep_until, Instant};

const MS: Duration = Duration::from_millis(1);

/// A cluster with topic `t` (auto-creation off) and a client of its broker.
async fn cluster() -> Result<(Cluster, Client)> {
    let cluster = Cluster::builder()
        .topic("t", 1)
        .auto_create_topics(false)
        .start()
        .await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    Ok((cluster, client))
}

/// Sends a Metadata request for `t` at `at` on the paused clock; the error its answer gives `t`.
async fn metadata_at(client: &Client, at: Instant) -> Result<String> {
    sleep_until(at).await;
    let answer = client.metadata(Some(&["t"])).await?;
    Ok(err(answer.topics[0].error_code))
}

/// Each Metadata entry's `at_us` with the names of the rules applied to it.
fn metadata_entries(cluster: &Cluster) -> Vec<(u64, Vec<String>)> {
    cluster
        .journal()
        .api("Metadata")
        .map(|e| {
            let names = e
                .faults
                .iter()
                .map(|f| f.split_once(": ").map_or(f.as_str(), |(n, _)| n).to_owned())
                .collect();
            (e.at_us, names)
        })
        .collect()
}

/// The rule named `name` among those in force.
fn stats(cluster: &Cluster, name: &str) -> RuleStats {
    cluster
        .rules()
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no rule {name} in force"))
}

/// An outage from 1 s to 2.5 s after the rule is added: the Metadata requests that arrive
/// from 1 s on and before 2.5 s get LEADER_NOT_AVAILABLE, the others their topic; the
/// journal's `at_us` of the faulted ones lies in the window `GET /rules` shows.
#[tokio::test(start_paused = true)]
async fn an_outage_fires_from_after_until_until_and_on_no_other_request() -> Result<()> {
    let (cluster, client) = cluster().await?;
    let outage = cluster.add_rule(
        Rule::on(ApiKey::Metadata)
            .topic("t")
            .named("outage")
            .after(1000 * MS)
            .until(2500 * MS)
            .error(ResponseError::LeaderNotAvailable),
    )?;
    // The clock has not moved since the rule was added.
    let added = Instant::now();
    let sent_ms = [0, 999, 1000, 1750, 2499, 2500, 4000];
    let mut answers = Vec::new();
    for ms in sent_ms {
        answers.push((ms, metadata_at(&client, added + ms * MS).await?));
    }
    let none = err(0);
    let down = err(ResponseError::LeaderNotAvailable.code());
    same(
        "each Metadata's answer for t, by ms after the rule was added",
        answers,
        vec![
            (0, none.clone()),
            (999, none.clone()),
            (1000, down.clone()),
            (1750, down.clone()),
            (2499, down),
            (2500, none.clone()),
            (4000, none),
        ],
    )?;
    let window = stats(&cluster, "outage");
    let (from, until) = (
        window.from_at_us.expect("a window start"),
        window.until_at_us.expect("a window end"),
    );
    same("the window's length, µs", until - from, 1_500_000)?;
    // The rule was added at from − 1 s on the journal's clock.
    let added_us = from - 1_000_000;
    let journaled: Vec<(u64, Vec<String>)> = metadata_entries(&cluster)
        .into_iter()
        .map(|(at_us, faults)| (at_us - added_us, faults))
        .collect();
    let outage_name = || vec!["outage".to_owned()];
    same(
        "each Metadata entry, µs after the rule was added, and its faults",
        journaled,
        vec![
            (0, vec![]),
            (999_000, vec![]),
            (1_000_000, outage_name()),
            (1_750_000, outage_name()),
            (2_499_000, outage_name()),
            (2_500_000, vec![]),
            (4_000_000, vec![]),
        ],
    )?;
    same(
        "the rule's (matched, fired)",
        (outage.matched(), outage.fired()),
        (3, 3),
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// Outside its window a rule does not count: `after(1 s).first(2)` fires on the first two
/// requests from 1 s on, not on the first two overall, and `until(500 ms).every(2)` sees only
/// the two requests before 500 ms.
#[tokio::test(start_paused = true)]
async fn a_rule_outside_its_window_neither_matches_nor_counts_its_times() -> Result<()> {
    let (cluster, client) = cluster().await?;
    let late = cluster.add_rule(
        Rule::on(ApiKey::Metadata)
            .named("late")
            .after(1000 * MS)
            .first(2)
            .delay(Duration::ZERO),
    )?;
    let early = cluster.add_rule(
        Rule::on(ApiKey::Metadata)
            .named("early")
            .until(500 * MS)
            .every(2)
            .delay(Duration::ZERO),
    )?;
    let added = Instant::now();
    for ms in [0, 300, 600, 1000, 1100, 1200] {
        let answer = metadata_at(&client, added + ms * MS).await?;
        same("t's error", answer, err(0))?;
    }
    let faults: Vec<Vec<String>> = metadata_entries(&cluster)
        .into_iter()
        .map(|(_, f)| f)
        .collect();
    let named = |n: &str| vec![n.to_owned()];
    same(
        "the rules applied to each Metadata, at 0, 300, 600, 1000, 1100, 1200 ms",
        faults,
        vec![
            vec![],
            named("early"),
            vec![],
            named("late"),
            named("late"),
            vec![],
        ],
    )?;
    same(
        "late's (matched, fired)",
        (late.matched(), late.fired()),
        (3, 2),
    )?;
    same(
        "early's (matched, fired)",
        (early.matched(), early.fired()),
        (2, 1),
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// A rule added 500 ms after the cluster started with `until(1 s)` is in force until 1.5 s
/// after the start; with `from_cluster_start()` (a scenario's rules), until 1 s after it.
#[tokio::test(start_paused = true)]
async fn a_window_counts_from_the_rule_or_from_the_cluster_start() -> Result<()> {
    // The journal's at_us 0: the clock does not move while the cluster starts.
    let started = Instant::now();
    let (cluster, client) = cluster().await?;
    sleep_until(started + 500 * MS).await;
    cluster.add_rule(
        Rule::on(ApiKey::Metadata)
            .named("from-rule")
            .until(1000 * MS)
            .delay(Duration::ZERO),
    )?;
    cluster.add_rule(
        Rule::on(ApiKey::Metadata)
            .named("from-start")
            .until(1000 * MS)
            .from_cluster_start()
            .delay(Duration::ZERO),
    )?;
    same(
        "the windows' ends, µs after the cluster started",
        (
            stats(&cluster, "from-rule").until_at_us,
            stats(&cluster, "from-start").until_at_us,
        ),
        (Some(1_500_000), Some(1_000_000)),
    )?;
    for ms in [900, 1200] {
        metadata_at(&client, started + ms * MS).await?;
    }
    let both = vec!["from-rule".to_owned(), "from-start".to_owned()];
    same(
        "each Metadata entry's at_us and faults",
        metadata_entries(&cluster),
        vec![(900_000, both), (1_200_000, vec!["from-rule".to_owned()])],
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// A window end beyond what µs since the start can count (`u64::MAX` µs, half a million years)
/// is never reached: the rule stays in force, and its window reads `u64::MAX`, not a wrapped
/// number before its start.
#[tokio::test(start_paused = true)]
async fn a_window_end_beyond_the_clock_is_never_reached() -> Result<()> {
    let (cluster, client) = cluster().await?;
    let start = Instant::now();
    let handle = cluster.add_rule(
        Rule::on(ApiKey::Metadata)
            .named("forever")
            .after(MS)
            .until(Duration::from_secs(u64::MAX / 1_000))
            .error(ResponseError::LeaderNotAvailable),
    )?;
    same(
        "the error inside the window",
        metadata_at(&client, start + 2 * MS).await?,
        err(ResponseError::LeaderNotAvailable.code()),
    )?;
    same("fired", handle.fired(), 1)?;
    let stats: Vec<RuleStats> = cluster.rules();
    same("the window's end", stats[0].until_at_us, Some(u64::MAX))?;
    cluster.shutdown().await;
    Ok(())
}
