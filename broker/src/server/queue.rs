//! The queue of a connection's requests between its reader and its processor ([`queue`]): a
//! bounded first-in first-out queue like Tokio's `mpsc` channel, except that queueing a request
//! does not wake a processor that runs in the same task as the reader.
//!
//! Both halves of a connection are joined in one task, the reader polled first
//! (`server::run_connection`): a request the reader queues is taken by the processor in the
//! same poll of that task. Tokio's channel wakes the waiting processor all the same, which
//! schedules the task again while it runs; on the multi-threaded runtime that puts it on the
//! worker's queue and wakes the other worker to steal it (a futex wake and a write to the I/O
//! driver's eventfd per request, and a second poll that finds nothing to do), measured as about
//! one such wake per OffsetCommit round trip.
//! Here the wake is skipped when the waiting receiver's waker is the sender's own (the same
//! task), which is only correct because the receiver is polled after the sender in every poll
//! of that task; a receiver in another task is woken as usual. A sender waiting for room is
//! always woken (it is polled before the receiver frees the room).

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// A bounded queue shared by one [`Sender`] and one [`Receiver`].
#[derive(Debug)]
pub(crate) struct Queue<T> {
    capacity: usize,
    inner: Mutex<Inner<T>>,
}

#[derive(Debug)]
struct Inner<T> {
    items: VecDeque<T>,
    /// The sender was dropped: nothing more will be queued.
    closed: bool,
    /// The receiver waiting for an item.
    receiver: Option<Waker>,
    /// The sender waiting for room.
    sender: Option<Waker>,
}

/// A queue of at most `capacity` items (at least 1), and its sending half; the receiving half
/// is [`Queue::receiver`].
pub(crate) fn queue<T>(capacity: usize) -> Queue<T> {
    Queue {
        capacity: capacity.max(1),
        inner: Mutex::new(Inner {
            items: VecDeque::new(),
            closed: false,
            receiver: None,
            sender: None,
        }),
    }
}

impl<T> Queue<T> {
    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The sending half; dropping it closes the queue (the receiver then takes what is queued,
    /// then `None`).
    pub(crate) fn sender(&self) -> Sender<'_, T> {
        Sender(self)
    }

    /// The receiving half.
    pub(crate) fn receiver(&self) -> Receiver<'_, T> {
        Receiver(self)
    }
}

/// The sending half of a [`Queue`].
#[derive(Debug)]
pub(crate) struct Sender<'a, T>(&'a Queue<T>);

impl<T> Sender<'_, T> {
    /// Queues `item`, waiting while the queue is full. Wakes a receiver waiting in another
    /// task; one in this task is polled after the sender (see the module doc).
    pub(crate) async fn send(&self, item: T) {
        let mut item = Some(item);
        poll_fn(|cx| self.poll_send(cx, &mut item)).await;
    }

    fn poll_send(&self, cx: &mut Context<'_>, item: &mut Option<T>) -> Poll<()> {
        let mut inner = self.0.lock();
        if inner.items.len() >= self.0.capacity {
            inner.sender = Some(cx.waker().clone());
            return Poll::Pending;
        }
        inner.items.extend(item.take());
        if let Some(receiver) = inner.receiver.take() {
            if !receiver.will_wake(cx.waker()) {
                drop(inner);
                receiver.wake();
            }
        }
        Poll::Ready(())
    }
}

impl<T> Drop for Sender<'_, T> {
    fn drop(&mut self) {
        let mut inner = self.0.lock();
        inner.closed = true;
        let receiver = inner.receiver.take();
        drop(inner);
        if let Some(receiver) = receiver {
            receiver.wake();
        }
    }
}

/// The receiving half of a [`Queue`].
#[derive(Debug)]
pub(crate) struct Receiver<'a, T>(&'a Queue<T>);

impl<T> Receiver<'_, T> {
    /// The next queued item, if one is queued now.
    pub(crate) fn try_recv(&mut self) -> Option<T> {
        let mut inner = self.0.lock();
        let item = inner.items.pop_front();
        let sender = if item.is_some() {
            inner.sender.take()
        } else {
            None
        };
        drop(inner);
        if let Some(sender) = sender {
            sender.wake();
        }
        item
    }

    /// The next item, waiting for one; `None` once the sender is gone and the queue empty.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| {
            if let Some(item) = self.try_recv() {
                return Poll::Ready(Some(item));
            }
            let mut inner = self.0.lock();
            // Queued between the two locks: take it.
            if !inner.items.is_empty() {
                drop(inner);
                return Poll::Ready(self.try_recv());
            }
            if inner.closed {
                return Poll::Ready(None);
            }
            inner.receiver = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Items come out in order; a full queue holds its sender back until the receiver takes
    /// one; the receiver sees the end once the sender is gone and the queue drained.
    #[tokio::test]
    async fn in_order_bounded_and_closed_by_the_senders_drop() {
        let q = queue::<u32>(2);
        let mut rx = q.receiver();
        {
            let tx = q.sender();
            tx.send(1).await;
            tx.send(2).await;
            let mut third = std::pin::pin!(tx.send(3));
            assert!(
                futures::poll!(third.as_mut()).is_pending(),
                "a full queue took a third item"
            );
            assert_eq!(rx.try_recv(), Some(1));
            assert!(futures::poll!(third.as_mut()).is_ready());
        }
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, Some(3));
        assert_eq!(rx.recv().await, None);
    }

    /// Sender and receiver joined in one task, the sender first (as a connection's reader and
    /// processor): every item goes through a queue smaller than the load, the receiver not
    /// woken by the sends and the sender woken when the receiver frees room.
    #[tokio::test]
    async fn a_sender_and_receiver_of_one_task_pass_every_item_through_a_full_queue() {
        let q = queue::<u32>(2);
        let mut rx = q.receiver();
        let tx = q.sender();
        let sending = async move {
            for i in 0..100 {
                tx.send(i).await;
                if i % 7 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        };
        let receiving = async {
            let mut got = Vec::new();
            while let Some(item) = rx.recv().await {
                got.push(item);
                if item % 5 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            got
        };
        let ((), got) = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            tokio::join!(biased; sending, receiving)
        })
        .await
        .expect("stalled");
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    /// A receiver in another task is woken by a send, and by the sender's drop.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_receiver_in_another_task_is_woken() {
        let q = Arc::new(queue::<u32>(4));
        let receiving = tokio::spawn({
            let q = Arc::clone(&q);
            async move {
                let mut rx = q.receiver();
                let mut got = Vec::new();
                while let Some(item) = rx.recv().await {
                    got.push(item);
                }
                got
            }
        });
        let tx = q.sender();
        for i in 0..10 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            tx.send(i).await;
        }
        drop(tx);
        let got = receiving.await.unwrap();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }
}
