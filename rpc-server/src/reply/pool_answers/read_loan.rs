//! The read side lent to a worker, from the worker's end (see "The read
//! side lent" in the module docs): its looks at the socket
//! ([`IdlePoll`](crate::pool::IdlePoll) for [`PoolAnswers`]), the loan's
//! end, and the bytes it hands back to the connection task ([`Handed`]).
//!
//! Every read of the socket, and every change of the loan, happens under the
//! answers' lock with the loan on, which is what makes a worker the
//! socket's one reader while it lasts; the wake-up of the task and the
//! start of the calls read come after the lock is let go.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;

use super::{PoolAnswers, State};
use crate::reply::pool_reads::read_requests;

impl PoolAnswers {
    /// Ends a loan of the read side (`st.read_lent` was set): the socket's
    /// low-water mark goes back to one byte, so the runtime hears the socket
    /// again (the kernel signals it at once if bytes wait), and the start
    /// of a request a worker read goes back to the task, to be read first.
    pub(super) fn end_read_loan(&self, st: &mut State) {
        if std::mem::take(&mut st.read_lent) {
            if let Some(lender) = &self.socket {
                // SAFETY: called under the lock with the loan on, so `close`
                // has not finished and the socket is open (`lending`).
                let _ = unsafe { lender.socket.set_recv_lowat(1) };
            }
        }
        st.read_claimed = false;
        if !st.inbox.is_empty() {
            let rest = st.inbox.split();
            hand_to_task(st, rest, None);
        }
    }
}

/// What a worker handed back with the read side, for the task to read
/// before the socket (`FrameReader::unread`).
#[derive(Debug)]
pub struct Handed {
    /// The bytes, in stream order.
    pub bytes: BytesMut,
    /// How many at their front the task had read (and counted) itself
    /// before it lent them ([`PoolAnswers::seed`]).
    pub counted: usize,
    /// The error the worker's read ended with, after the bytes.
    pub error: Option<std::io::Error>,
}

/// Leaves `bytes` (and the read's `error`) for the task, after anything
/// left before that it has not taken yet (never, as the task takes what
/// was left before it lends again; merged all the same). `bytes` start
/// with what is left of the task's seeded bytes.
fn hand_to_task(st: &mut State, bytes: BytesMut, error: Option<std::io::Error>) {
    debug_assert!(st.handed.is_none(), "taken before the next loan");
    let seeded = std::mem::take(&mut st.seeded);
    st.handed = Some(match st.handed.take() {
        Some(mut before) => {
            before.bytes.extend_from_slice(&bytes);
            before.error = before.error.or(error);
            before
        }
        None => Handed {
            bytes,
            counted: seeded,
            error,
        },
    });
}

/// A worker's looks at the read side lent to it (see "The read side lent").
impl crate::pool::IdlePoll for PoolAnswers {
    fn poll(self: Arc<Self>) -> bool {
        let (Some(taker), Some(lender)) = (&self.taker, &self.socket) else {
            return false;
        };
        let (start, waker) = {
            let mut st = self.state.lock();
            if st.closed || !st.read_lent || !st.read_claimed {
                // Taken back (or closed): the task reads.
                return false;
            }
            let mut frames = std::mem::take(&mut st.frames);
            let st = &mut *st;
            // SAFETY: `read_lent` is set, so `close` has not run (it clears
            // it under this lock) and the socket is open (`lending`). Reads
            // are one at a time: a worker reads only under this lock (any
            // worker holding this connection may look, the lock serialises
            // them), and the task does not read while `read_lent` is set (it
            // lends only while it is not reading, and clears it under this
            // lock before it reads again).
            let room = self.max_calls.saturating_sub(self.in_flight());
            let look = unsafe {
                read_requests(
                    lender.socket,
                    &mut st.inbox,
                    self.max_request,
                    &mut frames,
                    room,
                )
            };
            // Whole frames come off the front, where the task's seeded
            // bytes are: those were counted when the task read them.
            let counted = st.seeded.min(look.taken);
            st.seeded -= counted;
            let fresh = (look.taken - counted) as u64;
            let start = (!frames.is_empty()).then(|| {
                // The last answer of these claims the read side again.
                st.read_claimed = false;
                self.worker_bytes.fetch_add(fresh, Ordering::Relaxed);
                lender.io.add_in(fresh);
                lender
                    .stats
                    .worker_reads
                    .fetch_add(frames.len() as u64, Ordering::Relaxed);
                let start = taker.take(&mut frames, std::time::Instant::now(), &self);
                // A frame left behind would be taken again.
                debug_assert!(frames.is_empty(), "the taker takes every frame");
                start
            });
            st.frames = frames;
            let waker = look.hand_back.and_then(|(bytes, error)| {
                self.end_read_loan(st);
                hand_to_task(st, bytes, error);
                st.news = true;
                st.waker.take()
            });
            if start.is_none() && waker.is_none() {
                // Nothing whole yet: look again.
                return true;
            }
            (start, waker)
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        if let Some(start) = start {
            start();
        }
        false
    }

    fn release(self: Arc<Self>) {
        let waker = {
            let mut st = self.state.lock();
            if !std::mem::take(&mut st.read_claimed) || !st.read_lent {
                return;
            }
            // Nobody will read: the task must, and is woken for it.
            self.end_read_loan(&mut st);
            st.news = true;
            st.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}
