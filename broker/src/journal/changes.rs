//! The journal's appends and completions, for whoever waits on them ([`Changes`]).
//!
//! Every request appends one entry and completes it, and waiters are rare (`wait_for`, a live
//! control API stream): a change wakes waiters only when one is waiting (an atomic count of
//! them), so the common append or completion takes no lock for it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// Wakes the waits on the journal at each change.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    notify: Notify,
    /// Waits in progress ([`Changed`] alive). No wake-up is lost, and the lock the changes are
    /// made under (the journal's; for hand-overs, their tickets') is what guarantees it: a wait
    /// counts itself before it locks to look, and a change is made under that lock and reads
    /// the count after it. If the change locked the journal after the wait did, the wait's count
    /// happened before the change reads it, which reads at least 1 and wakes it; if before,
    /// the wait sees the change when it looks.
    waiting: AtomicUsize,
}

impl Changes {
    /// Wakes every wait begun before, if any: called after a change, the journal's lock
    /// released.
    pub fn notify(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// A wait for the next change, counted until dropped; begun before the journal is looked
    /// at, so that no change in between is missed.
    pub fn changed(&self) -> Changed<'_> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        Changed {
            // Boxed (a wait is rare) to be movable, the count kept beside it.
            notified: Box::pin(self.notify.notified()),
            waiting: &self.waiting,
        }
    }
}

/// A wait for the journal's next append or completion: resolves at the first one after it was
/// made ([`Changes::changed`]).
#[derive(Debug)]
pub(crate) struct Changed<'a> {
    notified: Pin<Box<Notified<'a>>>,
    waiting: &'a AtomicUsize,
}

impl Changed<'_> {
    /// Registers the wait at once, as [`Notified::enable`] does (a change after [`Changes::changed`]
    /// wakes it anyway).
    pub fn enable(&mut self) {
        let _ = self.notified.as_mut().enable();
    }
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.notified.as_mut().poll(cx)
    }
}

impl Drop for Changed<'_> {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_wait_is_woken_by_the_next_change_and_none_is_counted_after() {
        let changes = Changes::default();
        changes.notify();
        let mut changed = changes.changed();
        changed.enable();
        assert_eq!(changes.waiting.load(Ordering::SeqCst), 1);
        changes.notify();
        tokio::time::timeout(Duration::from_secs(5), changed)
            .await
            .expect("woken");
        assert_eq!(changes.waiting.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_change_before_the_wait_does_not_wake_it() {
        let changes = Changes::default();
        changes.notify();
        let changed = changes.changed();
        let waited = tokio::time::timeout(Duration::from_millis(20), changed).await;
        assert!(waited.is_err(), "woken by a change made before the wait");
    }
}
