//! The bytes a client writes on one connection (size-prefixed frames, sizes past the end cut
//! to fit) through the whole broker path: the connection task of broker 1 of an in-process
//! three-broker cluster (framing, decoding, journal, handlers, state, answers; no fault rule),
//! reset before each execution. Must never panic, abort or hang. The broker writes whole
//! frames, at most one per request; a lone request's answer decodes with kafka-protocol at the
//! request's version, echoing its correlation id.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Decodable;
use kmock_fuzz::{wire, Fixture};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (input, frames) = wire::fix_frames(data);
    let answer = Fixture::get().serve(&input);
    let answers = wire::split_frames(&answer).expect("the broker writes whole frames");
    assert!(answers.len() <= frames.len(), "more answers than requests");
    if let ([request], [response]) = (&frames[..], &answers[..]) {
        check_answer(request, response);
    }
});

/// `response` is the answer to `request`: it decodes at the request's version (v0 for the
/// ApiVersions fallback), to the last byte, and echoes the correlation id.
fn check_answer(request: &[u8], response: &[u8]) {
    let (api_key, version) = kmock::fuzzing::decode_request(Bytes::copy_from_slice(request))
        .expect("only a request that decodes is answered");
    let api = ApiKey::try_from(api_key).expect("a known API");
    let (min, max) = kmock::fuzzing::supported_versions(api_key).expect("an implemented API");
    let version = if (min..=max).contains(&version) {
        version
    } else {
        0
    };
    let mut buf = Bytes::copy_from_slice(response);
    let header = ResponseHeader::decode(&mut buf, api.response_header_version(version))
        .expect("the response header decodes");
    let correlation_id = i32::from_be_bytes(request[4..8].try_into().unwrap());
    assert_eq!(header.correlation_id, correlation_id);
    ResponseKind::decode(api, &mut buf, version)
        .unwrap_or_else(|e| panic!("{api:?} v{version} answer does not decode: {e}"));
    assert!(
        buf.is_empty(),
        "{api:?} v{version}: {} bytes after the answer",
        buf.len()
    );
}
