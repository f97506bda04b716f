//! Kafka's 4-byte size-prefixed framing, for the bytes of one connection.

/// `data` read as size-prefixed frames, with each non-negative size that runs past the end cut
/// to the bytes left, so a mutated input stays a stream of whole frames. A negative size (the
/// broker refuses it) and fewer than 4 bytes at the end (a cut size prefix) are kept as they
/// are. Gives the bytes to send and the frames in them.
pub fn fix_frames(data: &[u8]) -> (Vec<u8>, Vec<&[u8]>) {
    let mut out = Vec::with_capacity(data.len());
    let mut frames = Vec::new();
    let mut rest = data;
    while rest.len() >= 4 {
        let size = i32::from_be_bytes(rest[..4].try_into().expect("4 bytes"));
        if size < 0 {
            break;
        }
        let len = (size as usize).min(rest.len() - 4);
        out.extend_from_slice(&(len as i32).to_be_bytes());
        out.extend_from_slice(&rest[4..4 + len]);
        frames.push(&rest[4..4 + len]);
        rest = &rest[4 + len..];
    }
    out.extend_from_slice(rest);
    (out, frames)
}

/// `data` split into whole frames (without their size prefixes); `None` when it does not end
/// on a frame boundary or a size is negative.
pub fn split_frames(mut data: &[u8]) -> Option<Vec<&[u8]>> {
    let mut frames = Vec::new();
    while !data.is_empty() {
        let size: [u8; 4] = data.get(..4)?.try_into().ok()?;
        let len = usize::try_from(i32::from_be_bytes(size)).ok()?;
        frames.push(data.get(4..4 + len)?);
        data = &data[4 + len..];
    }
    Some(frames)
}

/// Prefixes `frame` with its size.
pub fn framed(frame: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + frame.len());
    out.extend_from_slice(&(frame.len() as i32).to_be_bytes());
    out.extend_from_slice(frame);
    out
}
