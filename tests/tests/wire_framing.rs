//! Bad input closes only its own connection, with the broker and every other connection
//! unaffected; version negotiation follows Kafka.

use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, MetadataRequest};
use kafka_protocol::protocol::Decodable;
use kafka_protocol::ResponseError;
use kmock::{Cluster, Entry, Rule};
use kmock_client::{record, Client, Error};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a close or a journal entry due at once may take: catches a hang only.
const CLOSE_WITHIN: Duration = Duration::from_secs(5);

/// The journal entry, with its `bad_request` reason, of what `peer` sent.
async fn bad_request_from(cluster: &Cluster, peer: SocketAddr) -> Entry {
    let entry = cluster
        .wait_for(|e| e.peer == peer && e.bad_request.is_some(), CLOSE_WITHIN)
        .await
        .unwrap_or_else(|e| panic!("no bad_request entry for {peer}: {e}"));
    assert!(
        !entry.bad_request.as_deref().unwrap_or_default().is_empty(),
        "the reason is given"
    );
    entry
}

async fn cluster() -> (Cluster, std::net::SocketAddr) {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let addr = cluster.brokers()[0].addr;
    (cluster, addr)
}

/// Sends `bytes` on a fresh connection and proves that connection was closed while a second
/// connection, opened before, still gets answers.
async fn assert_closes_only_its_connection(bytes: &[u8]) {
    let (cluster, addr) = cluster().await;
    let bystander = Client::connect(addr).await.unwrap();
    let offender = Client::connect(addr).await.unwrap();
    offender.write_bytes(bytes).await.unwrap();
    assert!(
        offender.wait_closed(CLOSE_WITHIN).await,
        "the broker kept the connection open after {bytes:02x?}"
    );
    let journaled = bad_request_from(&cluster, offender.local_addr()).await;
    assert_eq!(journaled.response, None, "a bad request gets no answer");
    let answer = bystander
        .api_versions()
        .await
        .expect("the other connection must still be served");
    assert_eq!(answer.error_code, 0);
    let again = Client::connect(addr)
        .await
        .unwrap()
        .metadata(Some(&["t"]))
        .await
        .unwrap();
    assert_eq!(
        again.topics[0].error_code, 0,
        "a new connection must be served too"
    );
}

#[tokio::test]
async fn a_frame_of_garbage_closes_only_its_connection() {
    // Length 12, then an unknown API key (0x7a7a) and noise.
    assert_closes_only_its_connection(&[0, 0, 0, 12, 0x7a, 0x7a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        .await;
}

#[tokio::test]
async fn a_frame_shorter_than_a_request_header_closes_only_its_connection() {
    assert_closes_only_its_connection(&[0, 0, 0, 3, 0, 18, 0]).await;
}

#[tokio::test]
async fn a_frame_over_the_size_limit_closes_only_its_connection() {
    // 0x7fffffff bytes announced: over Kafka's 100 MiB socket.request.max.bytes.
    assert_closes_only_its_connection(&[0x7f, 0xff, 0xff, 0xff, 0, 0]).await;
}

#[tokio::test]
async fn a_negative_frame_length_closes_only_its_connection() {
    assert_closes_only_its_connection(&[0xff, 0xff, 0xff, 0xfe]).await;
}

#[tokio::test]
async fn an_undecodable_body_closes_only_its_connection() {
    // Metadata v1 (API key 3): header with client id "c", then a topic array claiming 5 topics
    // with nothing after it.
    assert_closes_only_its_connection(&[
        0, 0, 0, 15, 0, 3, 0, 1, 0, 0, 0, 7, 0, 1, b'c', 0, 0, 0, 5,
    ])
    .await;
}

#[tokio::test]
async fn a_request_claiming_two_billion_topics_closes_only_its_connection() {
    // Metadata v1, client id "c", then a topic array of 0x7fffffff entries and no bytes for
    // them: decoding must fail on the length, not try to allocate 154 GB and abort the process.
    assert_closes_only_its_connection(&[
        0, 0, 0, 15, 0, 3, 0, 1, 0, 0, 0, 7, 0, 1, b'c', 0x7f, 0xff, 0xff, 0xff,
    ])
    .await;
}

#[tokio::test]
async fn a_stream_cut_inside_a_frame_closes_without_hurting_others() {
    let (cluster, addr) = cluster().await;
    let bystander = Client::connect(addr).await.unwrap();
    // 100 bytes announced, 4 sent (8 of the 104 bytes of the frame with its size), then the
    // write side shut: the stream ends inside a frame.
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(&[0, 0, 0, 100, 0, 18, 0, 3]).await.unwrap();
    half.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(CLOSE_WITHIN, half.read_to_end(&mut rest)).await;
    assert!(
        matches!(read, Ok(Ok(0))),
        "the broker closes the cut connection without answering, got {read:?} ({rest:02x?})"
    );
    let entry = bad_request_from(&cluster, half.local_addr().unwrap()).await;
    assert!(
        entry
            .bad_request
            .as_deref()
            .unwrap()
            .contains("middle of a frame (8 of 104 bytes read)"),
        "the reason tells the frame was cut, and where: {:?}",
        entry.bad_request
    );
    assert_eq!(bystander.api_versions().await.unwrap().error_code, 0);
}

#[tokio::test]
async fn a_request_version_beyond_the_advertised_range_closes_the_connection_as_kafka_does() {
    let (_cluster, addr) = cluster().await;
    let bystander = Client::connect(addr).await.unwrap();
    let client = Client::connect(addr).await.unwrap();
    // Metadata v99: Kafka's SocketServer refuses a version it does not enable with
    // InvalidRequestException, which closes the connection.
    let result = client
        .send_frame(ApiKey::Metadata as i16, 99, 2, 1, &[0, 0, 0])
        .await;
    assert!(
        matches!(result, Err(Error::ConnectionClosed)),
        "expected the connection to close, got {result:?}"
    );
    assert_eq!(bystander.api_versions().await.unwrap().error_code, 0);
}

#[tokio::test]
async fn api_versions_at_a_future_version_gets_the_v0_answer_listing_only_api_versions() {
    let (_cluster, addr) = cluster().await;
    let client = Client::connect(addr).await.unwrap();
    // ApiVersions v127 with an empty flexible body; the answer is v0, header v0.
    let body = client
        .send_frame(ApiKey::ApiVersions as i16, 127, 2, 0, &[0, 0, 0])
        .await
        .expect("ApiVersions must be answered at any version");
    let answer = ApiVersionsResponse::decode(&mut body.clone(), 0).unwrap();
    assert_eq!(answer.error_code, ResponseError::UnsupportedVersion.code());
    // KIP-511: only ApiVersions and its range, for the client to retry within.
    let apis: Vec<i16> = answer.api_keys.iter().map(|k| k.api_key).collect();
    assert_eq!(
        apis,
        [ApiKey::ApiVersions as i16],
        "the v0 answer must list ApiVersions alone"
    );
    // The connection stays usable for the retry at a supported version.
    assert_eq!(client.api_versions().await.unwrap().error_code, 0);
}

#[tokio::test]
async fn responses_on_one_connection_come_back_in_request_order() {
    let (cluster, addr) = cluster().await;
    let client = Client::connect(addr).await.unwrap();
    // A long-polling Fetch first, then a Metadata behind it on the same connection: the
    // Metadata answer must wait for the Fetch answer.
    let (fetch, metadata) =
        tokio::join!(client.fetch("t", 0, 0, Duration::from_millis(300)), async {
            cluster
                .wait_for(|e| e.is("Fetch"), CLOSE_WITHIN)
                .await
                .unwrap();
            client.send(MetadataRequest::default(), 1).await
        });
    fetch.unwrap();
    metadata.unwrap();
    let answered = |api: &'static str| {
        let cluster = cluster.clone();
        async move {
            cluster
                .wait_for(|e| e.is(api) && e.response.is_some(), CLOSE_WITHIN)
                .await
                .unwrap()
        }
    };
    let (fetch, metadata) = (answered("Fetch").await, answered("Metadata").await);
    assert!(fetch.seq < metadata.seq, "the Fetch came first");
    let (fetch_at, metadata_at) = (
        fetch.response.unwrap().at_us,
        metadata.response.unwrap().at_us,
    );
    assert!(
        fetch_at <= metadata_at,
        "Metadata was answered at {metadata_at} µs, before the Fetch ahead of it ({fetch_at} µs)"
    );
    assert!(
        metadata_at - fetch.at_us >= 300_000,
        "Metadata was answered {} µs after the Fetch arrived, within its 300 ms long poll",
        metadata_at - fetch.at_us
    );
}

#[tokio::test]
async fn an_answer_made_goes_out_before_a_later_request_on_its_connection_waits() {
    let (cluster, addr) = cluster().await;
    // Every Metadata request is held for an hour before it is handled.
    cluster
        .add_rule(Rule::on(ApiKey::Metadata).delay(Duration::from_secs(3600)))
        .unwrap();
    let client = Client::connect(addr).await.unwrap();
    let producer = Client::connect(addr).await.unwrap();
    // A long-polling Fetch, then a Metadata queued behind it on the same connection; records
    // arrive only once both are in, so the Fetch is answered while the Metadata is queued,
    // and the Metadata then waits an hour.
    let fetch = client.fetch("t", 0, 0, Duration::from_secs(3600));
    let metadata = async {
        cluster
            .wait_for(|e| e.is("Fetch"), CLOSE_WITHIN)
            .await
            .unwrap();
        client.send(MetadataRequest::default(), 1).await
    };
    let produce = async {
        cluster
            .wait_for(|e| e.is("Metadata"), CLOSE_WITHIN)
            .await
            .unwrap();
        let produced = producer.produce("t", 0, &[record(b"k", b"v")], 1).await;
        assert_eq!(
            produced.unwrap().responses[0].partition_responses[0].error_code,
            0
        );
    };
    let fetched = tokio::select! {
        (fetched, ()) = async { tokio::join!(fetch, produce) } => fetched.unwrap(),
        answered = metadata => panic!("the Metadata was answered within its delay: {answered:?}"),
        // A hang guard only: the Fetch answer must not wait for the Metadata's hour.
        () = tokio::time::sleep(Duration::from_secs(60)) => {
            panic!("the Fetch answer waited behind the delayed Metadata request")
        }
    };
    let partition = &fetched.responses[0].partitions[0];
    assert_eq!((partition.error_code, partition.high_watermark), (0, 1));
    cluster.shutdown().await;
}

/// One request frame: the header (`api` at `version`, header v1) and the encoded `body`.
fn request_frame(api: ApiKey, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    use kafka_protocol::messages::RequestHeader;
    use kafka_protocol::protocol::Encodable;
    let mut frame = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .encode(&mut frame, 1)
        .unwrap();
    frame.extend_from_slice(body);
    let mut sized = (frame.len() as u32).to_be_bytes().to_vec();
    sized.extend_from_slice(&frame);
    sized
}

/// The next answer frame on `socket`: its correlation id (response header v0) and its body.
async fn answer_frame(socket: &mut TcpStream) -> (i32, bytes::Bytes) {
    use bytes::Buf;
    let size = tokio::time::timeout(CLOSE_WITHIN, socket.read_u32())
        .await
        .expect("an answer within the hang guard")
        .unwrap();
    let mut frame = vec![0u8; size as usize];
    socket.read_exact(&mut frame).await.unwrap();
    let mut frame = bytes::Bytes::from(frame);
    let correlation_id = frame.get_i32();
    (correlation_id, frame)
}

/// An answer over the connection's 64 KiB send buffer (a Metadata of 4,000 partitions, about
/// 100 KiB), pipelined between two small ones, comes back whole and in request order, each
/// request answered in the journal.
#[tokio::test]
async fn an_answer_over_the_send_buffer_between_small_ones_keeps_its_place_and_its_bytes() {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataResponse, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let cluster = Cluster::builder()
        .topic("wide", 4000)
        .start()
        .await
        .unwrap();
    let mut socket = TcpStream::connect(cluster.brokers()[0].addr).await.unwrap();
    let mut metadata = bytes::BytesMut::new();
    MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("wide"))))]))
        .encode(&mut metadata, 1)
        .unwrap();
    let mut pipelined = request_frame(ApiKey::ApiVersions, 0, 1, &[]);
    pipelined.extend(request_frame(ApiKey::Metadata, 1, 2, &metadata));
    pipelined.extend(request_frame(ApiKey::ApiVersions, 0, 3, &[]));
    socket.write_all(&pipelined).await.unwrap();
    let (first, mut versions) = answer_frame(&mut socket).await;
    assert_eq!(first, 1);
    ApiVersionsResponse::decode(&mut versions, 0).unwrap();
    let (second, mut wide) = answer_frame(&mut socket).await;
    assert_eq!(second, 2);
    assert!(wide.len() > 64 * 1024, "{} bytes", wide.len());
    let wide = MetadataResponse::decode(&mut wide, 1).unwrap();
    assert_eq!(wide.topics[0].partitions.len(), 4000);
    let (third, mut versions) = answer_frame(&mut socket).await;
    assert_eq!(third, 3);
    ApiVersionsResponse::decode(&mut versions, 0).unwrap();
    cluster.settled().await;
    let journal = cluster.journal();
    let answered = journal
        .entries()
        .iter()
        .filter(|e| e.response.is_some())
        .count();
    assert_eq!(answered, 3, "every request answered in the journal");
    cluster.shutdown().await;
}
