//! `kmock proxy`: kmock's journal, fault rules, checks and control API in front of a real
//! Kafka cluster.

use std::net::IpAddr;

use anyhow::bail;

use crate::serve::{run, Common};

#[derive(Debug, clap::Args)]
pub(crate) struct Proxy {
    /// The real Kafka cluster's bootstrap, HOST:PORT[,HOST:PORT…] (PLAINTEXT; SASL and TLS
    /// are not supported). The proxy asks it for its brokers and opens one listener per
    /// broker; every broker address in answers is rewritten to the proxy's.
    #[arg(long, value_name = "HOST:PORT[,…]", required_unless_present = "config")]
    upstream: Option<String>,
    /// A YAML scenario with `upstream:`, fault rules and checks (the fake's shape and state
    /// fields are refused). Cannot be combined with --upstream, --host or --port.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["upstream", "host", "port"])]
    config: Option<std::path::PathBuf>,
    /// Address the proxy's listeners bind to and advertise.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port of the listener of the upstream's first broker (by node id); the others take the
    /// next ports. 0 picks free ports. A broker first seen later gets a free port.
    #[arg(long, default_value_t = 9092)]
    port: u16,
    #[command(flatten)]
    common: Common,
}

pub(crate) async fn proxy(args: Proxy) -> anyhow::Result<()> {
    let (builder, scenario) = match (&args.config, &args.upstream) {
        (Some(path), _) => {
            let scenario = kmock::Scenario::load(path)?;
            if scenario.upstream.is_none() {
                bail!("{} names no `upstream:` to proxy", path.display());
            }
            (scenario.builder()?, Some(scenario))
        }
        (None, Some(upstream)) => {
            let builder = kmock::Cluster::builder()
                .upstream(upstream)
                .host(args.host)
                .port(args.port);
            (builder, None)
        }
        (None, None) => bail!("give --upstream HOST:PORT or --config FILE"),
    };
    run(builder, scenario, args.common).await
}
