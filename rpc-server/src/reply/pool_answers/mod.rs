//! [`PoolAnswers`]: where the worker pool puts one connection's answers.
//!
//! In `pool` dispatch the handlers run on worker threads, and the answers are
//! written by the connection task — it owns the socket and coalesces every
//! answer of a batch into one `write` (see [`Outbox`](super::Outbox)) — or,
//! while the task waits with nothing to write, by the workers themselves on
//! the socket it lends them. This is the hand-over between the two: a buffer
//! of encoded answer frames under one short lock, plus the count of the
//! connection's calls still on the pool.
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
//! # The socket lent
//!
//! Writing the answers on the connection task costs a wake-up of the runtime
//! thread per run of answers (an `eventfd` write, a context switch, a park
//! again), more than the `send` itself. So when the task has nothing of its
//! own to write, could read more and has every call on the pool, it *lends*
//! its socket while it waits ([`poll_news`](PoolAnswers::poll_news) with
//! `lend`): a worker that delivers the connection's last pooled call, or
//! ends a run of tasks that delivered some (or the pool's monitor, for a
//! worker stuck in a long task: the deferred write is a deferred wake-up,
//! `pool::wake_soon`), writes the buffer itself with one non-blocking `send`
//! (`rpc_transport::WriteNow`), and the task is not woken at all. Only plain
//! sockets are lent (TLS bytes go through the task's session). The `send`
//! runs under the buffer's lock: it copies into the socket's buffer and
//! never waits.
//!
//! Invariants:
//! - One writer at a time: a worker writes only under this lock with
//!   `lent` set; the task takes the socket back ([`take`](PoolAnswers::take),
//!   under the same lock) before every write of its own, and lends it only
//!   while its outbox is empty.
//! - Frames stay whole on the wire: what the socket did not take stays at the
//!   front of the buffer (`tail`), the loan ends, and the task is woken to
//!   write it — before anything it queued meanwhile.
//! - No write after the socket's halves drop: the connection closes this
//!   first, however its task ends (`lending`'s contract).
//! - The loan changes nothing of what the task decides: it lends only while
//!   it can read more and is not stopping, so no answer it must count (the
//!   in-flight limit, a graceful drain) is one it is not woken for. The
//!   worker that writes the last call's answer records the end of the calls
//!   in the admission table itself (`admission::QuietMarker`), so an idle
//!   connection is an eviction candidate at once; only the tidy that gives
//!   its buffers back waits for the task's next turn (its next request, or
//!   its timer).
//!
//! # The read side lent
//!
//! A lone caller (one call at a time, 1:1) gets no batch to share the
//! hand-over's costs with: every call crossed from the runtime thread, woken
//! for the socket, to a worker and back. So a connection whose one call is
//! on a pool with a worker keeping a lone caller's rhythm (`pool::rhythm`),
//! and whose reader holds no bytes, lends its *read* side with the write
//! side ([`poll_news`](PoolAnswers::poll_news) with `lend_read`): the worker
//! that delivers that call — or, when the call was answered before the task
//! waited, the worker spinning for its next task ([`WorkerPool::lend_spinner`
//! ](crate::pool::WorkerPool)) — claims it, and while it waits awake for its
//! next task it reads the socket itself ([`IdlePoll`](crate::pool::IdlePoll),
//! `pool_reads`). The requests it takes become calls through the
//! connection's [`TakeRequest`] and are submitted to the pool — to this very
//! worker, which is awake; their answers are written on the lent socket and
//! the last claims the read side again. The task sleeps throughout: in
//! rhythm a call costs the worker a `recv` and a `send` and nobody a
//! wake-up. A pipelining caller's connection (1:100) lends the same way
//! when every call it has on the pool came in its last run and the pool
//! has no other work: the worker that answers the last of them reads the
//! next run (the connection backs off after loans that read nothing,
//! `connection::worker_reads::RunLoans`). Meanwhile the socket's receive
//! low-water mark is raised past a lone caller's largest request, or past
//! one look for a pipelining caller's runs (`pool_reads::lent_lowat`), so
//! the kernel does not wake the runtime thread in `epoll_wait` for each
//! request or run either (TCP; `RawSocket::set_recv_lowat`).
//!
//! Invariants:
//! - One reader at a time: a worker reads only under this lock with
//!   `read_lent` and `read_claimed` set; the task takes the read side back
//!   with [`take`](PoolAnswers::take) (under the same lock) before it reads,
//!   and lends it only while it does not read (its `select!` leaves the
//!   socket alone then).
//! - Nothing lost or reordered: a worker keeps only whole request frames
//!   (and, while the loan lasts, the start of the next in `inbox`);
//!   anything else it read goes back with the read side
//!   ([`take_handed`](PoolAnswers::take_handed)), for the task to read before
//!   the socket. A call a worker started is recorded for the task under this
//!   lock, and counted in `in_flight`, before the lock is let go: the task
//!   that takes its read side back finds it before any later frame (a
//!   `Cancel` finds its call) and waits for it in a graceful stop.
//! - Nobody left holding it: a claimed read side is polled or released
//!   (`IdlePoll::release`, which wakes the task) when the worker's wait ends,
//!   and a worker about to run a task that is not the one it read releases
//!   it first. The task takes it back at every turn, and turns at least every
//!   millisecond while it lends (its timer): a call a worker started that
//!   blocks, or awaits, keeps the task from reading for a tick at most — a
//!   `Cancel`, a deadline or a second call on the connection is then the
//!   task's again (it lends again only with no call on the pool, or with
//!   one it submitted itself that turn, whose worker will claim the loan).
//!
//! # Waiting for answers
//!
//! [`pool_news`] is how the connection task waits. Lending its socket, it
//! parks at once. Otherwise (TLS, a full outbox, a drain), with calls on the
//! pool and nothing else to do, it first gives its thread away a few times
//! before the runtime thread may park, because the answer is usually moments
//! away on a worker that this very yield lets run, while parking costs the
//! runtime thread a sleep in `epoll_wait` and the worker an `eventfd` write
//! to wake it. When the connection's call is the only task on the whole pool
//! (a lone caller, 1:1), the task first waits awake for up to
//! `ANSWER_SPIN` (`news.rs`) on the call count, yielding the core
//! at every turn (`pool::yield_while`):
//! no other pooled call anywhere is waiting for that thread,
//! and an answer seen while spinning needs no wake-up at all.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use bytes::{Buf, BytesMut};
use parking_lot::Mutex;
use rpc_codec::OutFrame;
use rpc_transport::{IoCounters, RawSocket, Reserved};

use super::frame::{encode_answer, ReplyTo};
use super::pool_reads::{lent_lowat, Inbox, TakeRequest};
use crate::admission::QuietMarker;
use crate::config::AnswerCompression;
use crate::stats::ServerStats;

/// One connection's answers from the worker pool, and its calls still there.
pub(crate) struct PoolAnswers {
    state: Mutex<State>,
    /// Calls submitted to the pool and not answered yet.
    in_flight: AtomicUsize,
    max_frame: usize,
    /// How answers are compressed (the server's `compression`).
    compression: AnswerCompression,
    /// The connection's plain socket, which workers write while the task
    /// lends it (see "The socket lent"); `None` for TLS.
    socket: Option<Lender>,
    /// What makes a call of a request a worker read, when the task may lend
    /// its read side too (see "The read side lent").
    taker: Option<Box<dyn TakeRequest>>,
    /// The largest request a worker keeps (what the connection's reader
    /// reads into its own buffer, at most `pool_reads::READ_MAX`).
    max_request: usize,
    /// The connection's calls in flight at most
    /// (`max_in_flight_per_connection`): a worker reads no request past it.
    max_calls: usize,
    /// Loans of the read side made so far (the task tells a loan that read
    /// nothing from a wait that made none).
    read_loans: AtomicU64,
    /// Bytes of requests workers read and kept (the task's idle watch counts
    /// them as its own reads).
    worker_bytes: AtomicU64,
}

/// The socket a connection can lend its workers, and what its writes need.
pub(crate) struct Lender {
    /// The connection's plain socket.
    pub socket: RawSocket,
    /// Bytes of answer buffer worth keeping once written out (the outbox's
    /// high-water mark): a larger one, grown for a large answer, is let go.
    pub keep: usize,
    /// The server's byte counters.
    pub io: Arc<IoCounters>,
    /// The server's counters ([`ServerStats::worker_writes`]).
    pub stats: Arc<ServerStats>,
    /// Where a worker that wrote the answer of the connection's last call
    /// records that its calls ended (the task, not woken, cannot).
    pub quiet: QuietMarker,
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
    /// The connection task lends its socket: its outbox is empty and it
    /// waits, so workers write answers themselves. Only ever set with
    /// `socket`, only by [`PoolAnswers::poll_news`]; cleared by
    /// [`PoolAnswers::take`], [`PoolAnswers::close`], and by a write that
    /// left bytes behind.
    lent: bool,
    /// `buf` starts with the rest of a frame a worker wrote only in part: it
    /// goes out before anything else.
    tail: bool,
    /// A write of `buf` is deferred to the end of a worker's run of tasks.
    write_deferred: bool,
    /// The task lends its read side too: a worker may read the next request
    /// (see "The read side lent"). Only set with `lent`, only by
    /// [`PoolAnswers::poll_news`]; cleared with `lent`, and by a worker
    /// that hands it back.
    read_lent: bool,
    /// The worker that wrote the connection's last answer will look at the
    /// lent read side while it waits for its next task (`pool::poll_soon`).
    read_claimed: bool,
    /// What a worker handed back with the read side: the bytes it read,
    /// which the task reads before the socket, and the read's error.
    handed: Option<Handed>,
    /// Bytes a worker read and has not made calls of yet: the start of a
    /// request whose rest has not come (or the task's, [`seed`](PoolAnswers::seed)).
    /// Handed back when the loan ends.
    inbox: Inbox,
    /// How many bytes at the front of `inbox` the task read (and counted)
    /// before it lent: not counted again, by a worker or by the task.
    seeded: usize,
    /// The requests of one look, between the read and the taker (kept for
    /// its storage).
    frames: Vec<rpc_codec::Frame>,
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
                lent: false,
                tail: false,
                write_deferred: false,
                read_lent: false,
                read_claimed: false,
                handed: None,
                inbox: Inbox::default(),
                seeded: 0,
                frames: Vec::new(),
            }),
            in_flight: AtomicUsize::new(0),
            max_frame,
            compression: AnswerCompression::default(),
            socket: None,
            taker: None,
            max_request: 0,
            max_calls: 0,
            read_loans: AtomicU64::new(0),
            worker_bytes: AtomicU64::new(0),
        }
    }

    /// Workers may write the answers to `lender`'s socket themselves while
    /// the connection task lends it (plain sockets only; see the module docs).
    ///
    /// # Safety
    ///
    /// The socket must stay open until [`close`](Self::close) has returned:
    /// the connection closes this before it drops the socket's halves.
    pub unsafe fn lending(mut self, lender: Option<Lender>) -> Self {
        self.socket = lender;
        self
    }

    /// Whether it has a socket to lend (a plain one).
    pub fn lends(&self) -> bool {
        self.socket.is_some()
    }

    /// The task may lend its socket's read side as well: a worker that has
    /// written the answer of the connection's last call may read the next
    /// request and start it through `taker` (see "The read side lent").
    /// Only with a socket to lend. A worker keeps requests of up to
    /// `max_request` bytes: what the connection's reader reads into its own
    /// buffer (a larger one holds the frame budget, which is the task's);
    /// and none while the connection has `max_calls` calls on the pool.
    pub fn reading(
        mut self,
        taker: impl TakeRequest + 'static,
        max_request: usize,
        max_calls: usize,
    ) -> Self {
        if self.socket.is_some() {
            self.taker = Some(Box::new(taker));
            self.max_request = max_request.min(super::pool_reads::READ_MAX);
            self.max_calls = max_calls;
        }
        self
    }

    /// The largest start of a request the task gives a loan
    /// ([`seed`](Self::seed)): one look's worth. A larger request in part
    /// stays with the task, which reads it on: seeded, a slowly arriving
    /// one would be copied back and forth at every tick of the loan.
    pub fn max_seed(&self) -> usize {
        self.max_request.min(super::pool_reads::RECV_SIZE)
    }

    /// Gives the loan about to be made the start of a request the task
    /// read (`fill` writes it into the loan's empty inbox): the worker that
    /// reads next completes it; if none does, it comes back with the read
    /// side ([`take_handed`](Self::take_handed)). Its bytes were counted
    /// as read by the task and are not counted again.
    pub fn seed(&self, fill: impl FnOnce(&mut BytesMut)) {
        let mut st = self.state.lock();
        debug_assert!(st.inbox.is_empty(), "seeded before any loan");
        let inbox = st.inbox.buffer();
        fill(inbox);
        st.seeded = inbox.len();
    }

    /// Loans of the read side made so far.
    pub fn read_loans(&self) -> u64 {
        self.read_loans.load(Ordering::Relaxed)
    }

    /// Whether the task may lend its read side ([`reading`](Self::reading)).
    pub fn lends_reads(&self) -> bool {
        self.taker.is_some()
    }

    /// Bytes of the requests workers read themselves, so far.
    pub fn worker_bytes(&self) -> u64 {
        self.worker_bytes.load(Ordering::Relaxed)
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
    pub fn reserve(self: &Arc<Self>, reply_to: ReplyTo, reserved: Option<Reserved>) -> AnswerSlot {
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
    ///
    /// `lend`: the task's outbox is empty and it may read more: while it
    /// waits, workers write answers to the socket themselves (when it is a
    /// plain one), and it is woken only for what it must do — the rest of
    /// an answer the socket did not take.
    ///
    /// `lend_read` (with `lend`; the task is not reading its socket): the
    /// read side is lent too, to the worker that delivers the connection's
    /// one pooled call. Ready at once when it cannot be (the call was
    /// answered meanwhile, or the socket cannot be lent): the task must
    /// read itself.
    ///
    /// With the call answered already, the read side goes to the worker
    /// that waits awake for the next task, when `pool` has one.
    pub fn poll_news(
        self: &Arc<Self>,
        cx: &mut Context<'_>,
        lend: bool,
        lend_read: Option<&crate::pool::WorkerPool>,
    ) -> Poll<()> {
        let mut st = self.state.lock();
        if std::mem::take(&mut st.news) {
            return Poll::Ready(());
        }
        if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            st.waker = Some(cx.waker().clone());
        }
        if lend && self.socket.is_some() && st.buf.is_empty() && !st.closed {
            st.lent = true;
        }
        if let Some(pool) = lend_read {
            if !st.lent || self.taker.is_none() {
                return Poll::Ready(());
            }
            // A worker claims the read side when it delivers the one pooled
            // call (under this lock). With none left, the worker that
            // answered it, now waiting awake for the next, gets it.
            if self.in_flight() == 0 {
                if !pool.lend_spinner(self.clone()) {
                    return Poll::Ready(());
                }
                st.read_claimed = true;
            }
            if !std::mem::replace(&mut st.read_lent, true) {
                self.read_loans.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(lender) = &self.socket {
                // Requests a worker takes wake no runtime thread: the kernel
                // signals the socket readable only past a lone caller's
                // request, or a look of a run.
                let lowat = lent_lowat(self.max_request, self.in_flight() <= 1);
                // SAFETY: not closed (checked above, under this lock).
                let _ = unsafe { lender.socket.set_recv_lowat(lowat) };
            }
        }
        Poll::Pending
    }

    /// What a worker handed back with the read side (see "The read side
    /// lent"): bytes it read, for the task to read before the socket, and
    /// the read's error. After [`take`](Self::take), which ends the loan.
    pub fn take_handed(&self) -> Option<Handed> {
        self.state.lock().handed.take()
    }

    /// Moves every answer delivered so far to the end of `out` (and the
    /// budget their requests hold to `held`), without waiting. Returns
    /// whether there was any. Neither buffer keeps more than `max_keep` bytes
    /// of storage once emptied.
    ///
    /// Takes the socket back if it was lent: from here on only the task
    /// writes, until it lends it again. A frame a worker wrote in part goes
    /// first, before what `out` holds (nothing of `out` can have been
    /// written: the socket was lent only while the outbox was empty).
    pub fn take(&self, out: &mut BytesMut, held: &mut Vec<Reserved>, max_keep: usize) -> bool {
        let mut st = self.state.lock();
        st.lent = false;
        self.end_read_loan(&mut st);
        held.append(&mut st.held);
        if st.buf.is_empty() {
            return false;
        }
        if std::mem::take(&mut st.tail) && !out.is_empty() {
            let mut first = std::mem::take(&mut st.buf);
            first.extend_from_slice(out);
            *out = first;
            return true;
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
        if st.inbox.release() {
            st.frames = Vec::new();
        }
    }

    /// The connection is gone: drop what is buffered and every later answer.
    pub fn close(&self) {
        let mut st = self.state.lock();
        self.end_read_loan(&mut st);
        st.closed = true;
        st.lent = false;
        st.buf = BytesMut::new();
        st.held.clear();
        st.waker = None;
    }

    /// Encodes the answer (unless the connection is gone), counts the call
    /// done and wakes the connection task if it waits — or, while the task
    /// lends its socket, writes the answers (now if this was the
    /// connection's last call on the pool, else when this worker's run of
    /// tasks ends).
    fn deliver(self: &Arc<Self>, frame: Option<&OutFrame>, reserved: Option<Reserved>) {
        let mut claimed = false;
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
            if st.lent {
                if last {
                    let waker = self.write_lent(&mut st);
                    // All written and still lent: this worker looks for the
                    // caller's next request while it waits for its next task.
                    if st.read_lent && st.lent && !st.read_claimed {
                        st.read_claimed = true;
                        claimed = true;
                    }
                    (waker, true)
                } else if !std::mem::replace(&mut st.write_deferred, true) {
                    (Some(Waker::from(self.clone())), false)
                } else {
                    (None, false)
                }
            } else {
                (st.waker.take(), last)
            }
        };
        if claimed {
            crate::pool::poll_soon(self.clone());
        }
        match waker {
            // Nothing more to come from the pool: wake it now.
            Some(waker) if last => waker.wake(),
            // More answers are on their way, likely from this very worker:
            // one wake-up (or one write of the lent socket) when its run of
            // tasks ends (see `pool::wake_soon`).
            Some(waker) => crate::pool::wake_soon(waker),
            None => {}
        }
    }

    /// Writes `buf` to the lent socket (`st.lent` is set): what the socket
    /// takes now. Returns the task's waker when the task must come: the
    /// socket did not take everything (it writes the rest, first), or it
    /// failed (the task's own write sees why).
    fn write_lent(&self, st: &mut State) -> Option<Waker> {
        let lender = self.socket.as_ref()?;
        let mut written = 0;
        while written < st.buf.len() {
            // SAFETY: `lent` is set, so `close` has not run (it clears it
            // under this lock), and the connection closes this before it
            // drops the socket's halves (`lending`).
            match unsafe { lender.socket.send_now(&st.buf[written..]) } {
                Ok(0) => break,
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        lender.io.add_out(written as u64);
        if written > 0 {
            lender.stats.worker_writes.fetch_add(1, Ordering::Relaxed);
        }
        if written == st.buf.len() {
            if st.buf.capacity() > lender.keep {
                // A large answer's storage must not stay behind.
                st.buf = BytesMut::new();
            } else {
                st.buf.clear();
            }
            // Their answers are out: large requests give their budget back.
            st.held.clear();
            st.news = false;
            if self.in_flight.load(Ordering::Acquire) == 0 {
                lender.quiet.calls_ended(std::time::Instant::now());
            }
            return None;
        }
        st.buf.advance(written);
        st.tail = written > 0;
        st.lent = false;
        self.end_read_loan(st);
        st.waker.take()
    }
}

/// The write of a lent socket deferred to the end of a worker's run of
/// tasks ([`crate::pool::wake_soon`]): one `send` for the run's answers.
impl Wake for PoolAnswers {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let waker = {
            let mut st = self.state.lock();
            st.write_deferred = false;
            if st.lent {
                self.write_lent(&mut st)
            } else if st.news {
                // Taken back meanwhile: the task collects the answers.
                st.waker.take()
            } else {
                None
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

mod news;
mod read_loan;
mod slot;

pub(crate) use news::pool_news;
pub use read_loan::Handed;
pub(crate) use slot::AnswerSlot;

#[cfg(test)]
mod tests;
