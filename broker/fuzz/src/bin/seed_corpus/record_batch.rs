//! The `record_batch` seeds: structured inputs found by a seeded search.

use std::collections::BTreeMap;

use arbitrary::{Arbitrary, Unstructured};
use kmock_fuzz::batch::{BatchInput, Payload};

/// Structured `record_batch` inputs from a seeded search over random bytes: the first input
/// found for each (codec, verdict), preferring small ones, until an accepted batch was found
/// for every codec.
pub(super) fn seeds() -> BTreeMap<String, Vec<u8>> {
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut found = BTreeMap::new();
    for _ in 0..200_000 {
        let len = 32 + (next() % 224) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let Ok(input) = BatchInput::arbitrary_take_rest(Unstructured::new(&data)) else {
            continue;
        };
        if matches!(input.payload, Payload::Repeated { times, .. } if times % 19 > 12) {
            continue; // seeds stay small and fast; the fuzzer grows them
        }
        let built = input.build();
        let codec = built.bytes.get(22).map_or(9, |a| a & 7);
        let verdict = match kmock::fuzzing::validate_batch(&built.bytes, input.rules()) {
            Ok(_) => "accepted".to_owned(),
            Err((code, _)) => format!("error-{code}"),
        };
        found
            .entry(format!("codec-{codec}-{verdict}"))
            .or_insert(data);
        if (0..5).all(|c| found.contains_key(&format!("codec-{c}-accepted"))) && found.len() >= 30 {
            break;
        }
    }
    for c in 0..5 {
        assert!(
            found.contains_key(&format!("codec-{c}-accepted")),
            "no accepted batch with codec {c} found: {:?}",
            found.keys().collect::<Vec<_>>()
        );
    }
    found
}
