//! What a proxy changes in the upstream's answers: every broker address (Metadata,
//! FindCoordinator, DescribeCluster, KIP-951's leader hints in Produce and Fetch answers, and
//! the same hints in KIP-932's ShareFetch and ShareAcknowledge answers) becomes the proxy's
//! listener for that broker, so that clients never connect to the upstream directly; and
//! ApiVersions advertises no version of those APIs beyond what the codec decodes, since their
//! answers must be decoded to be rewritten.
//!
//! DescribeQuorum's `nodes[].listeners` are forwarded as they are: they name the KRaft
//! controllers (voters), not brokers, under node ids that may also be brokers' (combined mode),
//! and a proxy listens only for brokers; a client that connects to them reaches the upstream's
//! controllers directly.

use std::net::SocketAddr;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, StrBytes};

/// The APIs whose answers name brokers, and so must be decoded and rewritten.
pub(crate) const REWRITTEN: &[ApiKey] = &[
    ApiKey::Metadata,
    ApiKey::FindCoordinator,
    ApiKey::DescribeCluster,
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ShareFetch,
    ApiKey::ShareAcknowledge,
];

/// Decodes an upstream answer (a frame without its size prefix) to a request of `api` at
/// `version`: its correlation id and body.
///
/// # Errors
/// The codec's reason, when the header or the body does not decode.
pub(crate) fn decode_response(
    api: ApiKey,
    version: i16,
    frame: Bytes,
) -> Result<(i32, ResponseKind), String> {
    let mut buf = frame;
    let header = ResponseHeader::decode(&mut buf, api.response_header_version(version))
        .map_err(|e| format!("{api:?} v{version} answer header does not decode: {e:#}"))?;
    let body = ResponseKind::decode(api, &mut buf, version)
        .map_err(|e| format!("{api:?} v{version} answer does not decode: {e:#}"))?;
    if !buf.is_empty() {
        return Err(format!(
            "{api:?} v{version} answer has {} bytes past its end",
            buf.len()
        ));
    }
    Ok((header.correlation_id, body))
}

/// The version an answer of `api` at `version` is decoded and encoded at: its own, but for
/// ApiVersions beyond the codec's highest, which is read at the codec's highest (the
/// upstream answers ApiVersions v5 as v4, whose fields it has) so that its versions are
/// clamped even for a client newer than the codec.
pub(crate) fn answer_version(api: ApiKey, version: i16) -> i16 {
    match api {
        ApiKey::ApiVersions => version.min(api.valid_versions().max),
        _ => version,
    }
}

/// The correlation id of an upstream answer, read without decoding it (the first 4 bytes of
/// every response header version).
pub(crate) fn peek_correlation_id(frame: &[u8]) -> Option<i32> {
    let bytes: [u8; 4] = frame.get(..4)?.try_into().ok()?;
    Some(i32::from_be_bytes(bytes))
}

/// Rewrites every broker address in `body` with `route(node_id, host, port)`, the proxy's
/// listener for that upstream broker (`None` leaves the address as it is: a node id of -1 in
/// an error answer), and clamps ApiVersions to the codec's versions of [`REWRITTEN`] APIs.
/// Returns whether anything changed (then the answer is encoded again).
pub(crate) fn rewrite(
    body: &mut ResponseKind,
    mut route: impl FnMut(i32, &str, i32) -> Option<SocketAddr>,
) -> bool {
    let mut changed = false;
    let mut apply = |node_id: i32, host: &mut StrBytes, port: &mut i32| {
        if let Some(addr) = route(node_id, host.as_str(), *port) {
            let (new_host, new_port) = (addr.ip().to_string(), i32::from(addr.port()));
            if host.as_str() != new_host || *port != new_port {
                *host = StrBytes::from_string(new_host);
                *port = new_port;
                changed = true;
            }
        }
    };
    match body {
        ResponseKind::Metadata(r) => {
            for b in &mut r.brokers {
                apply(b.node_id.0, &mut b.host, &mut b.port);
            }
        }
        ResponseKind::FindCoordinator(r) => {
            // v0-3 name one coordinator at the top level, v4+ a list and no top-level fields
            // (decoded as node 0, no host: rewriting them would make the answer unencodable).
            if r.coordinators.is_empty() && r.node_id.0 >= 0 && !r.host.is_empty() {
                apply(r.node_id.0, &mut r.host, &mut r.port);
            }
            for c in &mut r.coordinators {
                if c.node_id.0 >= 0 {
                    apply(c.node_id.0, &mut c.host, &mut c.port);
                }
            }
        }
        ResponseKind::DescribeCluster(r) => {
            for b in &mut r.brokers {
                apply(b.broker_id.0, &mut b.host, &mut b.port);
            }
        }
        ResponseKind::Produce(r) => {
            for n in &mut r.node_endpoints {
                apply(n.node_id.0, &mut n.host, &mut n.port);
            }
        }
        ResponseKind::Fetch(r) => {
            for n in &mut r.node_endpoints {
                apply(n.node_id.0, &mut n.host, &mut n.port);
            }
        }
        ResponseKind::ShareFetch(r) => {
            for n in &mut r.node_endpoints {
                apply(n.node_id.0, &mut n.host, &mut n.port);
            }
        }
        ResponseKind::ShareAcknowledge(r) => {
            for n in &mut r.node_endpoints {
                apply(n.node_id.0, &mut n.host, &mut n.port);
            }
        }
        ResponseKind::ApiVersions(r) => {
            for v in &mut r.api_keys {
                let Ok(api) = ApiKey::try_from(v.api_key) else {
                    continue;
                };
                if REWRITTEN.contains(&api) && v.max_version > api.valid_versions().max {
                    v.max_version = api.valid_versions().max;
                    changed = true;
                }
            }
        }
        _ => {}
    }
    changed
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
    use kafka_protocol::messages::{ApiVersionsResponse, BrokerId, MetadataResponse};

    use super::*;

    #[test]
    fn metadata_brokers_become_the_proxy_listeners() {
        let mut body = ResponseKind::Metadata(MetadataResponse::default().with_brokers(vec![
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(4))
                .with_host(StrBytes::from_static_str("kafka-4.internal"))
                .with_port(9092),
        ]));
        let proxy: SocketAddr = "127.0.0.1:40004".parse().unwrap();
        let mut seen = Vec::new();
        assert!(rewrite(&mut body, |node, host, port| {
            seen.push((node, host.to_owned(), port));
            Some(proxy)
        }));
        assert_eq!(seen, [(4, "kafka-4.internal".to_owned(), 9092)]);
        let ResponseKind::Metadata(r) = body else {
            unreachable!()
        };
        assert_eq!(
            (r.brokers[0].host.as_str(), r.brokers[0].port),
            ("127.0.0.1", 40004)
        );
    }

    /// Found by Sarama's FindCoordinator v4 through a proxy: the absent top-level fields were
    /// "rewritten" to a new listener for node 0, and the answer could not be encoded again.
    #[test]
    fn find_coordinator_v4_rewrites_its_coordinators_and_no_top_level_fields() {
        use kafka_protocol::messages::find_coordinator_response::Coordinator;
        use kafka_protocol::messages::FindCoordinatorResponse;
        let mut body = ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default().with_coordinators(vec![Coordinator::default()
                .with_key(StrBytes::from_static_str("shipping"))
                .with_node_id(BrokerId(2))
                .with_host(StrBytes::from_static_str("kafka-2.internal"))
                .with_port(9092)]),
        );
        let proxy: SocketAddr = "127.0.0.1:40002".parse().unwrap();
        let mut seen = Vec::new();
        assert!(rewrite(&mut body, |node, host, port| {
            seen.push((node, host.to_owned(), port));
            Some(proxy)
        }));
        assert_eq!(seen, [(2, "kafka-2.internal".to_owned(), 9092)]);
        let ResponseKind::FindCoordinator(r) = body else {
            unreachable!()
        };
        assert_eq!(
            (r.node_id.0, r.host.as_str(), r.port),
            (0, "", 0),
            "top level as decoded"
        );
        let c = &r.coordinators[0];
        assert_eq!((c.host.as_str(), c.port), ("127.0.0.1", 40002));
        crate::codec::encode_response(
            ApiKey::FindCoordinator,
            4,
            1,
            &ResponseKind::FindCoordinator(r),
        )
        .expect("a v4 answer encodes again");
    }

    #[test]
    fn api_versions_are_clamped_for_rewritten_apis_only() {
        let key = |api: ApiKey, max: i16| {
            ApiVersion::default()
                .with_api_key(api as i16)
                .with_max_version(max)
        };
        let mut body =
            ResponseKind::ApiVersions(ApiVersionsResponse::default().with_api_keys(vec![
                key(ApiKey::Metadata, 99),
                key(ApiKey::OffsetCommit, 99),
            ]));
        assert!(rewrite(&mut body, |_, _, _| None));
        let ResponseKind::ApiVersions(r) = body else {
            unreachable!()
        };
        assert_eq!(
            r.api_keys[0].max_version,
            ApiKey::Metadata.valid_versions().max
        );
        assert_eq!(r.api_keys[1].max_version, 99, "forwarded undecoded");
    }

    #[test]
    fn share_answers_leader_hints_become_the_proxy_listeners() {
        use kafka_protocol::messages::{share_acknowledge_response, share_fetch_response};
        use kafka_protocol::messages::{ShareAcknowledgeResponse, ShareFetchResponse};
        let proxy: SocketAddr = "127.0.0.1:40007".parse().unwrap();
        let upstream_host = StrBytes::from_static_str("kafka-7.internal");
        let mut fetch =
            ResponseKind::ShareFetch(ShareFetchResponse::default().with_node_endpoints(
                vec![share_fetch_response::NodeEndpoint::default()
                .with_node_id(BrokerId(7))
                .with_host(upstream_host.clone())
                .with_port(9092)],
            ));
        let mut ack = ResponseKind::ShareAcknowledge(
            ShareAcknowledgeResponse::default().with_node_endpoints(vec![
                share_acknowledge_response::NodeEndpoint::default()
                    .with_node_id(BrokerId(7))
                    .with_host(upstream_host)
                    .with_port(9092),
            ]),
        );
        let mut seen = Vec::new();
        for body in [&mut fetch, &mut ack] {
            assert!(rewrite(body, |node, host, port| {
                seen.push((node, host.to_owned(), port));
                Some(proxy)
            }));
        }
        assert_eq!(seen, vec![(7, "kafka-7.internal".to_owned(), 9092); 2]);
        let (ResponseKind::ShareFetch(f), ResponseKind::ShareAcknowledge(a)) = (fetch, ack) else {
            unreachable!()
        };
        let f = &f.node_endpoints[0];
        let a = &a.node_endpoints[0];
        assert_eq!((f.host.as_str(), f.port), ("127.0.0.1", 40007));
        assert_eq!((a.host.as_str(), a.port), ("127.0.0.1", 40007));
    }

    #[test]
    fn api_versions_are_clamped_for_share_apis() {
        let mut body = ResponseKind::ApiVersions(
            ApiVersionsResponse::default().with_api_keys(
                [ApiKey::ShareFetch, ApiKey::ShareAcknowledge]
                    .map(|api| {
                        ApiVersion::default()
                            .with_api_key(api as i16)
                            .with_max_version(99)
                    })
                    .to_vec(),
            ),
        );
        assert!(rewrite(&mut body, |_, _, _| None));
        let ResponseKind::ApiVersions(r) = body else {
            unreachable!()
        };
        assert_eq!(
            r.api_keys[0].max_version,
            ApiKey::ShareFetch.valid_versions().max
        );
        assert_eq!(
            r.api_keys[1].max_version,
            ApiKey::ShareAcknowledge.valid_versions().max
        );
    }
}
