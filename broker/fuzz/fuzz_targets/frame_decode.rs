//! One request frame (without its size prefix) through kmock's codec: header peek, API and
//! version check, header and body decode, for any API key and version. Must never panic or
//! abort; a frame that decodes is the API and version its header announced.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|frame: &[u8]| {
    if let Ok((api_key, version)) = kmock::fuzzing::decode_request(Bytes::copy_from_slice(frame)) {
        let announced = (
            i16::from_be_bytes([frame[0], frame[1]]),
            i16::from_be_bytes([frame[2], frame[3]]),
        );
        assert_eq!((api_key, version), announced);
    }
});
