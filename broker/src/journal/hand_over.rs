//! Answers being handed to their sockets ([`HandOvers`]), so that a reader of the journal can
//! wait for the entries of answers a client may already hold.
//!
//! An answer's entry is completed just after its bytes are handed to the socket (see
//! `outbox.rs`: the completion time is then the time of the hand-over). Between the write and
//! the completion, the client can read the answer and ask the control API for `/check` or
//! `/journal`: the entry would still say it is waiting for its answer. A reader that awaits
//! [`HandOvers::settled`] first sees every answer whose write had begun when it asked.
//!
//! Every answer sent with the journal on is a hand-over, and readers are rare: a hand-over that
//! ends wakes readers only when one is waiting (an atomic count of them), so the common send
//! takes one uncontended lock to begin and one to end, and nothing more.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::changes::Changes;

/// Longest a hand-over is waited for, from its beginning: a write that takes longer is one the
/// client has not read whole (it is not reading), so its entry may well say unanswered.
pub(crate) const SETTLE_AT_MOST: Duration = Duration::from_millis(500);

/// The hand-overs in progress, by ticket (tickets are given in increasing order), with when
/// each began.
#[derive(Debug, Default)]
pub(crate) struct HandOvers {
    state: Mutex<Tickets>,
    /// Wakes readers in [`HandOvers::settled`] when a hand-over ends, only when one waits. No
    /// wake-up is lost, and the tickets mutex is what guarantees it ([`Changes`]' argument): a
    /// reader counts its wait before it locks the tickets to read the hand-overs in progress;
    /// a hand-over removes itself under that lock, then notifies.
    ended: Changes,
}

#[derive(Debug, Default)]
struct Tickets {
    next: u64,
    /// In ticket order (each begun at the back). A list rather than a map: a hand-over is one
    /// connection's write, so there are few at a time, and the list keeps its memory between
    /// them where a map would allocate a node for the first and free it with the last.
    in_progress: VecDeque<(u64, Instant)>,
}

/// One hand-over in progress: ends when dropped (after the entries are completed, or when the
/// write failed).
#[derive(Debug)]
pub(crate) struct HandOver<'a> {
    hand_overs: &'a HandOvers,
    ticket: u64,
}

impl HandOvers {
    fn tickets(&self) -> MutexGuard<'_, Tickets> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a hand-over; it lasts until the returned guard is dropped.
    pub fn begin(&self) -> HandOver<'_> {
        let mut tickets = self.tickets();
        let ticket = tickets.next;
        tickets.next += 1;
        tickets.in_progress.push_back((ticket, Instant::now()));
        HandOver {
            hand_overs: self,
            ticket,
        }
    }

    /// Waits until every hand-over begun before the call has ended or is [`SETTLE_AT_MOST`]
    /// old: a reader waits at most that long, and not at all for a write long stalled.
    pub async fn settled(&self) {
        let horizon = self.tickets().next;
        loop {
            let mut ended = self.ended.changed();
            ended.enable();
            // The oldest hand-over begun before the call that is still young enough to wait for.
            let waited = self
                .tickets()
                .in_progress
                .iter()
                .take_while(|(ticket, _)| *ticket < horizon)
                .map(|(_, began)| *began + SETTLE_AT_MOST)
                .find(|until| *until > Instant::now());
            match waited {
                Some(until) => {
                    let _ = tokio::time::timeout_at(until, ended).await;
                }
                None => return,
            }
        }
    }
}

impl Drop for HandOver<'_> {
    fn drop(&mut self) {
        // Removed under the tickets lock, released before the count is read: a reader that
        // found this hand-over in progress counted itself before it took that lock, so the
        // count read here includes it (the lock orders the two, see `HandOvers::ended`).
        {
            let mut tickets = self.hand_overs.tickets();
            if let Some(at) = tickets
                .in_progress
                .iter()
                .position(|(t, _)| *t == self.ticket)
            {
                tickets.in_progress.remove(at);
            }
        }
        self.hand_overs.ended.notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn settled_waits_for_hand_overs_begun_before_it_and_no_others() {
        let hand_overs = std::sync::Arc::new(HandOvers::default());
        let first = hand_overs.begin();
        let waiting = tokio::spawn({
            let hand_overs = hand_overs.clone();
            async move { hand_overs.settled().await }
        });
        tokio::task::yield_now().await;
        // Begun after the reader asked: not waited for.
        let later = hand_overs.begin();
        assert!(
            !waiting.is_finished(),
            "returned before the first hand-over ended"
        );
        drop(first);
        tokio::time::timeout(SETTLE_AT_MOST / 2, waiting)
            .await
            .expect("held by a hand-over begun after the call")
            .unwrap();
        drop(later);
    }

    #[tokio::test(start_paused = true)]
    async fn settled_waits_for_a_stalled_hand_over_only_until_it_is_old() {
        let hand_overs = HandOvers::default();
        let _stalled = hand_overs.begin();
        let started = Instant::now();
        hand_overs.settled().await;
        assert_eq!(started.elapsed(), SETTLE_AT_MOST);
        // Past its bound, it holds no reader up.
        let again = Instant::now();
        hand_overs.settled().await;
        assert_eq!(again.elapsed(), Duration::ZERO);
    }
}
