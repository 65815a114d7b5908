//! [`PendingCalls`]: the calls of one client connection that wait for an answer,
//! and the one timer that times them all out.
//!
//! # Why not a timer per call
//!
//! Each call needs a deadline, and the obvious `tokio::time::timeout` around the
//! wait registers an entry in the runtime's timer wheel when the call starts and
//! removes it when the answer arrives: two trips through the timer driver's lock
//! per call, for a timer that almost never fires (profiled at 8 % of the client's
//! CPU at 1:100:1024). Instead the table remembers each call's deadline, rounded
//! *up* to the millisecond, and one sweeper task per connection sleeps until the
//! earliest deadline that may still be pending, fails what has expired, and goes
//! back to sleep until the next one. Starting a call costs one read of an
//! atomic, under the table's lock; only a call whose deadline is *earlier* than
//! every pending one (a shorter timeout than its neighbours) lowers it and
//! wakes the sweeper to re-arm.
//!
//! With every call on the same timeout, the sweeper wakes about once per timeout
//! period, scans the table (calls in flight, a few hundred at most in practice)
//! and sleeps again: its cost is independent of the call rate. A call never
//! times out early; it may time out up to a millisecond late.
//!
//! # Why slots, not a map of one-shot channels
//!
//! A `oneshot` channel per call in a `HashMap` keyed by request id would cost
//! an allocation and a free, a hash insert and remove, and the channel's own
//! atomics, per call. The table is a slab of slots instead, and **the request
//! id names the slot**: its low 32 bits are the slot
//! index + 1, its high 32 bits a sequence number bumped per call, so a late
//! answer to a call that gave up cannot complete the call that reuses its slot.
//! A slot holds the call's deadline and its state — waiting (with the waker of
//! the task awaiting it), or done (with the outcome, until the call collects it).
//! Starting, completing and collecting a call each take the table's
//! `parking_lot` mutex once, uncontended in practice (one atomic each way); the
//! reader finds the slot by index, with no hashing, and nothing is allocated
//! once the slab has grown to the connection's peak of calls in flight. The
//! lock also lets the sweep and `fail_all` see a consistent table.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use parking_lot::Mutex;
use rpc_codec::Frame;
use rpc_core::RpcError;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::CloseSignal;

/// What a waiting call receives: its answer frame or why there is none.
pub(crate) type Outcome = Result<Frame, RpcError>;

/// No deadline pending.
const NONE_DUE: u64 = u64::MAX;

/// Where a call is.
enum State {
    /// The slot is unused.
    Free,
    /// Waiting for its answer; the waker of the task awaiting it, once polled.
    Waiting(Option<Waker>),
    /// Answered (or failed), not yet collected by the call.
    Done(Outcome),
}

struct Slot {
    /// The request id of the call in this slot (meaningless while `Free`).
    id: u64,
    /// Milliseconds after the table's epoch, rounded up.
    due_ms: u64,
    state: State,
}

/// Calls in flight on every connection of one client, shared by their
/// tables of pending calls: a caller whose call is the only one may write
/// its frame through (see [`FrameWriter::offer_alone`](crate::FrameWriter::offer_alone)),
/// as no other caller could join its write.
#[derive(Debug, Clone, Default)]
pub struct CallsInFlight(Arc<AtomicUsize>);

/// A count, not a setting: transports compare equal whatever they count.
impl PartialEq for CallsInFlight {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for CallsInFlight {}

impl CallsInFlight {
    /// Calls (and streams) in flight now; a relaxed read, for heuristics.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// A connection's waiting calls, mirrored in its client's [`CallsInFlight`].
#[derive(Default)]
struct Waiting {
    here: usize,
    client: CallsInFlight,
}

impl Waiting {
    /// One more; returns the client's count with it.
    fn add(&mut self) -> usize {
        self.here += 1;
        self.client.0.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn sub(&mut self) {
        self.sub_n(1);
    }

    fn sub_n(&mut self, n: usize) {
        if n > 0 {
            self.here -= n;
            self.client.0.fetch_sub(n, Ordering::Relaxed);
        }
    }
}

impl Drop for Waiting {
    /// A connection dropped with calls still waiting takes them off its
    /// client's count.
    fn drop(&mut self) {
        self.client.0.fetch_sub(self.here, Ordering::Relaxed);
    }
}

/// The slots, the free list and the id sequence, behind one lock.
#[derive(Default)]
struct Table {
    slots: Vec<Slot>,
    /// Indices of free slots; reused last-in first-out (the warmest first).
    free: Vec<u32>,
    /// Calls in the `Waiting` state.
    waiting: Waiting,
    /// Bumped per call: the high half of every request id.
    seq: u32,
}

/// The slot call `id` occupies in `slots`, if it still does (any id off the
/// wire may come here: one that names no occupied slot finds none).
fn slot_of(slots: &mut [Slot], id: u64) -> Option<&mut Slot> {
    let index = (id as u32).checked_sub(1)? as usize;
    slots
        .get_mut(index)
        .filter(|s| s.id == id && !matches!(s.state, State::Free))
}

impl Table {
    /// The slot call `id` occupies, if it still does.
    fn slot(&mut self, id: u64) -> Option<&mut Slot> {
        slot_of(&mut self.slots, id)
    }

    /// Frees the slot of call `id`; returns what it held (dropped by the
    /// caller, outside the lock).
    fn free(&mut self, id: u64) -> Option<State> {
        let slot = self.slot(id)?;
        let state = std::mem::replace(&mut slot.state, State::Free);
        if matches!(state, State::Waiting(_)) {
            self.waiting.sub();
        }
        self.free.push((id as u32) - 1);
        Some(state)
    }
}

impl Slot {
    /// Completes this slot, which waits for its answer (callers look
    /// first), with `outcome`; the waker to wake, outside the lock. The
    /// caller takes the call off the table's count (`Waiting::sub_n`), once
    /// for all it completes.
    fn complete(&mut self, outcome: Outcome) -> Option<Waker> {
        match std::mem::replace(&mut self.state, State::Done(outcome)) {
            State::Waiting(waker) => waker,
            _ => {
                debug_assert!(false, "completed a slot that was not waiting");
                None
            }
        }
    }
}

/// The pending calls of one connection, each in a slot its request id names.
pub(crate) struct PendingCalls {
    table: Mutex<Table>,
    /// The client's count the table's calls are in (readable without the lock).
    in_flight: CallsInFlight,
    epoch: Instant,
    /// The earliest deadline that may still be pending (ms after `epoch`), or
    /// `NONE_DUE`. Lowered by `insert`, recomputed by the sweep.
    next_due_ms: AtomicU64,
    /// Woken when `insert` lowers `next_due_ms` below what the sweeper sleeps to.
    earlier: Notify,
}

impl std::fmt::Debug for PendingCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCalls")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl PendingCalls {
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        PendingCalls::counted_in(CallsInFlight::default())
    }

    /// A connection's table, its calls counted in its client's `in_flight`.
    pub(crate) fn counted_in(in_flight: CallsInFlight) -> Self {
        let table = Table {
            waiting: Waiting {
                here: 0,
                client: in_flight.clone(),
            },
            ..Table::default()
        };
        PendingCalls {
            in_flight,
            table: Mutex::new(table),
            epoch: Instant::now(),
            next_due_ms: AtomicU64::new(NONE_DUE),
            earlier: Notify::new(),
        }
    }

    fn due_ms(&self, deadline: Instant) -> u64 {
        let after = deadline.saturating_duration_since(self.epoch);
        // Round up: a call is never failed before its deadline.
        let ms = after.as_nanos().div_ceil(1_000_000);
        ms.min(NONE_DUE as u128 - 1) as u64
    }

    /// Registers a call due at `deadline`; returns its request id.
    #[cfg(test)]
    pub(crate) fn insert(&self, deadline: Instant) -> u64 {
        self.insert_counted(deadline, None).0
    }

    /// Registers a call due at `deadline`, woken through `waker` once
    /// answered (`None`: once polled); returns its request id and how many
    /// calls (this one included) are now in flight on every connection of
    /// the client ([`CallsInFlight`]).
    pub(crate) fn insert_counted(&self, deadline: Instant, waker: Option<Waker>) -> (u64, usize) {
        let due_ms = self.due_ms(deadline);
        let (id, in_flight, lowered) = {
            let mut table = self.table.lock();
            table.seq = table.seq.wrapping_add(1);
            let seq = u64::from(table.seq) << 32;
            let index = match table.free.pop() {
                Some(index) => index,
                None => {
                    table.slots.push(Slot {
                        id: 0,
                        due_ms: 0,
                        state: State::Free,
                    });
                    // Past 2^32 - 1 calls in flight on one connection the id
                    // would wrap; the write queue bound stops that long before.
                    (table.slots.len() - 1) as u32
                }
            };
            let id = seq | (u64::from(index) + 1);
            table.slots[index as usize] = Slot {
                id,
                due_ms,
                state: State::Waiting(waker),
            };
            let in_flight = table.waiting.add();
            // Under the lock, as the sweep's store: a sweep either saw this
            // entry or stored its minimum before this looks. Lowered only when
            // earlier — a plain read otherwise, not a write per call to a line
            // the reader's thread reads.
            let lowered = due_ms < self.next_due_ms.load(Ordering::Relaxed);
            if lowered {
                self.next_due_ms.store(due_ms, Ordering::Release);
            }
            (id, in_flight, lowered)
        };
        if lowered {
            self.earlier.notify_one();
        }
        (id, in_flight)
    }

    /// The outcome of call `id` once it has one (the slot is freed then);
    /// until then remembers `cx`'s waker. A call that is not in the table at
    /// all (never was, or was already collected) gets `None`.
    pub(crate) fn poll(&self, id: u64, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        let mut table = self.table.lock();
        let Some(slot) = table.slot(id) else {
            return Poll::Ready(None);
        };
        match &mut slot.state {
            State::Waiting(Some(w)) if w.will_wake(cx.waker()) => Poll::Pending,
            State::Waiting(waker) => {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
            State::Done(_) => match table.free(id) {
                Some(State::Done(outcome)) => Poll::Ready(Some(outcome)),
                _ => Poll::Ready(None),
            },
            State::Free => Poll::Ready(None),
        }
    }

    /// Completes call `id` with `outcome`; false when it is no longer pending
    /// (timed out, or given up by its caller).
    pub(crate) fn complete(&self, id: u64, outcome: Outcome) -> bool {
        let waker = {
            let mut table = self.table.lock();
            let table = &mut *table;
            match slot_of(&mut table.slots, id) {
                Some(slot) if matches!(slot.state, State::Waiting(_)) => {
                    table.waiting.sub();
                    slot.complete(outcome)
                }
                _ => return false,
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        true
    }

    /// Completes the calls `answers` answer (drained) under one lock, and
    /// wakes their callers once it is let go: the answers of one read cost
    /// the table one lock and the client's count one update, not one each —
    /// atomic writes to lines the calling threads write too. `stale` gets
    /// the request id of each answer whose call is no longer pending (timed
    /// out, or given up by its caller); that answer is dropped.
    pub(crate) fn complete_answers(
        &self,
        answers: &mut Vec<Frame>,
        wakers: &mut Vec<Waker>,
        mut stale: impl FnMut(u64),
    ) {
        if answers.is_empty() {
            return;
        }
        let mut dropped: Vec<Frame> = Vec::new();
        {
            let mut table = self.table.lock();
            let table = &mut *table;
            let mut done = 0;
            for answer in answers.drain(..) {
                let id = answer.header.request_id;
                match slot_of(&mut table.slots, id) {
                    Some(slot) if matches!(slot.state, State::Waiting(_)) => {
                        done += 1;
                        wakers.extend(slot.complete(Ok(answer)));
                    }
                    _ => dropped.push(answer),
                }
            }
            table.waiting.sub_n(done);
        }
        for waker in wakers.drain(..) {
            waker.wake();
        }
        for answer in dropped {
            stale(answer.header.request_id);
        }
    }

    /// Forgets call `id` (its caller stopped waiting); true when it was
    /// still waiting for its answer (none had arrived).
    pub(crate) fn remove(&self, id: u64) -> bool {
        let state = self.table.lock().free(id);
        matches!(state, Some(State::Waiting(_)))
    }

    /// Fails every pending call with `err`.
    pub(crate) fn fail_all(&self, err: &RpcError) {
        let wakers: Vec<Waker> = {
            let mut table = self.table.lock();
            let table = &mut *table;
            let mut done = 0;
            let wakers = table
                .slots
                .iter_mut()
                .filter(|s| matches!(s.state, State::Waiting(_)))
                .filter_map(|s| {
                    done += 1;
                    s.complete(Err(err.clone()))
                })
                .collect();
            table.waiting.sub_n(done);
            wakers
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Calls (and streams) in flight on every connection of the client.
    pub(crate) fn client_in_flight(&self) -> usize {
        self.in_flight.get()
    }

    /// Calls waiting for an answer.
    pub(crate) fn len(&self) -> usize {
        self.table.lock().waiting.here
    }

    /// Fails the calls whose deadline has passed (with a bare `Timeout` that the
    /// waiting call fills in with its names) and recomputes the earliest deadline.
    fn sweep(&self, now: Instant) {
        let now_ms = now.saturating_duration_since(self.epoch).as_millis() as u64;
        let wakers: Vec<Waker> = {
            let mut table = self.table.lock();
            let table = &mut *table;
            let mut next = NONE_DUE;
            let mut wakers = Vec::new();
            let mut done = 0;
            for slot in &mut table.slots {
                if !matches!(slot.state, State::Waiting(_)) {
                    continue;
                }
                if slot.due_ms > now_ms {
                    next = next.min(slot.due_ms);
                    continue;
                }
                let timeout = Err(RpcError::Timeout {
                    service: String::new(),
                    method: String::new(),
                    timeout: Duration::ZERO,
                });
                done += 1;
                wakers.extend(slot.complete(timeout));
            }
            table.waiting.sub_n(done);
            // Under the lock, as every insert's look at it.
            self.next_due_ms.store(next, Ordering::Release);
            wakers
        };
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// Spawns the sweeper of `pending`; it ends when `close` fires.
pub(crate) fn spawn_sweeper(pending: Arc<PendingCalls>, close: Arc<CloseSignal>) {
    tokio::spawn(async move {
        let closed = close.closed();
        tokio::pin!(closed);
        loop {
            // Register for "an earlier deadline arrived" before reading the
            // earliest deadline, so that a lowering in between is not missed.
            let earlier = pending.earlier.notified();
            tokio::pin!(earlier);
            earlier.as_mut().enable();
            let due = pending.next_due_ms.load(Ordering::Acquire);
            let at = match due {
                NONE_DUE => None,
                ms => pending.epoch.checked_add(Duration::from_millis(ms)),
            };
            let Some(at) = at else {
                tokio::select! {
                    biased;
                    _ = &mut closed => return,
                    _ = earlier => continue,
                }
            };
            tokio::select! {
                biased;
                _ = &mut closed => return,
                _ = earlier => continue,
                _ = tokio::time::sleep_until(at) => {}
            }
            pending.sweep(Instant::now());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits for call `id`'s outcome.
    async fn outcome(pending: &PendingCalls, id: u64) -> Option<Outcome> {
        std::future::poll_fn(|cx| pending.poll(id, cx)).await
    }

    #[tokio::test(start_paused = true)]
    async fn expired_calls_time_out_and_answered_ones_do_not() {
        let pending = Arc::new(PendingCalls::new());
        let close = Arc::new(CloseSignal::new());
        spawn_sweeper(pending.clone(), close.clone());
        let now = Instant::now();
        let slow = pending.insert(now + Duration::from_millis(50));
        let fast = pending.insert(now + Duration::from_millis(50));
        let short = pending.insert(now + Duration::from_millis(10));
        assert!(pending.complete(fast, Err(RpcError::ShuttingDown)));
        tokio::time::sleep(Duration::from_millis(11)).await;
        let timed_out = outcome(&pending, short).await;
        assert!(matches!(timed_out, Some(Err(RpcError::Timeout { .. }))));
        assert_eq!(pending.len(), 1, "only the slow call is still waiting");
        tokio::time::sleep(Duration::from_millis(40)).await;
        let timed_out = outcome(&pending, slow).await;
        assert!(matches!(timed_out, Some(Err(RpcError::Timeout { .. }))));
        let answered = outcome(&pending, fast).await;
        assert!(matches!(answered, Some(Err(RpcError::ShuttingDown))));
        assert!(!pending.complete(slow, Err(RpcError::ShuttingDown)));
        close.close("test over");
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_deadline_rearms_the_sweeper() {
        let pending = Arc::new(PendingCalls::new());
        let close = Arc::new(CloseSignal::new());
        spawn_sweeper(pending.clone(), close.clone());
        let now = Instant::now();
        let _late = pending.insert(now + Duration::from_secs(60));
        tokio::task::yield_now().await; // the sweeper now sleeps until +60 s
        let early = pending.insert(now + Duration::from_millis(5));
        let started = Instant::now();
        let timed_out = outcome(&pending, early).await;
        assert!(matches!(timed_out, Some(Err(RpcError::Timeout { .. }))));
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(5) && waited < Duration::from_secs(1),
            "timed out after {waited:?}"
        );
        assert_eq!(pending.len(), 1);
        close.close("test over");
    }

    #[tokio::test]
    async fn fail_all_fails_every_waiting_call() {
        let pending = PendingCalls::new();
        let a = pending.insert(Instant::now() + Duration::from_secs(1));
        let b = pending.insert(Instant::now() + Duration::from_secs(1));
        pending.fail_all(&RpcError::ShuttingDown);
        assert_eq!(pending.len(), 0);
        for id in [a, b] {
            let failed = outcome(&pending, id).await;
            assert!(matches!(failed, Some(Err(RpcError::ShuttingDown))));
        }
        // Collected: the slots are free again.
        assert!(outcome(&pending, a).await.is_none());
    }

    #[tokio::test]
    async fn a_late_answer_does_not_reach_the_call_that_reuses_the_slot() {
        let pending = PendingCalls::new();
        let deadline = Instant::now() + Duration::from_secs(1);
        let gave_up = pending.insert(deadline);
        pending.remove(gave_up);
        let next = pending.insert(deadline);
        assert_eq!(gave_up as u32, next as u32, "the slot is reused");
        assert_ne!(gave_up, next, "under a new id");
        assert!(!pending.complete(gave_up, Err(RpcError::ShuttingDown)));
        assert_eq!(pending.len(), 1);
        assert!(pending.complete(next, Err(RpcError::ShuttingDown)));
        assert!(
            !pending.complete(next, Err(RpcError::ShuttingDown)),
            "once only"
        );
        let answered = outcome(&pending, next).await;
        assert!(matches!(answered, Some(Err(RpcError::ShuttingDown))));
    }

    #[test]
    fn ids_off_the_wire_that_name_no_slot_are_ignored() {
        let pending = PendingCalls::new();
        let id = pending.insert(Instant::now() + Duration::from_secs(1));
        for bogus in [0, u64::MAX, id + 1, id ^ (1 << 40), u32::MAX as u64] {
            assert!(!pending.complete(bogus, Err(RpcError::ShuttingDown)));
        }
        assert_eq!(pending.len(), 1);
    }

    #[tokio::test]
    async fn a_waiting_call_is_woken_when_answered() {
        let pending = Arc::new(PendingCalls::new());
        let id = pending.insert(Instant::now() + Duration::from_secs(5));
        let waiter = tokio::spawn({
            let pending = pending.clone();
            async move { outcome(&pending, id).await }
        });
        tokio::task::yield_now().await;
        assert!(pending.complete(id, Err(RpcError::ShuttingDown)));
        let answered = waiter.await.unwrap();
        assert!(matches!(answered, Some(Err(RpcError::ShuttingDown))));
        assert_eq!(pending.len(), 0);
    }

    #[test]
    fn a_call_registered_with_a_waker_is_woken_without_being_polled() {
        struct Flag(std::sync::atomic::AtomicBool);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let flag = Arc::new(Flag(false.into()));
        let pending = PendingCalls::new();
        let (id, _) = pending.insert_counted(
            Instant::now() + Duration::from_secs(5),
            Some(Waker::from(flag.clone())),
        );
        assert!(pending.complete(id, Err(RpcError::ShuttingDown)));
        assert!(flag.0.load(Ordering::SeqCst), "woken by the answer");
        let waker = Waker::from(flag);
        let polled = pending.poll(id, &mut Context::from_waker(&waker));
        assert!(matches!(
            polled,
            Poll::Ready(Some(Err(RpcError::ShuttingDown)))
        ));
        assert_eq!(pending.len(), 0);
    }

    /// An answer frame to `id`, as the reader hands it up.
    fn answer(id: u64, body: &'static [u8]) -> Frame {
        let mut bytes = bytes::BytesMut::new();
        rpc_codec::OutFrame::response(id, 1, bytes::Bytes::from_static(body))
            .encode(&mut bytes, 1 << 20)
            .unwrap();
        let header = rpc_codec::read_header(&bytes).unwrap().unwrap();
        Frame::from_bytes(header, bytes.freeze()).unwrap()
    }

    #[tokio::test]
    async fn a_read_s_answers_complete_together() {
        let count = CallsInFlight::default();
        let pending = Arc::new(PendingCalls::counted_in(count.clone()));
        let later = Instant::now() + Duration::from_secs(60);
        let (awaited, _) = pending.insert_counted(later, None);
        let (not_polled_yet, _) = pending.insert_counted(later, None);
        let (gave_up, _) = pending.insert_counted(later, None);
        let (unanswered, _) = pending.insert_counted(later, None);
        assert!(pending.remove(gave_up));
        let waiter = tokio::spawn({
            let pending = pending.clone();
            async move { outcome(&pending, awaited).await }
        });
        tokio::task::yield_now().await;
        let mut answers = vec![
            answer(awaited, b"a"),
            answer(gave_up, b"late"),
            answer(not_polled_yet, b"b"),
        ];
        let mut wakers = Vec::new();
        let mut stale = Vec::new();
        pending.complete_answers(&mut answers, &mut wakers, |id| stale.push(id));
        assert!(answers.is_empty() && wakers.is_empty(), "both drained");
        assert_eq!(stale, [gave_up], "the answer nobody waits for");
        assert_eq!(count.get(), 1, "two calls answered, one still waiting");
        assert_eq!(pending.len(), 1);
        let got = waiter.await.unwrap();
        assert!(matches!(got, Some(Ok(f)) if f.body.as_ref() == b"a"));
        let got = outcome(&pending, not_polled_yet).await;
        assert!(matches!(got, Some(Ok(f)) if f.body.as_ref() == b"b"));
        assert!(pending.complete(unanswered, Err(RpcError::ShuttingDown)));
        assert_eq!(count.get(), 0);
    }

    #[tokio::test]
    async fn the_client_count_spans_its_connections() {
        let count = CallsInFlight::default();
        let a = PendingCalls::counted_in(count.clone());
        let b = PendingCalls::counted_in(count.clone());
        let later = Instant::now() + Duration::from_secs(60);
        let (a1, n) = a.insert_counted(later, None);
        assert_eq!(n, 1, "alone");
        let (b1, n) = b.insert_counted(later, None);
        assert_eq!(n, 2, "one in flight elsewhere");
        let (_b2, _) = b.insert_counted(later, None);
        assert_eq!(count.get(), 3);
        assert!(a.remove(a1));
        assert!(b.complete(b1, Err(RpcError::ShuttingDown)));
        assert_eq!(count.get(), 1);
        // A connection dropped with a call still waiting gives it back.
        drop(b);
        assert_eq!(count.get(), 0);
        let _ = a.insert_counted(later, None);
        a.fail_all(&RpcError::ShuttingDown);
        assert_eq!(count.get(), 0);
    }
}
