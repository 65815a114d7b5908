//! [`PoolSide`]: what a pool-dispatch connection shares with the worker
//! pool — where the workers put its answers ([`PoolAnswers`], with the
//! socket it lends them) and the calls they start from requests they read
//! themselves — made when the connection reads its first request (a unary
//! one, while the server is not stopping), not when it is accepted.
//!
//! # Why made late
//!
//! A connection that never sends such a request — a silent socket, a
//! client's spare connection, one that only pings or opens streams (which
//! run on the connection's task) — has nothing on the pool, and would hold
//! all this for nothing: several hundred bytes of heap, a seventh of what
//! an idle connection costs the server (BENCHMARKS.md, "Idle connections:
//! the pool side made with the first request"). Once made it stays until
//! the connection ends: a connection that called once is likely to call
//! again, and its tidy gives the buffers back already
//! (`PoolAnswers::release`).
//!
//! # The socket lent
//!
//! The answers may write (and read) the connection's socket from a worker
//! thread while the task lends it. [`LazyPoolSide`] closes them when it
//! drops — after which no worker touches the socket — and must drop before
//! the socket's halves: the connection declares it after its reader and
//! outbox.
//!
//! # Handing over, taking back
//!
//! [`PoolLane::hand_over`] gives the pool a batch's calls, and wakes it
//! once for them; [`PoolSide::take_back`] takes the lent socket back, with
//! the answers the workers delivered and what came of a read side lent.
//!
//! # Lending the read side
//!
//! Whether a waiting connection lends its read side as well is
//! [`PoolLane::lends_read`]'s decision: for a lone caller whose call, if
//! any, is the one this turn submitted, or for a pipelining caller's run
//! that is the pool's only work (`worker_reads`, "The read side lent" in
//! `reply::pool_answers`).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use rpc_transport::{FrameReader, RawSocket};
use tokio::io::{AsyncRead, AsyncWrite};

use super::live::LiveCalls;
use super::worker_reads::{drain_started, RunLoans, Started, WorkerReads};
use crate::admission::Ticket;
use crate::ctx::ServerCtx;
use crate::dispatch::PoolBatch;
use crate::pool::WorkerPool;
use crate::reply::{high_water_mark, Lender, Outbox, PoolAnswers};

/// A connection's way to the worker pool: the pool, and where its threads
/// put this connection's answers.
pub(super) struct PoolLane<'a> {
    pub(super) pool: &'a WorkerPool,
    pub(super) answers: Arc<PoolAnswers>,
}

impl PoolLane<'_> {
    /// Hands the pooled calls of a batch that read requests to the pool,
    /// together and quietly, then wakes the pool once for all of them — not
    /// at all if a worker is awake to take them — and returns how many it
    /// took. One the pool refuses is claimed in `live` (where it went when
    /// it was read) and answered `ServerBusy` into `outbox`.
    ///
    /// With other connections open, a batch of several calls that would
    /// wake a parked worker first yields the runtime thread once, so that
    /// the thread's other ready connections hand over theirs and one
    /// wake-up takes them all ("Waking the pool" in the connection's docs).
    pub(super) async fn hand_over<'r, W: AsyncWrite + Unpin>(
        &self,
        ctx: &ServerCtx,
        batch: &mut PoolBatch,
        live: &mut LiveCalls<'r>,
        outbox: &mut Outbox<W>,
    ) -> usize {
        let handed = match batch.len() {
            0 => 0,
            _ => batch.submit(
                self.pool,
                ctx,
                |id| live.claim(id).map(|call| (call.reply_to, call.route)),
                |reply_to, error| outbox.push(reply_to.error(&error)),
            ),
        };
        // Wakes the pool when dropped: after the yield below, or if the
        // task is dropped while it yields (a runtime torn down), so the
        // batch's calls are never left queued with every worker parked.
        let wake = WakeIdle(self.pool);
        if handed > 1
            && ctx.stats.open_connections.load(Ordering::Relaxed) > 1
            && self.pool.needs_wake()
        {
            ctx.stats.deferred_wakes.fetch_add(1, Ordering::Relaxed);
            tokio::task::yield_now().await;
        }
        drop(wake);
        handed
    }

    /// Whether the connection task, about to wait with its socket lent,
    /// lends its read side too (see `worker_reads`), given the calls this
    /// turn submitted (`submitted`) and those on the pool before it
    /// (`before`):
    /// - a lone caller's: the call on the pool, if any, is one this turn
    ///   submitted, whose worker looks at the read side once it answers
    ///   (one from before may block its worker — the read side came back
    ///   at a tick for that — and then the task reads);
    /// - a pipelining caller's run: every call on the pool is one this turn
    ///   submitted, and the pool's only work; the worker that answers the
    ///   last reads the caller's next run (as often as `loans` allows).
    pub(super) fn lends_read(&self, submitted: usize, before: usize, loans: &mut RunLoans) -> bool {
        if !self.answers.lends_reads() {
            return false;
        }
        let on_pool = self.answers.in_flight();
        let lone = self.pool.in_rhythm()
            && (on_pool == 0 || (submitted > 0 && on_pool == 1))
            && self.pool.tasks_in_flight() <= 1;
        let run = !lone
            && submitted > 1
            && before == 0
            && on_pool > 0
            && self.pool.tasks_in_flight() <= on_pool
            && self.pool.spins()
            && loans.may_lend();
        if run {
            loans.lent(self.answers.worker_bytes(), self.answers.read_loans());
        }
        lone || run
    }
}

/// Wakes the pool for the tasks submitted quietly
/// ([`WorkerPool::wake_idle`]) when dropped, however the batch's wait for
/// its wake-up ends.
struct WakeIdle<'a>(&'a WorkerPool);

impl Drop for WakeIdle<'_> {
    fn drop(&mut self) {
        self.0.wake_idle();
    }
}

/// A connection's side of the worker pool (see the module docs).
pub(super) struct PoolSide<'a> {
    /// The pool, and where its workers put this connection's answers.
    pub(super) lane: PoolLane<'a>,
    /// Calls workers started from requests they read themselves, for the
    /// task's live-call table (`worker_reads::drain_started`).
    pub(super) started: Arc<Mutex<Vec<Started>>>,
}

impl<'a> PoolSide<'a> {
    /// Takes the socket back from the workers: the answers they delivered
    /// go into `outbox` (a frame a worker wrote in part first); after a
    /// loan of the read side (`read_lent`), the calls they started join
    /// `live` first — a `Cancel` read next finds its call — then what they
    /// read and left for the task goes back into `reader`, before the
    /// socket. (Whether the loan read anything, for the next loans, is the
    /// caller's: `RunLoans::back`.)
    pub(super) fn take_back<R, W>(
        &self,
        ctx: &'a ServerCtx,
        outbox: &mut Outbox<W>,
        reader: &mut FrameReader<R>,
        live: &mut LiveCalls<'a>,
        read_lent: bool,
    ) where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let answers = &*self.lane.answers;
        outbox.take_pooled(answers);
        if read_lent {
            drain_started(ctx, &self.started, live);
            if let Some(handed) = answers.take_handed() {
                reader.unread(&handed.bytes, handed.counted, handed.error);
            }
        }
    }
}

/// A connection's [`PoolSide`], made for its first request
/// ([`get_or_make`](Self::get_or_make)); closes its answers when
/// dropped (see the module docs). It lives in the connection's future,
/// which an idle connection holds too: it keeps only what the connection's
/// frame handling cannot give it when the request comes.
pub(super) struct LazyPoolSide<'a> {
    /// A `OnceLock`, not a `OnceCell`: the connection's future holds a
    /// reference to this across its awaits and must stay `Send`.
    made: OnceLock<PoolSide<'a>>,
    /// The connection's plain socket (none for TLS: nothing is lent then).
    socket: Option<RawSocket>,
    ticket: &'a Ticket,
}

impl<'a> LazyPoolSide<'a> {
    /// The pool side of a connection on `socket`, not made yet; `None`
    /// unless `ctx`'s server dispatches to a worker pool.
    ///
    /// # Safety
    ///
    /// It must drop before `socket` is closed: the connection declares it
    /// after its reader and outbox, whose drop closes the socket's halves
    /// (see the module docs).
    pub(super) unsafe fn new(
        ctx: &ServerCtx,
        socket: Option<RawSocket>,
        ticket: &'a Ticket,
    ) -> Option<Self> {
        ctx.dispatcher.pool()?;
        Some(LazyPoolSide {
            made: OnceLock::new(),
            socket,
            ticket,
        })
    }

    /// The pool side, if a request made it.
    #[inline]
    pub(super) fn get(&self) -> Option<&PoolSide<'a>> {
        self.made.get()
    }

    /// The pool side, made now for the connection from `peer` of `ctx`'s
    /// server if no request made it yet. `None` only if `ctx` has no pool
    /// (it had one when this was made: `new`).
    #[inline]
    pub(super) fn get_or_make(
        &self,
        ctx: &'a Arc<ServerCtx>,
        peer: Option<SocketAddr>,
    ) -> Option<&PoolSide<'a>> {
        match self.made.get() {
            Some(side) => Some(side),
            None => self.make(ctx, peer),
        }
    }

    /// Makes the pool side (the connection's task is the only caller).
    #[cold]
    #[inline(never)]
    fn make(&self, ctx: &'a Arc<ServerCtx>, peer: Option<SocketAddr>) -> Option<&PoolSide<'a>> {
        let pool: &'a WorkerPool = ctx.dispatcher.pool()?;
        Some(self.made.get_or_init(|| self.parts(ctx, pool, peer)))
    }

    /// The parts of the pool side of the connection from `peer`, on `pool`.
    fn parts(
        &self,
        ctx: &'a Arc<ServerCtx>,
        pool: &'a WorkerPool,
        peer: Option<SocketAddr>,
    ) -> PoolSide<'a> {
        let transport = &ctx.config.transport;
        let quiet = || self.ticket.activity().quiet_marker();
        let (reads, started) = WorkerReads::new(ctx.clone(), peer, quiet());
        // SAFETY: `new`'s contract: this drops, closing the answers, before
        // the socket is closed.
        let answers = unsafe {
            PoolAnswers::new(transport.max_frame_size)
                .with_compression(ctx.config.compression)
                .lending(self.socket.map(|socket| Lender {
                    socket,
                    keep: high_water_mark(transport),
                    io: ctx.metrics.io.clone(),
                    stats: ctx.stats.clone(),
                    quiet: quiet(),
                }))
                .reading(
                    reads,
                    transport
                        .read_buffer_max
                        .max(transport.read_buffer_min)
                        .min(transport.max_frame_size),
                    ctx.config.max_in_flight_per_connection,
                )
        };
        PoolSide {
            lane: PoolLane {
                pool,
                answers: Arc::new(answers),
            },
            started,
        }
    }
}

/// However the connection's task ends: no worker writes or reads the socket
/// after this.
impl Drop for LazyPoolSide<'_> {
    fn drop(&mut self) {
        if let Some(side) = self.made.get() {
            side.lane.answers.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use rpc_core::modes::Dispatch;
    use rpc_core::{RpcResponse, SerializerKind};

    use super::*;
    use crate::reply::ReplyTo;
    use crate::router::Router;
    use crate::test_support::server;

    #[test]
    fn made_once_on_demand_closed_on_drop_and_never_for_direct_dispatch() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _runtime = rt.enter();

        let (ctx, ticket) = server(Dispatch::Pool, Router::new());
        // SAFETY: no socket is lent (`socket: None`).
        let side = unsafe { LazyPoolSide::new(&ctx, None, &ticket) }.unwrap();
        assert!(side.get().is_none(), "nothing before it is asked for");
        let first: *const PoolSide = side.get_or_make(&ctx, None).unwrap();
        let again: *const PoolSide = side.get_or_make(&ctx, None).unwrap();
        assert_eq!(first, again, "made once, then the same one");

        // A call on the pool when the connection ends: its late answer is
        // dropped, not kept for a socket that is gone.
        let answers = side.get().unwrap().lane.answers.clone();
        let reply_to = ReplyTo {
            id: 1,
            serializer: SerializerKind::MsgPack as u8,
            answer_in: rpc_core::Compression::None,
        };
        let slot = answers.reserve(reply_to, None);
        drop(side);
        slot.answer(Ok(RpcResponse::new(Bytes::from_static(b"late"))));
        let (mut out, mut held) = (BytesMut::new(), Vec::new());
        assert!(
            !answers.take(&mut out, &mut held, usize::MAX),
            "closed when the side dropped: the late answer is dropped"
        );
        assert_eq!(answers.in_flight(), 0, "the call is counted done");

        let (ctx, ticket) = server(Dispatch::Direct, Router::new());
        // SAFETY: as above.
        let side = unsafe { LazyPoolSide::new(&ctx, None, &ticket) };
        assert!(side.is_none(), "direct dispatch has no pool side");
    }
}
