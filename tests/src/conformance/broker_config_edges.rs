//! Kafka's checks of dynamic broker configs against their current value: thread counts within
//! half and double of the effective value (a stored one included), `log.retention.ms` of 0, and
//! the SSL and SASL configs only a broker's own resource may set. Every change but one is
//! `validate_only`; the one applied is deleted again, so the real broker stays as it was for
//! later cases.

use anyhow::Result;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;

use super::alter_configs::{incremental, Ops, DELETE, SET};
use super::config_edges::each;
use super::configs::BROKER;
use super::{case, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(incremental_alter_configs_broker_thread_counts_and_retention),
    case!(incremental_alter_configs_ssl_and_sasl_configs_at_cluster_level),
    case!(incremental_alter_configs_thread_counts_from_a_stored_value),
];

/// Thread counts relative to the current value (Kafka refuses less than half or more than twice
/// it), and `log.retention.ms` of 0, at broker 1 and the cluster level, each `validate_only`
/// against the fixture's defaults (8 I/O threads, 3 network threads, 1 cleaner thread).
async fn incremental_alter_configs_broker_thread_counts_and_retention(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for (key, value) in [
        ("num.io.threads", "100"),
        ("num.io.threads", "16"),
        ("num.io.threads", "3"),
        ("num.network.threads", "7"),
        ("num.network.threads", "6"),
        ("num.replica.fetchers", "3"),
        ("background.threads", "21"),
        ("num.recovery.threads.per.data.dir", "4"),
        ("log.cleaner.threads", "3"),
        ("log.retention.ms", "0"),
        ("log.retention.ms", "-1"),
        ("log.retention.ms", "-2"),
    ] {
        let ops: Ops = &[(key, SET, Some(value))];
        lines.push(format!("{key}={value}:"));
        lines.extend(each(&cx, BROKER, &[("1", ops), ("", ops)]).await?);
    }
    Ok(lines)
}

/// `num.io.threads` set to 16 on broker 1, then (`validate_only`) moved from there on broker 1
/// and at the cluster level (where broker 1's own value stays in force), then deleted again so
/// that the real broker is as it was.
async fn incremental_alter_configs_thread_counts_from_a_stored_value(cx: Ctx) -> Result<Lines> {
    let key = "num.io.threads";
    let client = cx.connect().await?;
    let mut lines = incremental(
        &cx,
        &client,
        1,
        false,
        &[(BROKER, "1", &[(key, SET, Some("16"))])],
    )
    .await?;
    io_threads_become(&cx, &client, Some("16")).await?;
    for (resource, value) in [("1", "32"), ("1", "33"), ("1", "7"), ("", "100"), ("", "3")] {
        lines.push(format!("{resource:?} {key}={value}:"));
        let ops: Ops = &[(key, SET, Some(value))];
        lines.extend(each(&cx, BROKER, &[(resource, ops)]).await?);
    }
    let delete: Ops = &[(key, DELETE, None)];
    lines.extend(incremental(&cx, &client, 1, false, &[(BROKER, "1", delete)]).await?);
    io_threads_become(&cx, &client, None).await?;
    Ok(lines)
}

/// Waits until broker 1 describes `num.io.threads` as a dynamic broker config of `value`
/// (`None`: not a dynamic one any more): Kafka's broker applies a change after it answers.
async fn io_threads_become(
    cx: &Ctx,
    client: &kmock_client::Client,
    value: Option<&str>,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(BROKER)
                .with_resource_name(text("1"))
                .with_configuration_keys(Some(vec![text("num.io.threads")])),
        ]);
        let answer = client.send(request, 4).await?;
        let dynamic = answer
            .results
            .iter()
            .flat_map(|r| &r.configs)
            .find(|c| c.config_source == 2)
            .and_then(|c| c.value.as_ref().map(|v| v.to_string()));
        if dynamic.as_deref() == value {
            return Ok(());
        }
        // Hang guard only (the case's own is longer): the change never applied.
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "num.io.threads never became {value:?} ({dynamic:?}, {cx:?})"
        );
        // Polling, the only way a client learns a broker applied a change.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// SSL and SASL configs that only a broker's own resource may set, at the cluster level and on
/// broker 1 (whose listeners are all PLAINTEXT), and `max.connections`, which the cluster level
/// may set.
async fn incremental_alter_configs_ssl_and_sasl_configs_at_cluster_level(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for (key, value) in [
        ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256"),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("principal.builder.class", "x.Y"),
        ("ssl.protocol", "TLSv1.3"),
        ("ssl.client.auth", "required"),
        ("sasl.kerberos.service.name", "kafka"),
        ("sasl.login.refresh.window.factor", "0.9"),
        ("max.connections", "1000"),
    ] {
        let ops: Ops = &[(key, SET, Some(value))];
        lines.push(format!("{key}={value}:"));
        lines.extend(each(&cx, BROKER, &[("", ops), ("1", ops)]).await?);
    }
    Ok(lines)
}
