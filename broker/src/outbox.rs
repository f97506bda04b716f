//! A connection's answers on their way out ([`Outbox`]): written to a buffer, and sent in one
//! write system call when no further request is queued on the connection, before anything
//! that waits, or when the buffer is full, instead of one system call per answer.
//!
//! An answer's journal entry is completed when its bytes have been handed to the socket, with
//! the time of that hand-over as the response's `at_us`, as when every answer was written at
//! once: a request that arrives after an answer was buffered but before it was sent is still
//! one the client sent while that answer was pending (`inflight-exceeded` counts on it).
//! From the write until the completion, the answers are a hand-over in progress, which readers
//! of the journal wait for (`Journal::settled`): the client may hold them already.

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, ResponseKind};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::codec::{self, CodecError};
use crate::connection::write_frame_pieces;
use crate::handlers::Digests;
use crate::journal::summary::{self, ResponseSummary};
use crate::journal::{Entry, Journal};

/// Most bytes of answers buffered before they are sent. An answer written in pieces
/// ([`Outbox::write_pieces`]) that is larger is written on its own (after what is buffered),
/// straight from its pieces; one encoded into the buffer ([`Outbox::encode_answer`]) is
/// buffered whole, and the buffer sent once it holds this much or more.
const BUFFER_BYTES: usize = 64 * 1024;

/// A buffer kept past a send up to this capacity; a larger one is freed, so that an idle
/// connection does not hold a burst's buffer.
const KEPT_BUFFER_BYTES: usize = 8 * 1024;

/// Answers written and not yet sent, with the journal entries to complete once they are.
pub(crate) struct Outbox<'a, W> {
    writer: W,
    journal: &'a Journal,
    /// Size-prefixed frames, in answer order (a `BytesMut`, as the codec encodes into one).
    buffer: BytesMut,
    /// The entries of the answers in `buffer`, in the same order.
    unsent: Vec<Unsent>,
}

/// An answer in the buffer: what its journal entry is completed with.
struct Unsent {
    seq: u64,
    /// `None` for an answer a proxy forwards without decoding it.
    body: Option<Box<ResponseKind>>,
    digests: Digests,
}

impl<'a, W: AsyncWrite + Unpin> Outbox<'a, W> {
    /// An empty outbox writing to `writer`, completing entries of `journal`.
    pub fn new(writer: W, journal: &'a Journal) -> Self {
        Self {
            writer,
            journal,
            buffer: BytesMut::new(),
            unsent: Vec::new(),
        }
    }

    /// Whether answers are waiting to be sent.
    pub fn has_unsent(&self) -> bool {
        !self.unsent.is_empty()
    }

    /// Adds the answer to request `seq` (its encoded `frame`, without the size prefix, and its
    /// decoded `body`, `None` for one forwarded undecoded, and record `digests` for the
    /// journal); sends what is buffered first when
    /// the answer does not fit, and sends an answer larger than the buffer at once.
    ///
    /// # Errors
    /// The socket's error; the entries of the answers not sent are then to be completed
    /// unanswered ([`Self::abandon`]), this one included.
    pub async fn write(
        &mut self,
        seq: u64,
        frame: &[u8],
        body: Option<Box<ResponseKind>>,
        digests: Digests,
    ) -> std::io::Result<()> {
        self.write_pieces(seq, &[frame], body, digests).await
    }

    /// [`Self::write`] for a frame made of `pieces` in order (an answer encoded around shared
    /// buffers, `codec::encode_response_pieces`): an answer larger than the buffer is sent
    /// from its pieces in vectored writes, without being copied.
    ///
    /// # Errors
    /// As [`Self::write`].
    pub async fn write_pieces<P: AsRef<[u8]>>(
        &mut self,
        seq: u64,
        pieces: &[P],
        body: Option<Box<ResponseKind>>,
        digests: Digests,
    ) -> std::io::Result<()> {
        let len: usize = pieces.iter().map(|p| p.as_ref().len()).sum();
        let size = 4 + len;
        if self.buffer.len() + size > BUFFER_BYTES {
            self.send().await?;
        }
        self.unsent.push(Unsent { seq, body, digests });
        if size > BUFFER_BYTES {
            let _handing = self.journal.records().then(|| self.journal.hand_over());
            let sending_us = self.journal.now_us();
            write_frame_pieces(&mut self.writer, pieces).await?;
            self.sent(sending_us);
            return Ok(());
        }
        let prefix = u32::try_from(len).expect("smaller than the buffer");
        self.buffer.extend_from_slice(&prefix.to_be_bytes());
        for piece in pieces {
            self.buffer.extend_from_slice(piece.as_ref());
        }
        Ok(())
    }

    /// Adds the answer `body` to request `seq` (`api` at `version`, echoing `correlation_id`;
    /// with record `digests` for the journal), encoded straight into the buffer after its size
    /// prefix (`codec::encode_response_into`), without a buffer of its own or a copy: for an
    /// answer not encoded in pieces (`codec::encoded_in_pieces`). Returns whether the buffer
    /// now holds [`BUFFER_BYTES`] or more, to be sent ([`Self::send`]) before anything else is
    /// written: unlike [`Self::write`], a large answer is buffered whole before it is sent.
    ///
    /// # Errors
    /// The codec's error (a kmock bug), or a frame of 4 GiB or more, with the `digests` given
    /// back; nothing is added then.
    pub fn encode_answer(
        &mut self,
        seq: u64,
        (api, version, correlation_id): (ApiKey, i16, i32),
        body: Box<ResponseKind>,
        digests: Digests,
    ) -> Result<bool, (CodecError, Digests)> {
        let start = self.buffer.len();
        self.buffer.extend_from_slice(&[0; 4]);
        let encoded =
            codec::encode_response_into(&mut self.buffer, api, version, correlation_id, &body)
                .and_then(|()| {
                    u32::try_from(self.buffer.len() - start - 4).map_err(|_| CodecError::Encode {
                        api,
                        version,
                        reason: "response frame larger than 4 GiB".to_owned(),
                    })
                });
        let prefix = match encoded {
            Ok(prefix) => prefix,
            Err(e) => {
                self.buffer.truncate(start);
                return Err((e, digests));
            }
        };
        self.buffer[start..start + 4].copy_from_slice(&prefix.to_be_bytes());
        self.unsent.push(Unsent {
            seq,
            body: Some(body),
            digests,
        });
        Ok(self.buffer.len() >= BUFFER_BYTES)
    }

    /// Sends every buffered answer and completes their journal entries.
    ///
    /// # Errors
    /// The socket's error (see [`Self::write`]).
    pub async fn send(&mut self) -> std::io::Result<()> {
        let _handing =
            (self.journal.records() && !self.unsent.is_empty()).then(|| self.journal.hand_over());
        let sending_us = self.journal.now_us();
        if !self.buffer.is_empty() {
            self.writer.write_all(&self.buffer).await?;
            self.writer.flush().await?;
            self.buffer.clear();
            if self.buffer.capacity() > KEPT_BUFFER_BYTES {
                self.buffer = BytesMut::new();
            }
        }
        self.sent(sending_us);
        Ok(())
    }

    /// Completes the entries of the answers just handed to the socket (from `sending_us`),
    /// answered now.
    fn sent(&mut self, sending_us: u64) {
        if self.unsent.is_empty() {
            return;
        }
        let at_us = self.journal.now_us();
        for Unsent { seq, body, digests } in self.unsent.drain(..) {
            // Made before the journal's lock is taken (and not at all when nothing is kept).
            let response = self.journal.records().then(|| ResponseSummary {
                at_us,
                sending_us: Some(sending_us),
                error_codes: body
                    .as_ref()
                    .map_or_else(Vec::new, |b| summary::error_codes(b)),
            });
            self.journal.finish(seq, |entry| {
                add_digests(entry, digests);
                if let (Some(request), Some(body)) = (&mut entry.request, &body) {
                    summary::complete(request, body);
                }
                entry.response = response;
            });
        }
    }

    /// Completes the entries of the answers not sent (a write failed, or the connection is
    /// closing), unanswered, and forgets their bytes.
    pub fn abandon(&mut self) {
        self.buffer = BytesMut::new();
        for Unsent { seq, digests, .. } in self.unsent.drain(..) {
            self.journal
                .finish(seq, |entry| add_digests(entry, digests));
        }
    }
}

/// Puts a Produce request's record digests into its entry.
pub(crate) fn add_digests(entry: &mut Entry, digests: Digests) {
    if let (Some(request), false) = (&mut entry.request, digests.is_empty()) {
        summary::add_digests(request, digests);
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::Arc;

    use kafka_protocol::messages::ResponseKind;
    use tokio::io::AsyncReadExt;

    use super::*;
    use crate::journal::Arrival;

    /// An answer that fails to encode (a field its version lacks, found after the header and
    /// the brokers were written) leaves nothing of itself in the buffer: the answer before it
    /// goes out whole and alone, and the failed one is not among the answers to complete.
    #[tokio::test]
    async fn an_answer_that_fails_to_encode_leaves_nothing_of_itself_in_the_buffer() {
        use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
        use kafka_protocol::messages::{ApiVersionsResponse, MetadataResponse};
        use kafka_protocol::protocol::StrBytes;

        let journal = Journal::new(100, 1 << 20, None);
        let from = Arrival {
            broker: 1,
            conn: 1,
            peer: SocketAddr::from((Ipv4Addr::LOCALHOST, 1)),
        };
        let (first, second) = (journal.append(&from, |_| {}), journal.append(&from, |_| {}));
        let (writer, mut client) = tokio::io::duplex(1 << 16);
        let mut outbox = Outbox::new(writer, &journal);
        let answered = ResponseKind::ApiVersions(ApiVersionsResponse::default());
        let full = outbox.encode_answer(
            first,
            (ApiKey::ApiVersions, 0, 7),
            Box::new(answered.clone()),
            Digests::new(),
        );
        assert!(!full.unwrap(), "one small answer does not fill the buffer");
        let buffered = outbox.buffer.len();
        // Metadata v1 has no cluster_authorized_operations: the encoding fails at its end.
        let unencodable = MetadataResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default().with_host(StrBytes::from_static_str("h"))
            ])
            .with_cluster_authorized_operations(0);
        let failed = outbox.encode_answer(
            second,
            (ApiKey::Metadata, 1, 8),
            Box::new(ResponseKind::Metadata(unencodable)),
            Digests::new(),
        );
        assert!(failed.is_err(), "the Metadata answer encoded at v1");
        assert_eq!(
            outbox.buffer.len(),
            buffered,
            "part of the failed answer kept"
        );
        assert_eq!(
            outbox.unsent.len(),
            1,
            "the failed answer is not to be completed"
        );
        outbox.send().await.unwrap();
        drop(outbox);
        let mut sent = Vec::new();
        client.read_to_end(&mut sent).await.unwrap();
        let frame = codec::encode_response(ApiKey::ApiVersions, 0, 7, &answered).unwrap();
        let mut expected = (frame.len() as u32).to_be_bytes().to_vec();
        expected.extend_from_slice(&frame);
        assert_eq!(sent, expected, "the first answer, whole and alone");
        let snapshot = journal.snapshot();
        let entry = snapshot.entries().iter().find(|e| e.seq == first).unwrap();
        assert!(entry.response.is_some(), "the first is answered: {entry:?}");
    }

    /// An answer larger than the pipe to its client is a hand-over until the client reads it:
    /// a reader of the journal waits for it, and then finds its entry answered.
    #[tokio::test]
    async fn a_reader_waits_for_an_answer_being_written_and_sees_it_answered() {
        let journal = Arc::new(Journal::new(100, 1 << 20, None));
        let from = Arrival {
            broker: 1,
            conn: 1,
            peer: SocketAddr::from((Ipv4Addr::LOCALHOST, 1)),
        };
        let seq = journal.append(&from, |_| {});
        let (writer, mut client) = tokio::io::duplex(1024);
        let answer = vec![7u8; BUFFER_BYTES + 1];
        let writing = tokio::spawn({
            let journal = journal.clone();
            async move {
                let mut outbox = Outbox::new(writer, &journal);
                let body = Box::new(ResponseKind::ApiVersions(Default::default()));
                outbox.write(seq, &answer, Some(body), Digests::new()).await
            }
        });
        // The write has begun once the client can read its first bytes; it cannot end before
        // the client reads the rest.
        let mut first = [0u8; 4];
        client.read_exact(&mut first).await.unwrap();
        let reading = tokio::spawn({
            let journal = journal.clone();
            async move {
                journal.settled().await;
                journal.snapshot()
            }
        });
        tokio::task::yield_now().await;
        assert!(
            !reading.is_finished(),
            "did not wait for the answer being written"
        );
        let mut rest = vec![0u8; BUFFER_BYTES + 1];
        client.read_exact(&mut rest).await.unwrap();
        writing.await.unwrap().unwrap();
        let snapshot = reading.await.unwrap();
        assert!(
            snapshot.entries()[0].response.is_some(),
            "{:?}",
            snapshot.entries()[0]
        );
    }
}
