//! Client behaviour against a scripted peer (a bare TcpListener), no broker.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kmock_client::kafka_protocol::messages::api_versions_response::ApiVersion;
use kmock_client::kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader,
};
use kmock_client::kafka_protocol::protocol::{
    decode_request_header_from_buffer, Decodable, Encodable, StrBytes,
};
use kmock_client::{Client, Error};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TIMEOUT: Duration = Duration::from_secs(10);

/// Reads one length-prefixed request; returns its header and body.
async fn read_request(sock: &mut TcpStream) -> (RequestHeader, Bytes) {
    let size = sock.read_i32().await.expect("size");
    let mut frame = vec![0u8; size as usize];
    sock.read_exact(&mut frame).await.expect("frame");
    let mut frame = Bytes::from(frame);
    let header = decode_request_header_from_buffer(&mut frame).expect("request header");
    (header, frame)
}

/// Writes an ApiVersionsResponse v3 (response header v0) for `correlation_id`.
async fn write_api_versions(sock: &mut TcpStream, correlation_id: i32, throttle: i32) {
    let response = ApiVersionsResponse::default()
        .with_error_code(0)
        .with_throttle_time_ms(throttle)
        .with_api_keys(vec![ApiVersion::default()
            .with_api_key(ApiKey::ApiVersions as i16)
            .with_min_version(0)
            .with_max_version(3)]);
    let mut body = BytesMut::new();
    response.encode(&mut body, 3).expect("encode response");
    let mut frame = BytesMut::new();
    frame.put_i32(4 + body.len() as i32);
    frame.put_i32(correlation_id);
    frame.put_slice(&body);
    sock.write_all(&frame).await.expect("write response");
}

async fn listener() -> (TcpListener, std::net::SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

#[tokio::test]
async fn two_concurrent_api_versions_answered_in_order() {
    let (listener, addr) = listener().await;
    let peer = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let (h1, b1) = read_request(&mut sock).await;
        let (h2, b2) = read_request(&mut sock).await;
        for (h, b) in [(&h1, &b1), (&h2, &b2)] {
            assert_eq!(h.request_api_key, ApiKey::ApiVersions as i16);
            assert_eq!(h.request_api_version, 3);
            assert_eq!(h.client_id.as_deref(), Some("kmock-client"));
            let req = ApiVersionsRequest::decode(&mut b.clone(), 3).unwrap();
            assert_eq!(req.client_software_name.as_str(), "kmock-client");
        }
        // Both requests are in flight before either is answered.
        write_api_versions(&mut sock, h1.correlation_id, h1.correlation_id * 100).await;
        write_api_versions(&mut sock, h2.correlation_id, h2.correlation_id * 100).await;
        let mut rest = Vec::new();
        let _ = sock.read_to_end(&mut rest).await;
        (h1.correlation_id, h2.correlation_id)
    });

    let client = Client::connect(addr).await.unwrap();
    assert_eq!(client.local_addr().ip(), addr.ip());
    assert!(!client.wait_closed(Duration::from_millis(20)).await);

    let (a, b) = tokio::time::timeout(TIMEOUT, async {
        tokio::join!(client.api_versions(), client.api_versions())
    })
    .await
    .expect("responses in time");
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut throttles = vec![a.throttle_time_ms, b.throttle_time_ms];
    throttles.sort();
    // Correlation ids start at 1; each call got the answer to its own id.
    assert_eq!(throttles, vec![100, 200]);
    assert_eq!(a.api_keys.len(), 1);

    drop(client);
    let (c1, c2) = peer.await.unwrap();
    assert_eq!((c1, c2), (1, 2));
}

#[tokio::test]
async fn out_of_order_answers_reach_their_own_caller() {
    let (listener, addr) = listener().await;
    let peer = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut reqs = Vec::new();
        for _ in 0..2 {
            let (h, mut b) = read_request(&mut sock).await;
            let req = ApiVersionsRequest::decode(&mut b, 3).unwrap();
            let throttle: i32 = req.client_software_name.as_str().parse().unwrap();
            reqs.push((h.correlation_id, throttle));
        }
        // Answer in reverse order.
        for (cid, throttle) in reqs.into_iter().rev() {
            write_api_versions(&mut sock, cid, throttle).await;
        }
        let mut rest = Vec::new();
        let _ = sock.read_to_end(&mut rest).await;
    });

    let client = Client::connect_with_client_id(addr, "other").await.unwrap();
    let req = |name: &'static str| {
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(name))
            .with_client_software_version(StrBytes::from_static_str("1"))
    };
    let (a, b) = tokio::time::timeout(TIMEOUT, async {
        tokio::join!(client.send(req("11"), 3), client.send(req("22"), 3))
    })
    .await
    .expect("responses in time");
    assert_eq!(a.unwrap().throttle_time_ms, 11);
    assert_eq!(b.unwrap().throttle_time_ms, 22);
    drop(client);
    peer.await.unwrap();
}

#[tokio::test]
async fn peer_close_fails_pending_send() {
    let (listener, addr) = listener().await;
    let peer = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let _ = read_request(&mut sock).await;
        drop(sock);
    });

    let client = Client::connect(addr).await.unwrap();
    let result = tokio::time::timeout(TIMEOUT, client.api_versions())
        .await
        .expect("send resolves");
    assert!(
        matches!(result, Err(Error::ConnectionClosed)),
        "got {result:?}"
    );
    assert!(client.wait_closed(TIMEOUT).await);
    // Later sends fail the same way, without hanging.
    let later = tokio::time::timeout(TIMEOUT, client.api_versions())
        .await
        .expect("send resolves");
    assert!(
        matches!(later, Err(Error::ConnectionClosed)),
        "got {later:?}"
    );
    peer.await.unwrap();
}

#[tokio::test]
async fn unknown_correlation_id_is_protocol_error() {
    let (listener, addr) = listener().await;
    let peer = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let (h, _) = read_request(&mut sock).await;
        write_api_versions(&mut sock, h.correlation_id + 1000, 0).await;
        let mut rest = Vec::new();
        let _ = sock.read_to_end(&mut rest).await;
    });

    let client = Client::connect(addr).await.unwrap();
    let result = tokio::time::timeout(TIMEOUT, client.api_versions())
        .await
        .expect("send resolves");
    assert!(matches!(result, Err(Error::Protocol(_))), "got {result:?}");
    drop(client);
    peer.await.unwrap();
}
