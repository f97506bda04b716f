//! Request frames to typed requests, typed responses to frames, with the `kafka-protocol` crate.
//!
//! Version checks follow Kafka's `SocketServer` and `RequestContext`: a request whose API kmock
//! does not implement, or whose version lies outside the range kmock advertises, closes the
//! connection (Kafka raises `InvalidRequestException` there) — except ApiVersions, which a client
//! sends before it knows the broker's range: a version kmock cannot parse is answered in v0 with
//! UNSUPPORTED_VERSION and the full list of supported APIs, so the client can retry lower.
//!
//! Decoding has a memory budget ([`decode_budget`]): a frame of N bytes may decode to at most
//! [`DECODE_BUDGET_FACTOR`] × N bytes of arrays and tagged fields (plus
//! [`DECODE_BUDGET_SLACK`]), so a request made of millions of empty elements (a Metadata naming
//! millions of empty topics) is refused as undecodable instead of costing gigabytes. Kafka has
//! no such limit, but no request a client sends for real work comes near it; see
//! [`DECODE_BUDGET_FACTOR`].

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::buf::SharedBytesMut;
use kafka_protocol::protocol::{budget, Decodable, Encodable, VersionRange};

/// Bytes of decoded arrays and tagged fields allowed per byte of frame.
///
/// Decoded, an element costs `size_of` of its struct whatever its wire size; the worst ratio
/// a real request reaches is Metadata v9's topic list (72 bytes a topic; on the wire a name
/// and two bytes): 24 for one-character names, 18 for two, 14.4 for three. Distinct names of
/// one or two characters are 4,160 at most (covered by [`DECODE_BUDGET_SLACK`]), so any
/// Metadata of distinct names fits 16; every other API kmock implements stays below 16 with
/// non-empty names and ids (DescribeConfigs with one-character resource names, 17.6, is the
/// closest, and real config resources are topics of more characters or broker ids that fit the
/// slack). Refused: lists of empty strings (32) or empty topic names (36), tagged-field floods
/// (40).
pub const DECODE_BUDGET_FACTOR: usize = 16;

/// Bytes of decoded arrays and tagged fields every request may use whatever its size, so a
/// small request is never refused for its ratio.
pub const DECODE_BUDGET_SLACK: usize = 1 << 20;

/// The memory budget of decoding a frame of `frame_bytes` bytes:
/// `DECODE_BUDGET_FACTOR * frame_bytes + DECODE_BUDGET_SLACK`.
pub fn decode_budget(frame_bytes: usize) -> usize {
    frame_bytes
        .saturating_mul(DECODE_BUDGET_FACTOR)
        .saturating_add(DECODE_BUDGET_SLACK)
}

/// A decoded request.
#[derive(Debug)]
pub struct Request {
    /// The request header (correlation id, client id).
    pub header: RequestHeader,
    /// Which API.
    pub api_key: ApiKey,
    /// The API version the client used.
    pub version: i16,
    /// The decoded body.
    pub body: RequestKind,
}

/// What a frame turned out to be.
#[derive(Debug)]
pub enum Decoded {
    /// A request kmock can handle.
    Request(Box<Request>),
    /// ApiVersions at a version kmock cannot parse: answer in v0 with UNSUPPORTED_VERSION.
    ApiVersionsFallback {
        /// Echoed in the answer.
        correlation_id: i32,
        /// The version the client asked for.
        version: i16,
    },
}

/// Why a frame is not a request kmock can answer. Every variant closes the connection.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// Fewer bytes than the fixed start of a request header (api key, version, correlation id).
    #[error("frame of {0} bytes is too short for a request header (at least 8)")]
    TooShort(usize),
    /// An API key Kafka does not define.
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    /// An API Kafka defines and kmock does not implement.
    #[error("{0:?} (API key {key}) is not implemented by kmock", key = *.0 as i16)]
    NotImplemented(ApiKey),
    /// A version outside the advertised range.
    #[error("{api:?} v{version} is not supported: kmock implements v{}..=v{}", range.min, range.max)]
    UnsupportedVersion {
        /// Which API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
        /// What kmock implements.
        range: VersionRange,
    },
    /// The request header does not decode.
    #[error("{api:?} v{version} request header does not decode: {reason}")]
    Header {
        /// Which API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
        /// The codec's reason.
        reason: String,
    },
    /// The request body does not decode at the version given.
    #[error("{api:?} v{version} request body does not decode: {reason}")]
    Body {
        /// Which API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
        /// The codec's reason.
        reason: String,
    },
    /// kmock built a response the codec cannot encode (a kmock bug).
    #[error("{api:?} v{version} response does not encode: {reason}")]
    Encode {
        /// Which API.
        api: ApiKey,
        /// The version answered.
        version: i16,
        /// The codec's reason.
        reason: String,
    },
}

/// The fixed start of every request header, readable before anything is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderPeek {
    /// API key as sent.
    pub api_key: i16,
    /// API version as sent.
    pub version: i16,
    /// Correlation id as sent.
    pub correlation_id: i32,
}

/// Reads api key, version and correlation id without decoding the rest.
///
/// # Errors
/// [`CodecError::TooShort`] for a frame under 8 bytes.
pub fn peek_header(frame: &[u8]) -> Result<HeaderPeek, CodecError> {
    if frame.len() < 8 {
        return Err(CodecError::TooShort(frame.len()));
    }
    let mut b = frame;
    Ok(HeaderPeek {
        api_key: b.get_i16(),
        version: b.get_i16(),
        correlation_id: b.get_i32(),
    })
}

/// Decodes a request frame (without its size prefix), within [`decode_budget`] of its size.
///
/// `supported` gives the version range kmock implements for an API, `None` if it does not.
///
/// # Errors
/// [`CodecError`] saying why the frame cannot be answered (a body over the budget is
/// [`CodecError::Body`], its reason saying "decode budget exceeded"); the connection must be
/// closed.
pub fn decode_request(
    frame: Bytes,
    supported: impl Fn(ApiKey) -> Option<VersionRange>,
) -> Result<Decoded, CodecError> {
    let peek = peek_header(&frame)?;
    let api =
        ApiKey::try_from(peek.api_key).map_err(|()| CodecError::UnknownApiKey(peek.api_key))?;
    let range = supported(api).ok_or(CodecError::NotImplemented(api))?;
    let version = peek.version;
    if version < range.min || version > range.max {
        if api == ApiKey::ApiVersions {
            return Ok(Decoded::ApiVersionsFallback {
                correlation_id: peek.correlation_id,
                version,
            });
        }
        return Err(CodecError::UnsupportedVersion {
            api,
            version,
            range,
        });
    }
    let budget = decode_budget(frame.len());
    let mut buf = frame;
    let (header, body) = budget::with_budget(budget, || {
        let header =
            RequestHeader::decode(&mut buf, api.request_header_version(version)).map_err(|e| {
                CodecError::Header {
                    api,
                    version,
                    reason: e.to_string(),
                }
            })?;
        // `{:#}`: the whole chain, down to the budget's or the array's own reason.
        let body = RequestKind::decode(api, &mut buf, version).map_err(|e| CodecError::Body {
            api,
            version,
            reason: format!("{e:#}"),
        })?;
        Ok((header, body))
    })?;
    Ok(Decoded::Request(Box::new(Request {
        header,
        api_key: api,
        version,
        body,
    })))
}

/// Encodes a response frame (without its size prefix): the response header for `api` at
/// `version`, then the body.
///
/// # Errors
/// [`CodecError::Encode`] when the body does not fit the version (a kmock bug).
pub fn encode_response(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, CodecError> {
    let mut buf = BytesMut::with_capacity(64);
    encode_response_into(&mut buf, api, version, correlation_id, body)?;
    Ok(buf.freeze())
}

/// Encodes a response frame as [`encode_response`] does (without its size prefix), appended to
/// `buf`: a connection's send buffer, so that the answer is not encoded into a buffer of its
/// own and copied.
///
/// # Errors
/// [`CodecError::Encode`] when the body does not fit the version (a kmock bug); `buf` then
/// holds part of the frame after what it held, for the caller to truncate.
pub fn encode_response_into(
    buf: &mut BytesMut,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<(), CodecError> {
    let fail = |e: anyhow::Error| CodecError::Encode {
        api,
        version,
        reason: e.to_string(),
    };
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(buf, api.response_header_version(version))
        .map_err(fail)?;
    body.encode(buf, version).map_err(fail)
}

/// Whether [`encode_response_pieces`] encodes `body` around its own shared buffers (a Fetch
/// answer) rather than as one piece that [`encode_response_into`] can write in place.
pub fn encoded_in_pieces(body: &ResponseKind) -> bool {
    matches!(body, ResponseKind::Fetch(_))
}

/// Smallest `bytes` field an encoded response keeps by reference ([`encode_response_pieces`]):
/// copying fewer bytes costs less than one more piece to write.
const SHARED_FIELD_BYTES: usize = 4 * 1024;

/// An encoded response frame (without its size prefix), in pieces to be sent in order.
#[derive(Debug, Clone)]
pub enum Encoded {
    /// The whole frame in one buffer.
    One(Bytes),
    /// A frame encoded around shared buffers ([`encode_response_pieces`]).
    Pieces(Vec<Bytes>),
}

impl Encoded {
    /// The pieces, in order.
    pub fn pieces(&self) -> &[Bytes] {
        match self {
            Encoded::One(frame) => std::slice::from_ref(frame),
            Encoded::Pieces(pieces) => pieces,
        }
    }
}

/// Encodes a response frame as [`encode_response`] does, as pieces to be sent in order: a Fetch
/// answer's records of [`SHARED_FIELD_BYTES`] or more are the answer's own shared buffers, not
/// copied ([`SharedBytesMut`]); any other answer is one piece.
///
/// # Errors
/// [`CodecError::Encode`] when the body does not fit the version (a kmock bug).
pub fn encode_response_pieces(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Encoded, CodecError> {
    let ResponseKind::Fetch(fetch) = body else {
        return encode_response(api, version, correlation_id, body).map(Encoded::One);
    };
    let fail = |e: anyhow::Error| CodecError::Encode {
        api,
        version,
        reason: e.to_string(),
    };
    let mut buf = SharedBytesMut::new(256, SHARED_FIELD_BYTES);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, api.response_header_version(version))
        .map_err(fail)?;
    fetch.encode(&mut buf, version).map_err(fail)?;
    Ok(Encoded::Pieces(buf.into_pieces()))
}

/// Kafka's name of an API (`Produce`, `OffsetCommit`, …), as the protocol's message
/// definitions spell it: made once for every key the codec knows, then shared, so that
/// journaling a request does not format its name.
pub fn api_name(api: ApiKey) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let mut names = Vec::new();
        for key in ApiKey::iter() {
            let at = key as usize;
            if names.len() <= at {
                names.resize(at + 1, "");
            }
            // Leaked once per process: fewer than a hundred short names.
            names[at] = Box::leak(format!("{key:?}").into_boxed_str());
        }
        names
    });
    names[api as usize]
}

/// `NotCoordinator` → `NOT_COORDINATOR`: a `kafka_protocol::ResponseError` variant's name as
/// Kafka spells the error.
pub(crate) fn screaming(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, FetchResponse, FetchableTopicResponse,
        LeaderIdAndEpoch, NodeEndpoint, PartitionData, SnapshotId,
    };
    use kafka_protocol::messages::{BrokerId, ProducerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    /// Records of every size around [`SHARED_FIELD_BYTES`]: none, empty, one byte under, at,
    /// and far over; each byte different from its neighbours, so a piece out of place shows.
    fn records() -> Vec<Option<Bytes>> {
        let sized = |len: usize, seed: u8| -> Bytes {
            (0..len)
                .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
                .collect()
        };
        vec![
            None,
            Some(Bytes::new()),
            Some(sized(SHARED_FIELD_BYTES - 1, 1)),
            Some(sized(SHARED_FIELD_BYTES, 2)),
            Some(sized(100_000, 3)),
        ]
    }

    /// A Fetch answer with every field `version` has set to a value other than its default:
    /// two topics, a partition for each of [`records`], aborted transactions, and from v12 the
    /// tagged fields (`diverging_epoch`, `current_leader`, `snapshot_id`), from v16
    /// `node_endpoints`.
    fn fetch_response(version: i16) -> FetchResponse {
        let partition = |index: i32, records: Option<Bytes>| {
            let mut p = PartitionData::default()
                .with_partition_index(index)
                .with_error_code(if index == 1 { 1 } else { 0 })
                .with_high_watermark(1000 + i64::from(index))
                .with_last_stable_offset(900 + i64::from(index))
                .with_aborted_transactions(Some(vec![
                    AbortedTransaction::default()
                        .with_producer_id(ProducerId(7))
                        .with_first_offset(12),
                    AbortedTransaction::default()
                        .with_producer_id(ProducerId(8))
                        .with_first_offset(40),
                ]))
                .with_records(records);
            if version >= 5 {
                p = p.with_log_start_offset(3);
            }
            if version >= 11 {
                p = p.with_preferred_read_replica(BrokerId(2));
            }
            if version >= 12 {
                p = p
                    .with_diverging_epoch(
                        EpochEndOffset::default().with_epoch(4).with_end_offset(500),
                    )
                    .with_current_leader(
                        LeaderIdAndEpoch::default()
                            .with_leader_id(BrokerId(1))
                            .with_leader_epoch(6),
                    )
                    .with_snapshot_id(SnapshotId::default().with_end_offset(77).with_epoch(3));
            }
            p
        };
        let topic = |name: &'static str, id: u128| {
            let mut t = FetchableTopicResponse::default().with_partitions(
                records()
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| partition(i as i32, r))
                    .collect(),
            );
            if version >= 13 {
                t = t.with_topic_id(uuid::Uuid::from_u128(id));
            } else {
                t = t.with_topic(TopicName(StrBytes::from_static_str(name)));
            }
            t
        };
        let mut response = FetchResponse::default()
            .with_throttle_time_ms(5)
            .with_responses(vec![topic("orders", 0xA1), topic("payments", 0xB2)]);
        if version >= 7 {
            response = response.with_session_id(99);
        }
        if version >= 16 {
            response = response.with_node_endpoints(vec![
                NodeEndpoint::default()
                    .with_node_id(BrokerId(1))
                    .with_host(StrBytes::from_static_str("broker-1"))
                    .with_port(9092)
                    .with_rack(Some(StrBytes::from_static_str("rack-a"))),
                NodeEndpoint::default()
                    .with_node_id(BrokerId(2))
                    .with_host(StrBytes::from_static_str("broker-2"))
                    .with_port(9093),
            ]);
        }
        response
    }

    /// Every Fetch version the codec encodes (kmock serves them all: `handlers::fetch::VERSIONS`
    /// is the crate's range): the pieces, joined, are the copied encoding byte for
    /// byte; the records of [`SHARED_FIELD_BYTES`] or more are pieces of their own (by
    /// reference), the smaller ones copied; and the joined bytes decode back to the answer.
    #[test]
    fn fetch_pieces_join_to_the_copied_encoding_at_every_version() {
        let served = <FetchResponse as kafka_protocol::protocol::Message>::VERSIONS;
        for version in served.min..=served.max {
            let response = fetch_response(version);
            let body = ResponseKind::Fetch(response.clone());
            let copied = encode_response(ApiKey::Fetch, version, 42, &body).unwrap();
            let Encoded::Pieces(pieces) =
                encode_response_pieces(ApiKey::Fetch, version, 42, &body).unwrap()
            else {
                panic!("v{version}: a Fetch answer encoded as one piece");
            };
            assert_eq!(pieces.concat(), copied.to_vec(), "v{version}");
            assert!(
                pieces.iter().all(|p| !p.is_empty()),
                "v{version}: empty piece"
            );
            let shared: Vec<_> = response
                .responses
                .iter()
                .flat_map(|t| &t.partitions)
                .filter_map(|p| p.records.as_ref())
                .filter(|r| r.len() >= SHARED_FIELD_BYTES)
                .collect();
            assert_eq!(shared.len(), 4, "two topics, 4096 and 100,000 bytes each");
            for records in &shared {
                assert!(
                    pieces.iter().any(|p| p.as_ptr() == records.as_ptr()),
                    "v{version}: records of {} bytes copied",
                    records.len()
                );
            }
            // A piece for each shared field and one for the bytes before and between them, and
            // one after from v12 (the last partition's tagged fields follow its 100,000 bytes of
            // records; before v12 they end the answer).
            let after = usize::from(version >= 12);
            assert_eq!(pieces.len(), 2 * shared.len() + after, "v{version}");
            let mut joined = Bytes::from(pieces.concat());
            let header =
                ResponseHeader::decode(&mut joined, ApiKey::Fetch.response_header_version(version))
                    .unwrap();
            assert_eq!(header.correlation_id, 42);
            let decoded = FetchResponse::decode(&mut joined, version).unwrap();
            assert_eq!(decoded, response, "v{version}");
            assert!(joined.is_empty(), "v{version}: bytes after the answer");
        }
    }
}
