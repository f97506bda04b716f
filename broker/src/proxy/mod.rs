//! Proxy mode: kmock's listeners, journal, fault rules and checks in front of a real Kafka
//! cluster (`kmock proxy --upstream HOST:PORT`, a scenario's `upstream:`,
//! [`ClusterBuilder::upstream`](crate::ClusterBuilder::upstream)).
//!
//! At the start the proxy asks the upstream for its brokers (Metadata) and opens one listener
//! per upstream broker, with the upstream's node id; a broker that appears later in an answer
//! gets a listener when first seen (at most [`MAX_LATE_BROKERS`]). Each client connection
//! gets one connection to its broker's upstream (given up after 10 s): requests are journaled and faulted on arrival as in fake mode
//! ([`crate::server`]), then forwarded in order without waiting for the answers before them;
//! the answers come back in the same order, are journaled (the upstream's answer is the
//! response summary), rewritten where they name brokers ([`rewrite`]) and sent on.
//!
//! What differs from fake mode:
//! - the upstream's answers are forwarded as their bytes came unless rewritten (broker
//!   addresses, ApiVersions clamped for the rewritten APIs, a `throttle` fault) or decodable
//!   only in part; DescribeQuorum's `nodes[].listeners` (KRaft controllers, not brokers) are
//!   forwarded as they are ([`rewrite`]);
//! - a request the codec cannot decode (an API or version newer than kafka-protocol knows)
//!   is forwarded untouched and journaled with its header's API, version and correlation id;
//! - Produce's record digests are computed by the proxy once it has forwarded the request
//!   (the same walk as the fake's validation pass); `duplicate-write` and `lost-write` read
//!   where batches were written from Kafka's answers, as `kmock check` does offline, and
//!   `out-of-order-write`, which needs the partition logs, is skipped;
//! - operations only a fake can do (moving leaders and coordinators, creating topics) are
//!   refused; `broker_down` closes the proxy's listener while the upstream broker runs on.
//!
//! SASL and TLS to the upstream are out of scope: the upstream is spoken to in PLAINTEXT.

mod answers;
pub(crate) mod rewrite;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::{
    ApiKey, BrokerId, MetadataRequest, MetadataResponse, RequestHeader, ResponseKind,
};
use kafka_protocol::protocol::{Encodable, StrBytes, VersionRange};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::connection::FrameReader;
use crate::error::Error;
use crate::listening::Listening;

/// How long discovering the upstream's brokers may take at the start before it fails: a hang
/// guard, far above what a reachable broker needs.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// Most brokers first seen after the start that get a listener of their own: answers naming
/// more node ids (a hostile or broken upstream) get their addresses unchanged, with a warning,
/// rather than a listener each.
pub(crate) const MAX_LATE_BROKERS: usize = 1024;

/// Largest answer frame read from the upstream (Kafka's answers to a Fetch are bounded by the
/// client's `fetch.max.bytes`; this only guards against a corrupt size prefix).
pub(crate) const MAX_ANSWER_BYTES: usize = 1 << 30;

/// The versions a proxy decodes: every version the codec knows (a request beyond them is
/// forwarded undecoded).
pub(crate) fn codec_versions(api: ApiKey) -> Option<VersionRange> {
    Some(api.valid_versions())
}

/// An upstream broker as it advertises itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UpstreamBroker {
    /// Its node id.
    pub node_id: i32,
    /// `host:port` it advertises.
    pub addr: String,
}

/// The upstream cluster a proxy forwards to, and which of the proxy's listeners stands for
/// which upstream broker.
#[derive(Debug)]
pub(crate) struct Upstream {
    /// The address new listeners bind to.
    host: IpAddr,
    /// Per upstream node id: its address and the proxy's listener for it.
    routes: Mutex<BTreeMap<i32, Route>>,
    /// Listeners opened for brokers first seen after the start.
    late: Mutex<Vec<Listening>>,
    /// What the upstream's Metadata answers said, rewritten: the last answer's brokers and
    /// cluster, and every topic an answer listed (the last word on each), for the answers a
    /// fault's `error` gives ([`answers::metadata_error`]).
    metadata: Mutex<answers::KnownMetadata>,
    /// The cluster's shutdown, which stops the late listeners too.
    shutdown: CancellationToken,
}

#[derive(Debug)]
struct Route {
    upstream: String,
    listener: SocketAddr,
}

impl Upstream {
    /// An upstream whose brokers at the start are `brokers`, served by the proxy's listeners
    /// `listeners` (same order), new listeners binding `host`.
    pub(crate) fn new(
        brokers: &[UpstreamBroker],
        listeners: &[SocketAddr],
        host: IpAddr,
        shutdown: CancellationToken,
    ) -> Self {
        let listed = brokers
            .iter()
            .zip(listeners)
            .map(|(b, l)| {
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(b.node_id))
                    .with_host(StrBytes::from_string(l.ip().to_string()))
                    .with_port(i32::from(l.port()))
            })
            .collect();
        let routes = brokers
            .iter()
            .zip(listeners)
            .map(|(b, l)| {
                let route = Route {
                    upstream: b.addr.clone(),
                    listener: *l,
                };
                (b.node_id, route)
            })
            .collect();
        Self {
            host,
            routes: Mutex::new(routes),
            late: Mutex::new(Vec::new()),
            metadata: Mutex::new(answers::KnownMetadata::with_brokers(listed)),
            shutdown,
        }
    }

    fn metadata(&self) -> std::sync::MutexGuard<'_, answers::KnownMetadata> {
        self.metadata.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes note of an upstream Metadata `answer` (already rewritten):
    /// [`answers::KnownMetadata::remember`].
    pub(crate) fn remember_metadata(&self, answer: &MetadataResponse) {
        self.metadata().remember(answer);
    }

    /// The answer an `error(code)` fault gives a Metadata `request` at `version`, from what
    /// the upstream's answers said ([`answers::metadata_error`]); `topic` is the rule's topic.
    pub(crate) fn metadata_error(
        &self,
        request: &MetadataRequest,
        version: i16,
        code: i16,
        topic: Option<&str>,
    ) -> MetadataResponse {
        answers::metadata_error(&self.metadata(), request, version, code, topic)
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, BTreeMap<i32, Route>> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The upstream address (`host:port`) of broker `node_id`, if known.
    pub(crate) fn upstream_of(&self, node_id: i32) -> Option<String> {
        self.routes().get(&node_id).map(|r| r.upstream.clone())
    }

    /// The proxy's listener for upstream broker `node_id`, now advertised at `host:port`: the
    /// known one (its upstream address updated), or a new listener for a broker first seen
    /// now. `None` when no listener can be bound, or [`MAX_LATE_BROKERS`] brokers first seen
    /// after the start have one already (the address is then left as the upstream's, with a
    /// warning).
    ///
    /// `start` starts the new listener's accept loop, stopped with the cluster's shutdown
    /// ([`crate::server::listen`]).
    pub(crate) fn route(
        &self,
        start: impl FnOnce(TcpListener, &CancellationToken) -> Listening,
        node_id: i32,
        host: &str,
        port: i32,
    ) -> Option<SocketAddr> {
        let upstream = format!("{host}:{port}");
        let mut routes = self.routes();
        if let Some(route) = routes.get_mut(&node_id) {
            if route.upstream != upstream {
                tracing::info!(broker = node_id, from = %route.upstream, to = %upstream, "upstream broker moved");
                route.upstream = upstream;
            }
            return Some(route.listener);
        }
        let late = self.late.lock().unwrap_or_else(|p| p.into_inner()).len();
        if late >= MAX_LATE_BROKERS {
            tracing::warn!(broker = node_id, %upstream, "no listener for a new upstream broker past {MAX_LATE_BROKERS} brokers first seen after the start, its address goes to clients unchanged");
            return None;
        }
        let bound = std::net::TcpListener::bind(SocketAddr::new(self.host, 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(TcpListener::from_std)
            .and_then(|l| l.local_addr().map(|addr| (l, addr)));
        let (listener, addr) = match bound {
            Ok(bound) => bound,
            Err(e) => {
                tracing::warn!(broker = node_id, %upstream, "no listener for a new upstream broker, its address goes to clients unchanged: {e}");
                return None;
            }
        };
        tracing::info!(broker = node_id, %upstream, listener = %addr, "new upstream broker");
        routes.insert(
            node_id,
            Route {
                upstream,
                listener: addr,
            },
        );
        drop(routes);
        let listening = start(listener, &self.shutdown);
        self.late
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(listening);
        Some(addr)
    }

    /// Node ids and listeners of the brokers first seen after the start.
    pub(crate) fn late_brokers(&self, known: &[i32]) -> Vec<(i32, SocketAddr)> {
        self.routes()
            .iter()
            .filter(|(id, _)| !known.contains(id))
            .map(|(id, r)| (*id, r.listener))
            .collect()
    }

    /// Stops the listeners of brokers first seen after the start, and their connections.
    pub(crate) async fn stop_late(&self) {
        let late = std::mem::take(&mut *self.late.lock().unwrap_or_else(|p| p.into_inner()));
        for listening in &late {
            listening.stop().await;
        }
    }
}

/// Asks the upstream cluster for its brokers (Metadata for no topic), trying each bootstrap
/// address in turn.
///
/// # Errors
/// [`Error::Upstream`] when no bootstrap address answers, naming each one's failure.
pub(crate) async fn discover(bootstrap: &[String]) -> Result<Vec<UpstreamBroker>, Error> {
    let mut failures = Vec::new();
    for addr in bootstrap {
        match tokio::time::timeout(DISCOVERY_TIMEOUT, metadata(addr)).await {
            Ok(Ok(mut brokers)) if !brokers.is_empty() => {
                brokers.sort_by_key(|b| b.node_id);
                return Ok(brokers);
            }
            Ok(Ok(_)) => failures.push(format!("{addr}: its Metadata lists no broker")),
            Ok(Err(e)) => failures.push(format!("{addr}: {e}")),
            Err(_) => failures.push(format!("{addr}: no answer within {DISCOVERY_TIMEOUT:?}")),
        }
    }
    Err(Error::Upstream(failures.join("; ")))
}

/// One Metadata v12 round trip with `addr`: the brokers it lists.
async fn metadata(addr: &str) -> Result<Vec<UpstreamBroker>, String> {
    const VERSION: i16 = 12;
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let mut frame = BytesMut::new();
    let fail = |e: anyhow::Error| format!("cannot encode Metadata: {e}");
    RequestHeader::default()
        .with_request_api_key(ApiKey::Metadata as i16)
        .with_request_api_version(VERSION)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("kmock-proxy")))
        .encode(&mut frame, ApiKey::Metadata.request_header_version(VERSION))
        .map_err(fail)?;
    MetadataRequest::default()
        .with_topics(Some(Vec::new()))
        .encode(&mut frame, VERSION)
        .map_err(fail)?;
    crate::connection::write_frame(&mut stream, &frame)
        .await
        .map_err(|e| format!("cannot send Metadata: {e}"))?;
    let (read, mut write) = stream.into_split();
    let mut answers = FrameReader::new(read, MAX_ANSWER_BYTES, DISCOVERY_TIMEOUT);
    let answer = answers
        .read_frame()
        .await
        .map_err(|e| format!("no Metadata answer: {e}"))?
        .ok_or("closed the connection without answering Metadata")?;
    let _ = write.shutdown().await;
    let (_, body) = rewrite::decode_response(ApiKey::Metadata, VERSION, answer)?;
    let ResponseKind::Metadata(MetadataResponse { brokers, .. }) = body else {
        unreachable!("a Metadata answer decodes as Metadata");
    };
    Ok(brokers
        .into_iter()
        .map(|b| UpstreamBroker {
            node_id: b.node_id.0,
            addr: format!("{}:{}", b.host.as_str(), b.port),
        })
        .collect())
}
