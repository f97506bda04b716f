//! kmock patch: shared bytes. [`SharedBytesMut`], a buffer that keeps large `bytes` fields by
//! reference, so that an encoded message is sent as pieces with a vectored write.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

use super::ByteBufMut;

/// kmock patch: shared bytes. A [`BytesMut`] that keeps the `bytes` fields put through
/// [`ByteBufMut::put_shared`] by reference, from `min_shared` bytes on (and never an empty one),
/// instead of copying them: the encoded message is then its pieces in order
/// ([`SharedBytesMut::into_pieces`]), the shared fields among the bytes written around them, for
/// a vectored write.
///
/// It encodes whatever a [`BytesMut`] would, byte for byte, whatever the seeks and ranges:
/// - [`ByteBufMut::seek`] forward adds zeros, as `BytesMut` does; backward it truncates the
///   message: the shared fields past the new end are dropped, and one the new end falls inside
///   is cut there (kept by reference if still `min_shared` bytes or more, else copied);
/// - [`ByteBufMut::range`] over bytes of a shared field (a gap written over it) first copies
///   that field and every later one into the buffer, so that the range is writable. Encoders
///   write gaps only over bytes they wrote themselves, so this is never the case for them.
///
/// Like `BytesMut`'s, [`ByteBufMut::range`] panics only for a range past the end of the message
/// (a bug of the caller); nothing else panics.
#[derive(Debug)]
pub struct SharedBytesMut {
    /// Everything but the shared fields.
    head: BytesMut,
    /// The shared fields in order, none empty, each with the length `head` had when it was put
    /// (non-decreasing, at most `head.len()`).
    shared: Vec<(usize, Bytes)>,
    /// The bytes of `shared`.
    shared_len: usize,
    min_shared: usize,
}

/// Where a byte of the message is in a [`SharedBytesMut`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// In `head`, at `at`, after the first `before` shared fields (a byte right at the start of
    /// a shared field is placed here, before it).
    Head { at: usize, before: usize },
    /// Inside shared field `index`, `into` bytes from its start (`0 < into < len`).
    Shared { index: usize, into: usize },
}

impl SharedBytesMut {
    /// An empty buffer of `capacity` bytes that keeps fields of `min_shared` bytes or more by
    /// reference (empty fields are always copied, as nothing: a `min_shared` of 0 acts as 1).
    pub fn new(capacity: usize, min_shared: usize) -> Self {
        Self {
            head: BytesMut::with_capacity(capacity),
            shared: Vec::new(),
            shared_len: 0,
            min_shared,
        }
    }

    /// The encoded bytes, as pieces to be sent in order (none empty).
    pub fn into_pieces(self) -> Vec<Bytes> {
        let head = self.head.freeze();
        let mut pieces = Vec::with_capacity(2 * self.shared.len() + 1);
        let mut from = 0;
        for (at, shared) in self.shared {
            if at > from {
                pieces.push(head.slice(from..at));
            }
            pieces.push(shared);
            from = at;
        }
        if head.len() > from {
            pieces.push(head.slice(from..));
        }
        pieces
    }

    /// Where the message's byte `offset` is (an offset at or past the end is in `head`, past
    /// every shared field).
    fn place(&self, offset: usize) -> Place {
        // The shared bytes before `offset`, so far.
        let mut skipped = 0;
        for (index, (at, shared)) in self.shared.iter().enumerate() {
            let start = at + skipped;
            match offset.checked_sub(start) {
                // `offset` is at or past the end of the previous field, so `skipped` or more.
                None | Some(0) => {
                    return Place::Head {
                        at: offset - skipped,
                        before: index,
                    }
                }
                Some(into) if into < shared.len() => return Place::Shared { index, into },
                Some(_) => skipped += shared.len(),
            }
        }
        Place::Head {
            at: offset - skipped,
            before: self.shared.len(),
        }
    }

    /// Copies shared fields `from..` into `head`, in their places.
    fn unshare_from(&mut self, from: usize) {
        if from >= self.shared.len() {
            return;
        }
        let unshared = self.shared.split_off(from);
        let base = unshared[0].0;
        let tail = self.head.split_off(base);
        // Bytes of `tail` copied back; the fields' `at`s are non-decreasing, from `base`, at
        // most the old `head.len()`.
        let mut copied = 0;
        for (at, shared) in &unshared {
            let at = at - base;
            self.head.extend_from_slice(&tail[copied..at]);
            self.head.extend_from_slice(shared);
            copied = at;
        }
        self.head.extend_from_slice(&tail[copied..]);
        self.shared_len = self.shared.iter().map(|(_, s)| s.len()).sum();
    }

    /// Puts `value` by reference if it is `min_shared` bytes or more and not empty, else copies it.
    fn put_maybe_shared(&mut self, value: Bytes) {
        if value.is_empty() || value.len() < self.min_shared {
            self.head.put_slice(&value);
        } else {
            self.shared_len += value.len();
            self.shared.push((self.head.len(), value));
        }
    }
}

unsafe impl BufMut for SharedBytesMut {
    fn remaining_mut(&self) -> usize {
        self.head.remaining_mut()
    }
    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller's promise (`cnt` bytes of `chunk_mut` initialised) is `head`'s.
        unsafe { self.head.advance_mut(cnt) }
    }
    fn chunk_mut(&mut self) -> &mut bytes::buf::UninitSlice {
        self.head.chunk_mut()
    }
    fn put_slice(&mut self, src: &[u8]) {
        self.head.put_slice(src);
    }
}

impl ByteBufMut for SharedBytesMut {
    fn offset(&self) -> usize {
        self.head.len() + self.shared_len
    }
    /// Forward, zeros; backward, the message truncated, shared fields past the new end
    /// dropped and one it falls inside cut ([`SharedBytesMut`]).
    fn seek(&mut self, offset: usize) {
        match self.place(offset) {
            Place::Head { at, before } => {
                self.shared.truncate(before);
                self.head.resize(at, 0);
                self.shared_len = self.shared.iter().map(|(_, s)| s.len()).sum();
            }
            Place::Shared { index, into } => {
                // The field cut; the last one takes its place, dropped with those after it.
                let (at, field) = self.shared.swap_remove(index);
                self.shared.truncate(index);
                self.head.truncate(at);
                self.shared_len = self.shared.iter().map(|(_, s)| s.len()).sum();
                self.put_maybe_shared(field.slice(..into));
            }
        }
    }
    /// The bytes of `r`, the shared fields from the first it overlaps on copied into the
    /// buffer first ([`SharedBytesMut`]).
    ///
    /// # Panics
    /// As a `BytesMut`'s: when `r` ends past the end of the message.
    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        let len = r.len();
        let overlapped = match self.place(r.start) {
            Place::Shared { index, .. } => Some(index),
            Place::Head { at, before } => self
                .shared
                .get(before)
                .filter(|(next, _)| at + len > *next)
                .map(|_| before),
        };
        if let Some(index) = overlapped {
            self.unshare_from(index);
        }
        // Once unshared, the range's start is in `head` (never `Shared`: that field was copied).
        let start = match self.place(r.start) {
            Place::Head { at, .. } => at,
            Place::Shared { .. } => self.head.len(),
        };
        &mut self.head[start..start + len]
    }
    fn put_shared(&mut self, value: &Bytes) {
        self.put_maybe_shared(value.clone());
    }
}

#[cfg(test)]
mod tests;
