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
    let fail = |e: anyhow::Error| CodecError::Encode {
        api,
        version,
        reason: e.to_string(),
    };
    let mut buf = BytesMut::with_capacity(64);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, api.response_header_version(version))
        .map_err(fail)?;
    body.encode(&mut buf, version).map_err(fail)?;
    Ok(buf.freeze())
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
