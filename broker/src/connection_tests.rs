//! Tests of the framing layer (`connection.rs`).

use tokio::io::AsyncWriteExt;

use super::*;

const MAX: usize = 100 * 1024 * 1024;

/// A reader over a pipe already holding `bytes`, with the pipe's other end kept open.
async fn reader_with(
    bytes: &[u8],
) -> (
    FrameReader<tokio::io::DuplexStream>,
    tokio::io::DuplexStream,
) {
    let (mut client, server) = tokio::io::duplex(2 * 1024 * 1024);
    client.write_all(bytes).await.unwrap();
    (
        FrameReader::new(server, MAX, Duration::from_secs(1)),
        client,
    )
}

fn prefix(len: usize) -> Vec<u8> {
    (len as u32).to_be_bytes().to_vec()
}

#[tokio::test(start_paused = true)]
async fn a_claimed_size_reserves_nothing_and_a_stalled_frame_times_out() {
    let mut bytes = prefix(99 * 1024 * 1024);
    bytes.extend([1u8; 1024]);
    let (mut reader, _client) = reader_with(&bytes).await;
    let e = reader.read_frame().await.unwrap_err();
    assert!(
        matches!(
            e,
            FrameError::Stalled {
                read: 1028,
                expected: 103_809_028,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(reader.buffer_capacity(), READ_BUFFER_BYTES);
}

#[tokio::test(start_paused = true)]
async fn a_large_frame_grows_the_buffer_with_what_arrived_only() {
    let arrived = 600 * 1024;
    let mut bytes = prefix(5 * 1024 * 1024);
    bytes.extend(vec![2u8; arrived - 4]);
    let (mut reader, _client) = reader_with(&bytes).await;
    assert!(matches!(
        reader.read_frame().await,
        Err(FrameError::Stalled { .. })
    ));
    let capacity = reader.buffer_capacity();
    assert!(
        (arrived..=2 * arrived).contains(&capacity),
        "a buffer of {capacity} bytes for {arrived} arrived"
    );
}

#[tokio::test(start_paused = true)]
async fn a_frame_grown_into_comes_whole_and_leaves_no_buffer_behind() {
    let len = 300 * 1024;
    let mut bytes = prefix(len);
    bytes.extend((0..len).map(|i| i as u8));
    bytes.extend(prefix(3));
    bytes.extend([9, 9, 9]);
    let (mut reader, _client) = reader_with(&bytes).await;
    let frame = reader.read_frame().await.unwrap().unwrap();
    assert_eq!(frame.len(), len);
    assert!(frame.iter().enumerate().all(|(i, b)| *b == i as u8));
    let small = reader.read_frame().await.unwrap().unwrap();
    assert_eq!(&small[..], &[9, 9, 9]);
    assert_eq!(
        reader.buffer_capacity(),
        0,
        "an idle reader holds no buffer"
    );
}

/// A large frame that starts behind a small one in the read buffer moves to a buffer of its
/// own, which its reads fill up to its end and no further (the next frame stays for the
/// next read), and which becomes the frame: exactly its size, with nothing else in it.
#[tokio::test]
async fn a_large_frame_behind_a_small_one_comes_in_a_buffer_of_its_own_size() {
    let len = 200 * 1024;
    let mut bytes = prefix(2);
    bytes.extend([5, 5]);
    bytes.extend(prefix(len));
    bytes.extend((0..len).map(|i| (i * 7) as u8));
    bytes.extend(prefix(1));
    bytes.push(6);
    let (mut reader, _client) = reader_with(&bytes).await;
    assert_eq!(&reader.read_frame().await.unwrap().unwrap()[..], &[5, 5]);
    let frame = reader.read_frame().await.unwrap().unwrap();
    assert_eq!(frame.len(), len);
    assert!(frame.iter().enumerate().all(|(i, b)| *b == (i * 7) as u8));
    assert_eq!(reader.buffer_capacity(), 0, "the frame took its buffer");
    assert_eq!(&reader.read_frame().await.unwrap().unwrap()[..], &[6]);
}

/// A large frame cut short reports what of it arrived, its prefix included.
#[tokio::test]
async fn a_large_frame_cut_short_is_truncated() {
    let mut bytes = prefix(100 * 1024);
    bytes.extend([3u8; 70 * 1024]);
    let (mut reader, client) = reader_with(&bytes).await;
    drop(client);
    let e = reader.read_frame().await.unwrap_err();
    assert!(
        matches!(
            e,
            FrameError::Truncated {
                read: 71_684,
                expected: 102_404,
            }
        ),
        "{e}"
    );
}

/// A frame read whole in the first read, alone, becomes a buffer of its own size; one
/// followed by more bytes is taken from a shared read buffer; either way the reader then
/// holds no buffer.
#[tokio::test]
async fn a_small_frame_read_alone_comes_in_a_buffer_of_its_size() {
    let mut bytes = prefix(5);
    bytes.extend([1, 2, 3, 4, 5]);
    let (mut reader, mut client) = reader_with(&bytes).await;
    let frame = reader.read_frame().await.unwrap().unwrap();
    assert_eq!(&frame[..], &[1, 2, 3, 4, 5]);
    assert_eq!(
        reader.buffer_capacity(),
        0,
        "no buffer held after the frame"
    );
    let mut two = prefix(2);
    two.extend([7, 7]);
    two.extend(prefix(0));
    two.extend(prefix(1));
    client.write_all(&two).await.unwrap();
    assert_eq!(&reader.read_frame().await.unwrap().unwrap()[..], &[7, 7]);
    assert!(reader.read_frame().await.unwrap().unwrap().is_empty());
    assert!(reader.buffer_capacity() > 0, "a frame under way");
    client.write_all(&[8]).await.unwrap();
    assert_eq!(&reader.read_frame().await.unwrap().unwrap()[..], &[8]);
    assert_eq!(
        reader.buffer_capacity(),
        0,
        "an idle reader holds no buffer"
    );
    drop(client);
    assert!(reader.read_frame().await.unwrap().is_none());
}

/// A frame of pieces (empty ones among them) reads back as one frame, also through a pipe
/// narrower than the frame, which takes it in several partial writes.
#[tokio::test]
async fn a_frame_of_pieces_reads_back_whole() {
    let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    let pieces: [&[u8]; 5] = [b"head", &[], &big, b"tail", &[]];
    let (mut client, server) = tokio::io::duplex(4096);
    let mut reader = FrameReader::new(server, MAX, Duration::from_secs(5));
    let (written, frame) = tokio::join!(
        write_frame_pieces(&mut client, &pieces),
        reader.read_frame()
    );
    written.unwrap();
    let frame = frame.unwrap().unwrap();
    let mut expected = b"head".to_vec();
    expected.extend(&big);
    expected.extend(b"tail");
    assert_eq!(frame.len(), expected.len());
    assert!(frame[..] == expected[..], "the pieces, in order");
}
