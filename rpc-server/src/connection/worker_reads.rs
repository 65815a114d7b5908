//! [`WorkerReads`]: the connection's side of a read lent to a worker
//! (`reply::pool_reads`) — how a request that a worker read becomes a pooled
//! call, how the connection task learns of it, and when it lends for a
//! pipelining caller's runs ([`RunLoans`]).
//!
//! A worker-read request goes the way of one the task read: [`admit`]
//! routes it and opens it (or gives the error its caller gets), a
//! [`PoolJob`] runs it, its [`AnswerSlot`]
//! answers it. What the task would have done itself is recorded for it:
//! the call goes into [`WorkerReads::started`], which the task moves into
//! its live-call table (deadlines, `Cancel` frames) as soon as it takes its
//! read side back — before it reads anything after it — and the admission
//! table marks the connection busy.
//!
//! While the read side is lent the task sleeps, so a deadline of a call a
//! worker started is watched from the task's next turn: the task takes its
//! read side back at least every [`LENT_READ_TICK`], so a call that runs
//! longer (a handler that blocks, or awaits) is in the table by then, and a
//! `Cancel` or a second call behind it is read within that tick.
//!
//! A worker does not know of a graceful stop or an eviction that the task
//! has not seen yet: a request it reads in that moment runs and is answered,
//! as one the task read just before it looked would be (the task takes its
//! read side back on its next turn, which the stop wakes it for).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rpc_codec::Frame;
use rpc_core::{CancelSignal, RpcError};

use super::admit::{admit, Admitted};
use super::live::{Live, LiveCalls};
use crate::admission::QuietMarker;
use crate::ctx::ServerCtx;
use crate::dispatch::{PoolJob, Reply};
use crate::reply::{AnswerSlot, PoolAnswers, ReplyTo, TakeRequest};

/// How long the connection task lets its read side stay lent before it
/// takes it back for a turn (see the module docs).
pub(super) const LENT_READ_TICK: Duration = Duration::from_millis(1);

/// When the task lends its read side for a pipelining caller's run of
/// requests: a loan whose worker found nothing to read (the pool had other
/// work by then, or the caller paused) cost two `setsockopt`s and a
/// wake-up of the task for nothing, so after one the task skips the next
/// chances, twice as many after each further miss (up to
/// [`RunLoans::MAX_SKIP`]), and tries at once again after a loan that read.
/// Among many busy connections (10:100) the pool is rarely this
/// connection's alone and the loans mostly miss; a lone pipelining caller's
/// (1:100) mostly read.
#[derive(Default)]
pub(super) struct RunLoans {
    misses: u32,
    skip: u32,
    /// The workers' bytes read, and the connection's loans, when the task
    /// chose to lend.
    lent_at: Option<(u64, u64)>,
}

impl RunLoans {
    /// Chances skipped at most after misses.
    const MAX_SKIP: u32 = 1024;

    /// Whether to take this chance to lend (counts it as taken or skipped).
    pub(super) fn may_lend(&mut self) -> bool {
        match self.skip {
            0 => true,
            _ => {
                self.skip -= 1;
                false
            }
        }
    }

    /// The task chose to lend for a run, the workers having read
    /// `worker_bytes` and `loans` loans having been made
    /// (`PoolAnswers::read_loans`).
    pub(super) fn lent(&mut self, worker_bytes: u64, loans: u64) {
        self.lent_at = Some((worker_bytes, loans));
    }

    /// The read side is back, the workers having read `worker_bytes`, with
    /// `loans` made: a loan that read nothing is a miss; a wait that made
    /// none (news came first) is not.
    pub(super) fn back(&mut self, worker_bytes: u64, loans: u64) {
        let Some((bytes_at, loans_at)) = self.lent_at.take() else {
            return;
        };
        if loans == loans_at {
            return;
        }
        if worker_bytes == bytes_at {
            self.misses = self.misses.saturating_add(1);
            self.skip = (1u32 << self.misses.min(10)).min(Self::MAX_SKIP);
        } else {
            self.misses = 0;
        }
    }
}

/// A call a worker started, for the connection task's live-call table. Its
/// method by name, routed again by the task: the route's `Arc` is shared by
/// every call of the method, on every thread.
pub(super) struct Started {
    cancel: CancelSignal,
    service: &'static str,
    method: &'static str,
    reply_to: ReplyTo,
    deadline: Option<(Instant, Duration)>,
}

/// How requests a worker read become calls of this connection.
pub(super) struct WorkerReads {
    ctx: Arc<ServerCtx>,
    peer: Option<SocketAddr>,
    quiet: QuietMarker,
    /// Calls workers started since the task last looked.
    started: Arc<Mutex<Vec<Started>>>,
}

impl WorkerReads {
    /// The taker for a connection from `peer`, and the list of the calls it
    /// starts, which the task drains with [`drain_started`].
    pub(super) fn new(
        ctx: Arc<ServerCtx>,
        peer: Option<SocketAddr>,
        quiet: QuietMarker,
    ) -> (Self, Arc<Mutex<Vec<Started>>>) {
        let started = Arc::new(Mutex::new(Vec::new()));
        let reads = WorkerReads {
            ctx,
            peer,
            quiet,
            started: started.clone(),
        };
        (reads, started)
    }
}

/// Moves the calls workers started into the task's table (their routes
/// borrowed from the router, as the task's own calls are).
pub(super) fn drain_started<'a>(
    ctx: &'a ServerCtx,
    started: &Mutex<Vec<Started>>,
    live: &mut LiveCalls<'a>,
) {
    let mut started = started.lock();
    // Most have ended already (answered in rhythm): only the rest can still
    // end early.
    for call in started.drain(..).filter(|call| call.cancel.is_running()) {
        // Routed a moment ago by the same router: found again.
        if let Ok(route) = ctx.router.route_ref(call.service, call.method) {
            live.insert(Live {
                cancel: call.cancel,
                route,
                reply_to: call.reply_to,
                deadline: call.deadline,
            });
        }
    }
}

impl TakeRequest for WorkerReads {
    fn take(
        &self,
        frames: &mut Vec<Frame>,
        received: Instant,
        answers: &Arc<PoolAnswers>,
    ) -> Box<dyn FnOnce() + Send> {
        let ctx = &self.ctx;
        ctx.stats.requests.add(frames.len() as u64);
        let mut starts = Starts {
            jobs: Vec::with_capacity(frames.len()),
            refused: Vec::new(),
        };
        let mut started = self.started.lock();
        // Calls of earlier runs that ended are dropped here, on a worker:
        // their cancel signals go back to this thread's spares, for the
        // calls below (the task, which would drop them otherwise, makes
        // few), and the list stays as short as the calls still running.
        started.retain(|call| call.cancel.is_running());
        for frame in frames.drain(..) {
            match admit(ctx, frame, received, self.peer, None) {
                Ok(Admitted {
                    route,
                    reply_to,
                    req,
                    deadline,
                }) => {
                    started.push(Started {
                        cancel: req.cx.cancellation().clone(),
                        service: route.service,
                        method: route.method,
                        reply_to,
                        deadline,
                    });
                    self.quiet.call_started();
                    starts.jobs.push(PoolJob {
                        ctx: ctx.clone(),
                        route: route.clone(),
                        req,
                        received,
                        reply: Reply::Frame(answers.reserve(reply_to, None)),
                    });
                }
                Err((reply_to, e)) => {
                    ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
                    starts.refused.push((answers.reserve(reply_to, None), e));
                }
            }
        }
        drop(started);
        let answers = answers.clone();
        let ctx = ctx.clone();
        Box::new(move || start_all(&ctx, &answers, starts))
    }
}

/// Starts what a worker read: the refusals answered, the calls handed to
/// the pool as one run when there are several (`dispatch::run`), one by one
/// otherwise — and one by one too when the pool refuses the run, so each
/// call is refused or accepted as it would be alone.
fn start_all(ctx: &ServerCtx, answers: &Arc<PoolAnswers>, starts: Starts) {
    let Starts { mut jobs, refused } = starts;
    for (slot, e) in refused {
        slot.answer(Err(e));
    }
    let Some(pool) = ctx.dispatcher.pool() else {
        // Only pool dispatch lends; a call is answered even so.
        for job in jobs {
            if let Some(if_refused) = IfRefused::of(&job) {
                if_refused.answer(answers, RpcError::ShuttingDown);
            }
            drop(job);
        }
        return;
    };
    if jobs.len() >= 2 {
        match crate::dispatch::run::submit(pool, jobs) {
            Ok(()) => return,
            Err(back) => jobs = back,
        }
    }
    for job in jobs {
        let if_refused = IfRefused::of(&job);
        if let Err(rejected) = job.submit(pool, ctx, true) {
            let Some(if_refused) = if_refused else {
                // Not a connection's call: none is made here.
                debug_assert!(false, "a worker read a call with no connection to answer");
                continue;
            };
            let error = match ctx.router.route_ref(if_refused.service, if_refused.method) {
                Ok(route) => rejected.error(route),
                // Routed a moment ago by the same router.
                Err(e) => e,
            };
            if_refused.answer(answers, error);
        }
    }
}

/// What a worker read, started once the answers' lock is let go. The calls
/// go to the pool as they are, moved once into the run's queue (a job is
/// hundreds of bytes: every move of it a `memcpy`); what answers one if the
/// pool refuses it is read off the job only when it goes alone (a run the
/// pool refuses comes back whole).
struct Starts {
    /// The calls to submit to the pool (the worker that read them is awake
    /// and takes them, or their run, unless every other thread is busy:
    /// then the run gets a thread of its own, as any submit would).
    jobs: Vec<PoolJob>,
    /// The requests that do not run: each one's error is its answer.
    refused: Vec<(AnswerSlot, RpcError)>,
}

/// What answers a call the pool refuses: its end, where its answer goes and
/// its method by name.
struct IfRefused {
    end: CancelSignal,
    reply_to: ReplyTo,
    service: &'static str,
    method: &'static str,
}

impl IfRefused {
    /// Read off `job` before it is submitted (a refused job is dropped);
    /// `None` for a job answered otherwise than into a connection.
    fn of(job: &PoolJob) -> Option<Self> {
        Some(IfRefused {
            end: job.req.cx.cancellation().clone(),
            reply_to: job.reply.reply_to()?,
            service: job.route.service,
            method: job.route.method,
        })
    }

    /// Answers the refused call with `error`, once — its end is claimed
    /// first, so the task's live-call table, which has it, does not answer
    /// its deadline as well (its slot went with the job).
    fn answer(self, answers: &Arc<PoolAnswers>, error: RpcError) {
        if self.end.finish() {
            answers.reserve(self.reply_to, None).answer(Err(error));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use bytes::{Bytes, BytesMut};
    use rpc_codec::{read_header, Frame, OutFrame};
    use rpc_core::modes::Dispatch;
    use rpc_core::SerializerKind;

    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::{RunLoans, TakeRequest, WorkerReads};
    use crate::admission::QuietMarker;
    use crate::reply::PoolAnswers;
    use crate::router::Router;
    use crate::test_support::{one_thread_pool, server, EmptyAnswers};

    /// A request for `S.m` with id `id`, as a worker reads it.
    fn request(id: u64) -> Frame {
        let mut out = BytesMut::new();
        OutFrame::request(id, SerializerKind::MsgPack as u8, "S", "m", Bytes::new())
            .encode(&mut out, 1 << 20)
            .unwrap();
        let header = read_header(&out).unwrap().unwrap();
        Frame::from_bytes(header, out.freeze()).unwrap()
    }

    #[test]
    fn a_worker_s_take_drops_the_records_of_ended_calls_and_keeps_the_running() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _runtime = rt.enter();
        let mut router = Router::new();
        router.add(Arc::new(EmptyAnswers("S", &["m"])));
        let (ctx, ticket) = server(Dispatch::Pool, router);
        let (reads, started) = WorkerReads::new(ctx, None, ticket.activity().quiet_marker());
        let answers = Arc::new(PoolAnswers::new(1 << 20));
        let ids = || -> Vec<u64> { started.lock().iter().map(|c| c.reply_to.id).collect() };

        let mut frames = vec![request(1), request(2), request(3)];
        // Not started: the calls stay running (their jobs dropped unrun).
        drop(reads.take(&mut frames, Instant::now(), &answers));
        assert_eq!(ids(), [1, 2, 3], "each call recorded for the task");
        // Call 1 is answered, call 3 given up (its deadline, say).
        assert!(started.lock()[0].cancel.finish());
        assert!(started.lock()[2].cancel.give_up());

        let mut frames = vec![request(4)];
        drop(reads.take(&mut frames, Instant::now(), &answers));
        assert_eq!(
            ids(),
            [2, 4],
            "the next run's take leaves only the calls still running"
        );
    }

    /// A request a worker read, which the pool then refuses (full), is
    /// answered `ServerBusy` — the job dropped unrun must not take the
    /// call's end with it — and its record is over, so the task's table
    /// answers nothing more for it.
    #[test]
    fn a_call_a_worker_read_that_the_pool_refuses_is_answered_busy() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _runtime = rt.enter();
        let mut router = Router::new();
        router.add(Arc::new(EmptyAnswers("S", &["m"])));
        let ctx = one_thread_pool(router);
        let pool = ctx.dispatcher.pool().unwrap().clone();
        // Full: its one thread held, one call queued behind it.
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        pool.execute(move || {
            started_tx.send(()).ok();
            let _ = gate.recv_timeout(Duration::from_secs(10));
        })
        .unwrap();
        started_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        pool.execute(|| {}).unwrap();

        let (reads, started) = WorkerReads::new(ctx.clone(), None, QuietMarker::detached());
        let answers = Arc::new(PoolAnswers::new(1 << 20));
        let mut frames = vec![request(7)];
        reads.take(&mut frames, Instant::now(), &answers)();
        assert_eq!(ctx.stats.busy_rejections.load(Ordering::Relaxed), 1);
        let (mut out, mut held) = (BytesMut::new(), Vec::new());
        assert!(answers.take(&mut out, &mut held, 1 << 16), "an answer");
        let header = read_header(&out).unwrap().unwrap();
        assert_eq!(header.request_id, 7);
        assert_ne!(header.status, 0, "an error answer");
        assert_eq!(answers.in_flight(), 0);
        assert!(
            !started.lock()[0].cancel.is_running(),
            "its record is over: no deadline answers it again"
        );
        drop(open);
    }

    #[test]
    fn loans_that_read_nothing_back_off_and_one_that_reads_resets() {
        let mut loans = RunLoans::default();
        assert!(loans.may_lend(), "tries at first");
        loans.lent(0, 0);
        loans.back(0, 1);
        // One miss: the next 2 chances are skipped.
        assert!(!loans.may_lend());
        assert!(!loans.may_lend());
        assert!(loans.may_lend());
        loans.lent(0, 1);
        loans.back(0, 2);
        // Two misses: 4 skipped.
        assert_eq!((0..4).filter(|_| loans.may_lend()).count(), 0);
        assert!(loans.may_lend());
        // A loan that read resets the count.
        loans.lent(0, 2);
        loans.back(100, 3);
        assert!(loans.may_lend());
        // A wait that made no loan is no miss.
        loans.lent(100, 3);
        loans.back(100, 3);
        assert!(loans.may_lend());
        // Many misses skip at most `MAX_SKIP` chances.
        for n in 0..40 {
            loans.lent(100, n);
            loans.back(100, n + 1);
        }
        let skipped = (0..=RunLoans::MAX_SKIP)
            .take_while(|_| !loans.may_lend())
            .count();
        assert_eq!(skipped as u32, RunLoans::MAX_SKIP);
        // A read side back that was not lent for a run changes nothing.
        loans.back(7, 99);
        assert!(loans.may_lend());
    }
}
