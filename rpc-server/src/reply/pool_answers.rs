//! [`PoolAnswers`]: where the worker pool puts one connection's answers.
//!
//! In `pool` dispatch the handlers run on worker threads, but the answers are
//! written by the connection task: it owns the socket and coalesces every
//! answer of a batch into one `write` (see [`Outbox`](super::Outbox)). This is
//! the hand-over between the two: a buffer of encoded answer frames under one
//! short lock, plus the count of the connection's calls still on the pool.
//!
//! # Why a shared buffer and not a channel
//!
//! A channel of answer frames costs, per answer, a permit taken and given back,
//! a `block_on` around the send on the worker thread (the runtime context set
//! and reset), a queue push and pop, the frame moved twice, and an `Arc` clone
//! for the sender and one for the in-flight permit in every job. Here a worker
//! encodes its answer straight into the buffer (the one copy the answer needs
//! anyway), counts the call done, and wakes the connection task only if it is
//! parked waiting for answers — at once when this was the connection's last
//! call on the pool, otherwise when the worker's run of tasks ends
//! (`pool::wake_soon`), so a batch's answers cost the task one wake-up and
//! one `write`, not one each. The task takes the whole buffer in one swap
//! when its own outbox is empty, so the two buffers trade places and neither
//! side allocates.
//!
//! # Bounds
//!
//! Nothing here blocks a worker: a connection whose client does not read only
//! stops *reading requests* (the outbox's high-water mark and
//! `max_in_flight_per_connection`), so the buffer never holds more than the
//! answers of that connection's in-flight calls. Once the connection is gone
//! ([`close`](PoolAnswers::close)), late answers are dropped instead of kept.
//!
//! # Calls that ended otherwise
//!
//! A pooled call cancelled first — its deadline answered by the connection
//! task, or its caller gone — is not answered here: its worker claims the
//! call's `CancelSignal` before it delivers (`dispatch`), and a worker that
//! loses the claim drops its slot, which only counts the call done.
//!
//! # Waiting for answers
//!
//! [`pool_news`] is how the connection task waits: with calls on the pool and
//! nothing else to do, it first gives its thread away a few times before the
//! runtime thread may park, because the answer is usually moments away on a
//! worker that this very yield lets run, while parking costs the runtime
//! thread a sleep in `epoll_wait` and the worker an `eventfd` write to wake it.
//! When the connection's call is the only task on the whole pool (a lone
//! caller, 1:1), the task first spins for up to [`ANSWER_SPIN`] on the
//! call count: no other pooled call anywhere is waiting for that thread,
//! and an answer seen while spinning needs no wake-up at all. At
//! 1:1:1024 that took the pooled p50 from 0.0805 to 0.0735 ms (BENCHMARKS.md,
//! "Issue 21"); with more calls in flight it never spins.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use parking_lot::Mutex;
use rpc_codec::OutFrame;
use rpc_core::{RpcError, RpcResponse};
use rpc_transport::Reserved;

use super::frame::{encode_answer, ReplyTo};
use crate::config::AnswerCompression;

/// One connection's answers from the worker pool, and its calls still there.
pub(crate) struct PoolAnswers {
    state: Mutex<State>,
    /// Calls submitted to the pool and not answered yet.
    in_flight: AtomicUsize,
    max_frame: usize,
    /// How answers are compressed (the server's `compression`).
    compression: AnswerCompression,
}

struct State {
    /// Encoded answer frames, back to back.
    buf: BytesMut,
    /// The frame budget of the large requests whose answers are in `buf`.
    held: Vec<Reserved>,
    /// The connection task, when it waits for answers.
    waker: Option<Waker>,
    /// Something was delivered since [`PoolAnswers::poll_news`] last said so.
    news: bool,
    /// The connection is gone: answers are dropped.
    closed: bool,
}

impl PoolAnswers {
    pub fn new(max_frame: usize) -> Self {
        PoolAnswers {
            state: Mutex::new(State {
                buf: BytesMut::new(),
                held: Vec::new(),
                waker: None,
                news: false,
                closed: false,
            }),
            in_flight: AtomicUsize::new(0),
            max_frame,
            compression: AnswerCompression::default(),
        }
    }

    /// Answers compressed as `compression` says (default: the server's
    /// default settings).
    pub fn with_compression(mut self, compression: AnswerCompression) -> Self {
        self.compression = compression;
        self
    }

    /// Counts a call handed to the pool; its [`AnswerSlot`] answers it (or,
    /// dropped unanswered, just counts it done).
    /// `reserved` is a large request's share of the frame budget, held until
    /// its answer is written.
    pub fn reserve(
        self: &std::sync::Arc<Self>,
        reply_to: ReplyTo,
        reserved: Option<Reserved>,
    ) -> AnswerSlot {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        AnswerSlot {
            answers: Some(self.clone()),
            reply_to,
            reserved,
        }
    }

    /// Calls of this connection on the pool, not answered yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Ready when something happened since the last time it was: an answer
    /// arrived or a pooled call ended without one (the caller then
    /// [`take`](Self::take)s the answers and re-checks
    /// [`in_flight`](Self::in_flight)); otherwise `cx` is woken by the next.
    pub fn poll_news(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.state.lock();
        if std::mem::take(&mut st.news) {
            return Poll::Ready(());
        }
        if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            st.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Moves every answer delivered so far to the end of `out` (and the
    /// budget their requests hold to `held`), without waiting. Returns
    /// whether there was any. Neither buffer keeps more than `max_keep` bytes
    /// of storage once emptied.
    pub fn take(&self, out: &mut BytesMut, held: &mut Vec<Reserved>, max_keep: usize) -> bool {
        let mut st = self.state.lock();
        held.append(&mut st.held);
        if st.buf.is_empty() {
            return false;
        }
        if out.is_empty() {
            // Trade buffers: the workers go on encoding into `out`'s old
            // storage, unless it grew past what is worth keeping.
            out.clear();
            std::mem::swap(out, &mut st.buf);
            if st.buf.capacity() > max_keep {
                st.buf = BytesMut::new();
            }
        } else {
            out.extend_from_slice(&st.buf);
            if st.buf.capacity() > max_keep {
                // A large answer copied out: its storage must not stay behind.
                st.buf = BytesMut::new();
            } else {
                st.buf.clear();
            }
        }
        true
    }

    /// Gives back the answer buffer's memory when it is empty (an idle
    /// connection's tidy); the next answer allocates again.
    pub fn release(&self) {
        let mut st = self.state.lock();
        if st.buf.is_empty() {
            st.buf = BytesMut::new();
        }
        if st.held.is_empty() {
            st.held = Vec::new();
        }
    }

    /// The connection is gone: drop what is buffered and every later answer.
    pub fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.buf = BytesMut::new();
        st.held.clear();
        st.waker = None;
    }

    /// Encodes the answer (unless the connection is gone), counts the call
    /// done and wakes the connection task if it waits.
    fn deliver(&self, frame: Option<&OutFrame>, reserved: Option<Reserved>) {
        let (waker, last) = {
            let mut st = self.state.lock();
            // Counted done first, so that even a panic in the encode below
            // cannot leave the call counted forever. The connection task
            // reads the count without the lock, but it takes the lock to
            // collect answers, so it still finds this one.
            let last = self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1;
            st.news = true;
            if let Some(frame) = frame {
                if !st.closed {
                    encode_answer(&mut st.buf, frame, self.max_frame);
                    st.held.extend(reserved);
                }
            }
            (st.waker.take(), last)
        };
        match waker {
            // Nothing more to come from the pool: wake it now.
            Some(waker) if last => waker.wake(),
            // More answers are on their way, likely from this very worker:
            // one wake-up when its run of tasks ends (see `pool::wake_soon`).
            Some(waker) => crate::pool::wake_soon(waker),
            None => {}
        }
    }
}

/// The right (and duty) to answer one pooled call of a connection. Dropped
/// without [`answer`](Self::answer) (the job was rejected or lost) it still
/// counts the call done, so the connection does not wait for it forever.
pub(crate) struct AnswerSlot {
    answers: Option<std::sync::Arc<PoolAnswers>>,
    reply_to: ReplyTo,
    reserved: Option<Reserved>,
}

impl AnswerSlot {
    /// Queues the call's answer for the connection task to write.
    pub fn answer(mut self, result: Result<RpcResponse, RpcError>) {
        // Built before the slot gives up its duty: a panic here still counts
        // the call done (on drop).
        let frame = match &self.answers {
            Some(answers) => self.reply_to.answer(result, &answers.compression),
            None => return,
        };
        if let Some(answers) = self.answers.take() {
            answers.deliver(Some(&frame), self.reserved.take());
        }
    }
}

impl Drop for AnswerSlot {
    fn drop(&mut self) {
        if let Some(answers) = self.answers.take() {
            answers.deliver(None, None);
        }
    }
}

/// Completes when the worker pool has news for this connection (never, when
/// there is no pool).
///
/// With calls on the pool, the task first yields its thread
/// [`ANSWER_YIELDS`] times while no news has come, before it lets the runtime
/// thread park; when its one call is the only task on the pool (`alone`,
/// asked only then) it spins for up to [`ANSWER_SPIN`] first (see the
/// module docs).
pub(crate) async fn pool_news(pooled: Option<&PoolAnswers>, alone: impl FnOnce() -> bool) {
    let Some(pooled) = pooled else {
        return std::future::pending().await;
    };
    let mut yields = if pooled.in_flight() > 0 {
        ANSWER_YIELDS
    } else {
        0
    };
    if pooled.in_flight() == 1 && alone() {
        crate::pool::spin_while(ANSWER_SPIN, || pooled.in_flight() == 1);
    }
    std::future::poll_fn(|cx| loop {
        match pooled.poll_news(cx) {
            Poll::Pending if yields > 0 => {
                yields -= 1;
                std::thread::yield_now();
            }
            news => return news,
        }
    })
    .await
}

/// How many times a connection task waiting only for pool answers yields its
/// thread before it parks (see [`pool_news`]).
const ANSWER_YIELDS: u32 = 2;

/// How long a connection task whose call is the only one on the pool waits
/// for its answer by spinning before it parks (see [`pool_news`]).
const ANSWER_SPIN: std::time::Duration = std::time::Duration::from_micros(30);

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rpc_codec::{FrameCodec, FrameKind};
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::task::Wake;
    use tokio_util::codec::Decoder;

    #[test]
    fn a_large_answer_copied_out_leaves_no_storage_and_hands_over_its_budget() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let budget = rpc_transport::FrameBudget::new(1 << 20);
        let reserved = rt.block_on(budget.reserve(1000));
        let answers = std::sync::Arc::new(PoolAnswers::new(1 << 24));
        answers
            .reserve(
                ReplyTo {
                    id: 1,
                    serializer: 1,
                    answer_in: rpc_core::Compression::None,
                },
                Some(reserved),
            )
            .answer(Ok(RpcResponse::new(Bytes::from(vec![1u8; 2 << 20]))));
        // The outbox is busy with earlier answers: the large one is copied.
        let mut out = BytesMut::from(&b"earlier"[..]);
        let mut held = Vec::new();
        assert!(answers.take(&mut out, &mut held, 1 << 16));
        assert_eq!(held.len(), 1, "the request's budget moves with its answer");
        assert_eq!(budget.available(), (1 << 20) - 1000);
        assert!(
            answers.state.lock().buf.capacity() <= 1 << 16,
            "storage let go"
        );
        held.clear();
        assert_eq!(budget.available(), 1 << 20);
    }

    #[test]
    fn release_gives_back_an_empty_buffer_only() {
        let answers = std::sync::Arc::new(PoolAnswers::new(1 << 24));
        let reply_to = |id| ReplyTo {
            id,
            serializer: 1,
            answer_in: rpc_core::Compression::None,
        };
        answers
            .reserve(reply_to(1), None)
            .answer(Ok(RpcResponse::new(Bytes::from_static(b"one"))));
        answers.release();
        assert!(
            !answers.state.lock().buf.is_empty(),
            "an answer waiting is kept"
        );
        let mut out = BytesMut::from(&b"earlier"[..]);
        assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
        assert!(answers.state.lock().buf.capacity() > 0, "kept for reuse");
        answers.release();
        assert_eq!(answers.state.lock().buf.capacity(), 0, "given back");
        // And answers still come through.
        answers
            .reserve(reply_to(2), None)
            .answer(Ok(RpcResponse::new(Bytes::from_static(b"two"))));
        let mut out = BytesMut::new();
        assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
        assert_eq!(decode_all(out)[0].0, 2);
    }

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn decode_all(mut buf: BytesMut) -> Vec<(u64, FrameKind, u8, Bytes)> {
        let mut codec = FrameCodec::new(1 << 20);
        let mut out = Vec::new();
        while let Some(f) = codec.decode(&mut buf).unwrap() {
            out.push((f.header.request_id, f.header.kind, f.header.status, f.body));
        }
        assert!(buf.is_empty(), "trailing bytes");
        out
    }

    #[test]
    fn answers_are_taken_in_order_and_wake_a_waiting_task_once() {
        let answers = Arc::new(PoolAnswers::new(1 << 20));
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut out = BytesMut::new();

        let a = answers.reserve(
            ReplyTo {
                id: 1,
                serializer: 0,
                answer_in: rpc_core::Compression::None,
            },
            None,
        );
        let b = answers.reserve(
            ReplyTo {
                id: 2,
                serializer: 0,
                answer_in: rpc_core::Compression::None,
            },
            None,
        );
        assert_eq!(answers.in_flight(), 2);
        assert!(answers.poll_news(&mut cx).is_pending());

        a.answer(Ok(RpcResponse::new(Bytes::from_static(b"one"))));
        assert!(
            flag.0.swap(false, Ordering::SeqCst),
            "the waiting task is woken"
        );
        b.answer(Ok(RpcResponse::new(Bytes::from_static(b"two"))));
        assert!(
            !flag.0.load(Ordering::SeqCst),
            "woken once per wait, not per answer"
        );
        assert_eq!(answers.in_flight(), 0);

        assert!(answers.poll_news(&mut cx).is_ready());
        assert!(answers.poll_news(&mut cx).is_pending(), "news is told once");
        assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
        let got = decode_all(out);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].0, &got[0].3[..]), (1, &b"one"[..]));
        assert_eq!((got[1].0, &got[1].3[..]), (2, &b"two"[..]));
        assert!(got.iter().all(|f| f.1 == FrameKind::Response && f.2 == 0));
    }

    #[test]
    fn taking_into_a_non_empty_buffer_appends() {
        let answers = Arc::new(PoolAnswers::new(1 << 20));
        let mut out = BytesMut::new();
        encode_answer(
            &mut out,
            &OutFrame::response(7, 0, Bytes::from_static(b"first")),
            1 << 20,
        );
        answers
            .reserve(
                ReplyTo {
                    id: 8,
                    serializer: 0,
                    answer_in: rpc_core::Compression::None,
                },
                None,
            )
            .answer(Ok(RpcResponse::new(Bytes::from_static(b"second"))));
        assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
        assert!(
            !answers.take(&mut out, &mut Vec::new(), 1 << 16),
            "nothing left"
        );
        let ids: Vec<u64> = decode_all(out).into_iter().map(|f| f.0).collect();
        assert_eq!(ids, vec![7, 8]);
    }

    #[test]
    fn a_dropped_slot_counts_the_call_done_without_an_answer() {
        let answers = Arc::new(PoolAnswers::new(1 << 20));
        let slot = answers.reserve(
            ReplyTo {
                id: 1,
                serializer: 0,
                answer_in: rpc_core::Compression::None,
            },
            None,
        );
        assert_eq!(answers.in_flight(), 1);
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        assert!(answers
            .poll_news(&mut Context::from_waker(&waker))
            .is_pending());
        drop(slot);
        assert_eq!(answers.in_flight(), 0);
        assert!(
            flag.0.load(Ordering::SeqCst),
            "the connection task is woken to re-check its in-flight count"
        );
        assert!(answers
            .poll_news(&mut Context::from_waker(&waker))
            .is_ready());
        assert!(!answers.take(&mut BytesMut::new(), &mut Vec::new(), 1 << 16));
    }

    #[test]
    fn an_oversize_answer_becomes_an_error_frame() {
        let answers = Arc::new(PoolAnswers::new(64));
        answers
            .reserve(
                ReplyTo {
                    id: 3,
                    serializer: 0,
                    answer_in: rpc_core::Compression::None,
                },
                None,
            )
            .answer(Ok(RpcResponse::new(Bytes::from(vec![0u8; 1000]))));
        let mut out = BytesMut::new();
        assert!(answers.take(&mut out, &mut Vec::new(), 1 << 16));
        let got = decode_all(out);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, 3);
        assert_eq!(got[0].1, FrameKind::Response);
        assert_ne!(got[0].2, 0, "an error status, not the answer");
        assert!(got[0].3.len() < 64);
    }

    #[test]
    fn answers_after_close_are_dropped_but_counted() {
        let answers = Arc::new(PoolAnswers::new(1 << 20));
        let slot = answers.reserve(
            ReplyTo {
                id: 1,
                serializer: 0,
                answer_in: rpc_core::Compression::None,
            },
            None,
        );
        answers.close();
        slot.answer(Ok(RpcResponse::new(Bytes::from_static(b"late"))));
        assert_eq!(answers.in_flight(), 0);
        assert!(!answers.take(&mut BytesMut::new(), &mut Vec::new(), 1 << 16));
    }
}
