//! [`SharedBytesMut`] encodes what a `BytesMut` does, in pieces.

use super::*;
use crate::protocol::types;
use crate::protocol::Encoder;

/// The pieces of a message with shared fields are the bytes a `BytesMut` encodes, gaps
/// filled after a shared field included.
#[test]
fn shared_pieces_join_to_the_copied_encoding() {
    let big = Bytes::from(vec![7u8; 100]);
    let small = Bytes::from_static(b"abc");
    fn run<B: ByteBufMut>(buf: &mut B, big: &Bytes, small: &Bytes) {
        types::Int32.encode(buf, 1).unwrap();
        let gap = buf.put_gap(4);
        types::CompactBytes.encode(buf, Some(big)).unwrap();
        types::Bytes.encode(buf, Some(small)).unwrap();
        types::Bytes.encode(buf, Some(big)).unwrap();
        let late = buf.put_gap(2);
        types::Int32.encode(buf, 9).unwrap();
        buf.gap_buf(gap).copy_from_slice(b"GAP!");
        buf.gap_buf(late).copy_from_slice(b"LT");
    }
    let mut copied = BytesMut::new();
    run(&mut copied, &big, &small);
    let mut shared = SharedBytesMut::new(8, 10);
    run(&mut shared, &big, &small);
    assert_eq!(shared.offset(), copied.len());
    let pieces = shared.into_pieces();
    assert_eq!(pieces.len(), 5, "head, big, head, big, head");
    assert_eq!(pieces[1].as_ptr(), big.as_ptr(), "kept by reference");
    assert_eq!(pieces.concat(), copied.to_vec());
}

/// Runs `ops` on a `BytesMut` and on a `SharedBytesMut` (fields of 10 bytes or more kept by
/// reference) and asserts they encode the same bytes, the pieces none empty; returns the
/// pieces.
fn same_as_copied(ops: impl Fn(&mut dyn FnMut(Op))) -> Vec<Bytes> {
    let mut copied = BytesMut::new();
    let mut shared = SharedBytesMut::new(8, 10);
    ops(&mut |op| {
        op.apply(&mut copied);
        op.apply(&mut shared);
        assert_eq!(shared.offset(), copied.len(), "after {op:?}");
    });
    let pieces = shared.into_pieces();
    assert!(pieces.iter().all(|p| !p.is_empty()), "an empty piece");
    assert_eq!(pieces.concat(), copied.to_vec());
    pieces
}

#[derive(Debug, Clone)]
enum Op {
    Slice(&'static [u8]),
    Shared(Bytes),
    Seek(usize),
    /// Writes its bytes over the message's, from the offset.
    Range(usize, &'static [u8]),
}

impl Op {
    fn apply<B: ByteBufMut>(&self, buf: &mut B) {
        match self {
            Op::Slice(s) => buf.put_slice(s),
            Op::Shared(b) => buf.put_shared(b),
            Op::Seek(to) => buf.seek(*to),
            Op::Range(at, s) => buf.range(*at..at + s.len()).copy_from_slice(s),
        }
    }
}

fn field(len: usize, fill: u8) -> Bytes {
    (0..len).map(|i| fill.wrapping_add(i as u8)).collect()
}

#[test]
fn a_backward_seek_drops_the_shared_fields_past_the_new_end() {
    let (big, later) = (field(100, 1), field(50, 9));
    let pieces = same_as_copied(|op| {
        op(Op::Slice(b"head"));
        op(Op::Shared(big.clone()));
        op(Op::Slice(b"mid"));
        op(Op::Shared(later.clone()));
        op(Op::Slice(b"end"));
        // Back to the start of `big`: it and everything after are gone.
        op(Op::Seek(4));
        op(Op::Slice(b"again"));
    });
    assert_eq!(pieces, [Bytes::from_static(b"headagain")]);
}

#[test]
fn a_backward_seek_into_a_shared_field_cuts_it() {
    let big = field(100, 1);
    let pieces = same_as_copied(|op| {
        op(Op::Slice(b"head"));
        op(Op::Shared(big.clone()));
        op(Op::Slice(b"tail"));
        op(Op::Seek(4 + 60));
        op(Op::Slice(b"after"));
    });
    assert_eq!(pieces.len(), 3, "head, the cut field, after");
    assert_eq!(
        pieces[1].as_ptr(),
        big.as_ptr(),
        "the cut field still by reference"
    );
    assert_eq!(pieces[1].len(), 60);
    // Cut under `min_shared`: copied.
    let pieces = same_as_copied(|op| {
        op(Op::Slice(b"head"));
        op(Op::Shared(big.clone()));
        op(Op::Seek(4 + 5));
        op(Op::Slice(b"after"));
    });
    assert_eq!(pieces.len(), 1);
}

#[test]
fn a_range_over_a_shared_field_copies_it_first() {
    let (big, later) = (field(100, 1), field(50, 9));
    let pieces = same_as_copied(|op| {
        op(Op::Slice(b"head"));
        op(Op::Shared(big.clone()));
        op(Op::Slice(b"mid"));
        op(Op::Shared(later.clone()));
        op(Op::Slice(b"end"));
        // From the head's last byte into `big`; then across `big`'s end into "mid".
        op(Op::Range(3, b"XYZ"));
        op(Op::Range(4 + 98, b"PQRS"));
        // Into `later`, now the only shared field left.
        op(Op::Range(4 + 100 + 3 + 10, b"LL"));
    });
    assert_eq!(pieces.len(), 1, "every field copied");
    // A range of head bytes between two fields leaves them shared.
    let pieces = same_as_copied(|op| {
        op(Op::Slice(b"head"));
        op(Op::Shared(big.clone()));
        op(Op::Slice(b"mid"));
        op(Op::Shared(later.clone()));
        op(Op::Range(4 + 100, b"MID"));
        op(Op::Range(0, b""));
        op(Op::Range(4, b""));
    });
    assert_eq!(pieces.len(), 4);
    assert_eq!(pieces[2], Bytes::from_static(b"MID"));
}

#[test]
fn empty_fields_are_never_pieces() {
    let mut buf = SharedBytesMut::new(0, 0);
    buf.put_shared(&Bytes::new());
    buf.put_shared(&Bytes::from_static(b"a"));
    buf.put_shared(&Bytes::new());
    assert_eq!(buf.offset(), 1);
    assert_eq!(buf.into_pieces(), [Bytes::from_static(b"a")]);
    assert!(SharedBytesMut::new(0, 0).into_pieces().is_empty());
}

/// Random writes, shares, seeks anywhere and ranges anywhere inside the message: the same
/// bytes as a `BytesMut`, no panic, no empty piece (seeded, so every run is the same).
#[test]
fn any_seeks_and_ranges_encode_as_a_bytes_mut_does() {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |below: usize| {
        // xorshift64
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % below.max(1) as u64) as usize
    };
    let fields = [field(0, 0), field(3, 3), field(10, 10), field(40, 40)];
    for _ in 0..2000 {
        let mut ops = Vec::new();
        let mut len = 0usize;
        for _ in 0..12 {
            let op = match next(4) {
                0 => Op::Slice(&b"0123456789"[..next(11)]),
                1 => Op::Shared(fields[next(fields.len())].clone()),
                2 => Op::Seek(next(len + 6)),
                _ => {
                    let at = next(len + 1);
                    Op::Range(at, &b"RANGE-RANGE"[..next(len - at + 1).min(11)])
                }
            };
            len = match &op {
                Op::Slice(s) => len + s.len(),
                Op::Shared(b) => len + b.len(),
                Op::Seek(to) => *to,
                Op::Range(..) => len,
            };
            ops.push(op);
        }
        same_as_copied(|op| ops.iter().cloned().for_each(&mut *op));
    }
}
