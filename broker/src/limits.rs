//! Connection limits: Kafka's idle timeout (`connections.max.idle.ms`) and connection cap
//! (`max.connections`), and kmock's frame timeout (`connection`).
//!
//! **Idle connections**, as Kafka's `Selector` measures them: a connection is idle from its
//! last socket activity — bytes read from it, or an answer written to it — and closed once
//! idle for `connections.max.idle.ms` (10 minutes by default). A request in progress does
//! not keep a connection alive by itself: Kafka mutes a connection while one of its requests
//! is handled, so a long poll, a delayed or a silenced request that passes the idle time with
//! no byte either way gets its connection closed there too.
//!
//! **The connection cap** counts each broker's open connections; the connection that would
//! pass it, the newest, is accepted and closed at once, before a byte is read.
//!
//! # Deviations from Apache Kafka
//! - Kafka reads nothing from a connection while one of its requests is handled (the
//!   connection is muted), so bytes a client sends meanwhile do not count as activity there;
//!   kmock reads ahead (up to its backpressure limits) and counts them.
//! - Kafka's broker-wide `max.connections` makes the acceptor wait for a free slot (new
//!   connections queue in the listen backlog, unanswered); its `max.connections.per.ip`
//!   accepts the newest and closes it. kmock's cap, per broker, closes the newest, as the
//!   per-IP limit does: on loopback every client has the same address, so that is the limit a
//!   test meets, and a closed connection shows at once where a queued one would hang.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use crate::error::Error;

/// Kafka's default `connections.max.idle.ms`: 10 minutes.
pub const DEFAULT_CONNECTIONS_MAX_IDLE: Duration = Duration::from_secs(600);

/// The connection limits of a cluster, fixed at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionLimits {
    /// Kafka's `connections.max.idle.ms`; `None`: never closed for idleness (Kafka's -1).
    pub connections_max_idle: Option<Duration>,
    /// How long a frame may take to arrive once its first bytes are read (kmock's own).
    pub frame_timeout: Duration,
    /// Kafka's `max.connections`, per broker; `None`: unlimited (Kafka's default).
    pub max_connections: Option<usize>,
}

impl ConnectionLimits {
    /// # Errors
    /// [`Error::Config`] for a cap of 0 connections or an idle time of zero.
    pub fn check(&self) -> Result<(), Error> {
        if self.max_connections == Some(0) {
            return Err(Error::Config(
                "max connections of 0 would refuse every client; leave it unset for no limit"
                    .into(),
            ));
        }
        if self.connections_max_idle.is_some_and(|d| d.is_zero()) {
            return Err(Error::Config(
                "an idle time of zero would close every connection at once; None disables it"
                    .into(),
            ));
        }
        Ok(())
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            connections_max_idle: Some(DEFAULT_CONNECTIONS_MAX_IDLE),
            frame_timeout: crate::connection::DEFAULT_FRAME_TIMEOUT,
            max_connections: None,
        }
    }
}

/// One broker's count of open connections, against its cap.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnectionCount(Arc<AtomicUsize>);

impl ConnectionCount {
    /// Takes a slot for a new connection, or `Err(open)` when `max` are open already.
    pub fn admit(&self, max: Option<usize>) -> Result<Slot, usize> {
        let open = self.0.fetch_add(1, Ordering::AcqRel);
        if max.is_some_and(|max| open >= max) {
            self.0.fetch_sub(1, Ordering::AcqRel);
            return Err(open);
        }
        Ok(Slot(Arc::clone(&self.0)))
    }
}

/// An open connection's place in its broker's count, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// When a connection last saw socket activity, readable from the tasks of its two halves.
#[derive(Debug)]
pub(crate) struct Activity {
    start: Instant,
    /// Milliseconds from `start` to the last activity.
    last_ms: AtomicU64,
}

impl Activity {
    /// Activity now (a connection is active when it opens).
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    /// Marks activity now.
    pub fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// The instant of the last activity.
    pub fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }

    /// Returns when the connection has been idle for `idle`; never with `None`.
    pub async fn idle_for(&self, idle: Option<Duration>) {
        let Some(idle) = idle else {
            return std::future::pending().await;
        };
        loop {
            let deadline = self.last() + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A socket half that marks [`Activity`] whenever bytes go through it.
#[derive(Debug)]
pub(crate) struct Stamped<'a, S> {
    inner: S,
    activity: &'a Activity,
}

impl<'a, S> Stamped<'a, S> {
    /// Wraps `inner`.
    pub fn new(inner: S, activity: &'a Activity) -> Self {
        Self { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Stamped<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Stamped<'_, S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
