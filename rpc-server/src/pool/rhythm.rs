//! [`Rhythm`]: when a worker waits for its next task awake instead of
//! parking — the pattern of a lone caller.
//!
//! A caller that sends one call at a time (1:1) gives the pool no batch to
//! share a wake-up with: each call would find the worker parked, and pay a
//! futex wake-up and a context switch onto another core. So a worker that
//! has seen that pattern waits for the next call awake instead ([`IDLE_SPIN`],
//! through `TaskQueue::spin`), giving the core away at every turn
//! ([`yield_while`]), and a worker that has not parks as before.
//! The decision is per worker; the pool's `submitted` count says whether a
//! task was lone, and `rhythm` tells connections that a worker keeps a lone
//! caller's rhythm (only then do they lend it their read side).
//!
//! A worker that a connection lent its read side after a run of its calls
//! (a pipelining caller's, see `reply::pool_reads`) waits awake the same
//! way, without the streak: the connection lent only because its caller's
//! next run is on its way.
//!
//! While it waits it looks at the read side a connection lent it
//! ([`IdlePoll`](super::IdlePoll), from `seat::poll_soon` or
//! `TaskQueue::lend_spinner`), and then it keeps its core instead of
//! yielding: the request comes from the remote caller, not from a thread
//! woken onto this core, and a yield there handed the core to whatever else
//! was runnable for a scheduler slice (BENCHMARKS, "A worker reads a lone
//! caller's next request").

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

use super::shared::Shared;
use super::Taken;

/// What a worker knows of a lone caller's rhythm: lone tasks in a row, each
/// followed by the next within [`IDLE_SPIN`] — the pattern for which waiting
/// awake pays.
#[derive(Default)]
pub(super) struct Rhythm {
    streak: u32,
}

impl Rhythm {
    /// The next task, once the queue is empty after `run` tasks: waited for
    /// awake when the pattern is a lone caller's, parked (up to `timeout`)
    /// otherwise.
    pub(super) fn wait(
        &mut self,
        shared: &Shared,
        run: usize,
        timeout: Option<Duration>,
    ) -> Option<Taken> {
        // What a task asked this worker to look at while it waits awake
        // (a connection's read side, see `seat::IdlePoll`).
        let idle_poll = next_poll();
        // A lone caller's pattern: one task, and nothing else on the whole
        // pool. Its next call comes a round trip from now. So is a run of
        // one connection's calls after which it lent this worker its read
        // side: its caller's next requests are on their way.
        let lone = (run == 1 || idle_poll.is_some()) && shared.submitted.load(SeqCst) == 0;
        if !lone {
            self.set_streak(shared, 0);
            if let Some(p) = idle_poll {
                p.release();
            }
            return shared.queue.poll(timeout);
        }
        let since = Instant::now();
        // (Under loom always: a model must not depend on the clock.)
        let spun = if cfg!(brisk_loom) || self.streak >= LONE_STREAK || idle_poll.is_some() {
            // Looking at the lent source at every turn until it finds work
            // (then it ended its loan itself) or the wait ends (then it goes
            // back).
            let mut idle_poll = idle_poll;
            let mut looking = idle_poll.is_some();
            let spun = shared.queue.spin(IDLE_SPIN, &mut || {
                if !looking {
                    // A source asked for since: a claim made by an answer
                    // this worker gave from its spin (a request it read and
                    // refused at once), or a read side lent to it while it
                    // spins (a connection whose call it answered before the
                    // connection waited).
                    idle_poll = next_poll().or_else(|| shared.queue.take_lent());
                    looking = idle_poll.is_some();
                }
                if let (true, Some(p)) = (looking, &idle_poll) {
                    // Work it submitted ends the spin (the queue is not
                    // empty); a source taken back leaves it waiting for
                    // the owner's next submit.
                    looking = p.clone().poll();
                    // Looking at a lent socket, the worker keeps its core:
                    // the request comes from the remote caller, not from a
                    // thread woken onto this core, and a yield — above all
                    // one between the request it just submitted and taking
                    // it — hands the core to whatever else is runnable for
                    // a scheduler slice (see BENCHMARKS).
                    return false;
                }
                true
            });
            if let (true, Some(p)) = (looking, idle_poll) {
                p.release();
            }
            spun
        } else {
            if let Some(p) = idle_poll {
                p.release();
            }
            None
        };
        let next = spun.or_else(|| shared.queue.poll(timeout));
        // Only a lone task's wait counts for the streak (a run's says
        // nothing of a lone caller's rhythm).
        if run == 1 {
            let streak = match since.elapsed() < IDLE_SPIN {
                true => self.streak.saturating_add(1),
                false => 0,
            };
            self.set_streak(shared, streak);
        }
        next
    }

    /// Records the streak, and in `shared.rhythm` whether a worker keeps a
    /// lone caller's rhythm (read by connections deciding whether to lend
    /// their read side: only a worker that waits awake looks at it, so a
    /// queue that does not spin never says so). One flag for the pool, set
    /// and cleared by whichever worker's streak crosses the mark: a hint,
    /// since a lone caller keeps one worker in rhythm at a time, and a loan
    /// made on a stale one only comes back to its connection (released).
    fn set_streak(&mut self, shared: &Shared, streak: u32) {
        let was = self.streak >= LONE_STREAK;
        self.streak = streak;
        let is = streak >= LONE_STREAK && shared.queue.spins();
        if was != is {
            shared.rhythm.store(is, Relaxed);
        }
    }
}

/// What the calling worker was asked to look at ([`super::seat::poll_soon`]);
/// nothing under loom, whose models keep seats out.
fn next_poll() -> Option<std::sync::Arc<dyn super::IdlePoll>> {
    #[cfg(not(brisk_loom))]
    return super::seat::take_poll();
    #[cfg(brisk_loom)]
    None
}

/// How long a worker whose one task was the pool's only work waits awake for
/// the next before it parks. A lone caller (1:1) sends its next call about a
/// round trip (30–60 µs on this machine) after its answer; a parked worker
/// costs that call a futex wake-up and a context switch (~10 µs), a spinning
/// one nothing. The spin is bounded, so an idle pool still parks soon after
/// its last call, and only one worker spins at a time; with more than one
/// call on the pool no worker spins (its tasks keep it awake anyway). The
/// connection task spins on the other side of the same hand-off for its
/// answer (`reply::pool_answers`).
///
/// A worker spins only after [`LONE_STREAK`] lone tasks in a row, each
/// followed by the next within this time: calls that come further apart (an
/// idle server, a slow caller) find it parked without costing a spin each,
/// and so does the odd moment a busy pool runs dry (at 10:100, spinning
/// then took ~3 % of the server's CPU).
const IDLE_SPIN: Duration = Duration::from_micros(100);

/// Lone tasks in a row, each followed by the next within [`IDLE_SPIN`],
/// before a worker spins for the next (see there).
pub(super) const LONE_STREAK: u32 = 4;

/// Waits awake on this thread while `busy` holds, for at most `limit`: the
/// wait of a side that expects its partner within microseconds, where parking
/// would cost a futex wake-up and a context switch.
///
/// Each turn gives the core away (`sched_yield`) rather than spinning on it:
/// the partner is often a thread that was just woken onto this very core (on
/// two cores, with the caller busy on the other), and a pure spin keeps it
/// off until the scheduler preempts the spinner, which cost a pooled lone
/// call 25–30 µs of its round trip; a yield lets it run at once and costs
/// this thread well under a microsecond when nothing else wants the core.
#[cfg_attr(brisk_loom, allow(dead_code))] // under loom, waiters call loom's yield instead
pub(crate) fn yield_while(limit: Duration, mut busy: impl FnMut() -> bool) {
    let start = Instant::now();
    while busy() && start.elapsed() < limit {
        std::thread::yield_now();
    }
}
