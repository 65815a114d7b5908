//! [`LiveCalls`]: the calls of one connection that can still end early — by
//! their deadline or by the client's `Cancel` frame — and the one timer that
//! watches all their deadlines.
//!
//! # Invariants
//!
//! - A call ends once: its [`CancelSignal`] is claimed either by its answer
//!   (`finish`, on the connection task or a worker thread) or by this table
//!   (`cancel`, at the deadline or a `Cancel` frame), and only the winner
//!   acts — answers, or discards. So nothing here has to be told that a call
//!   ended: an entry whose signal is no longer running is stale, skipped
//!   when it comes up and dropped when the table is pruned.
//! - The table holds at most about twice the connection's calls in flight:
//!   once it has doubled since the last prune, stale entries go.
//! - No deadline is missed: [`next_deadline`](LiveCalls::next_deadline) is
//!   the earliest of every entry's, the fresh ones' included, and
//!   [`expire`](LiveCalls::expire) settles the fresh entries before it
//!   looks.
//!
//! # Why shaped so
//!
//! A `tokio::time::timeout` around every call would put each one in the
//! runtime's timer wheel and take it out again — for a timer that almost
//! never fires. Deadlines go into a min-heap instead, and the connection
//! task sleeps (one `Sleep`, re-armed only when the earliest deadline moves
//! earlier or has fired) until the first of them. There is no map by
//! request id, and the rare `Cancel` frame finds its call by a scan. Calls
//! that finish in their first poll on the connection task (most direct
//! calls) never enter the table at all.
//!
//! A call with a deadline goes first into a plain list of *fresh* entries
//! (a push, and one comparison for the earliest of their deadlines), not
//! into the heap: every pooled call with a deadline comes here, and almost
//! all of them are answered long before it, most before the table is next
//! pruned. The prune, or any firing of the connection's one timer
//! (`expire`), settles the fresh entries: the ended ones are dropped and
//! only the calls still running go into the heap, so a pooled call pays a
//! push, not a sift (BENCHMARKS.md, "Live calls settled lazily").

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use rpc_core::CancelSignal;

use crate::reply::ReplyTo;
use crate::router::RouteEntry;

/// One call that can still end early.
pub(crate) struct Live<'a> {
    /// The call's end, shared with its context.
    pub cancel: CancelSignal,
    pub route: &'a RouteEntry,
    /// Whom a deadline's answer goes to.
    pub reply_to: ReplyTo,
    /// When the caller stops waiting, and what it allowed (for the error).
    pub deadline: Option<(Instant, Duration)>,
}

/// A call with a deadline, ordered earliest first in the heap.
struct Due<'a>(Instant, Live<'a>);

impl PartialEq for Due<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Due<'_> {}

impl PartialOrd for Due<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due<'_> {
    /// Reversed: `BinaryHeap` is a max-heap, the earliest deadline goes on top.
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.cmp(&self.0)
    }
}

/// The smallest table size at which stale entries are looked for.
const PRUNE_FLOOR: usize = 64;

/// The live calls of one connection.
pub(crate) struct LiveCalls<'a> {
    /// Calls with a deadline, settled (see the module docs).
    due: BinaryHeap<Due<'a>>,
    /// Calls with a deadline added since the table was last settled, in
    /// the order they came.
    fresh: Vec<Due<'a>>,
    /// The earliest deadline in `fresh`; `None` exactly when `fresh` is
    /// empty.
    fresh_first: Option<Instant>,
    /// Calls without a deadline (a peer that sends none): only a `Cancel`
    /// frame ends them early.
    open: Vec<Live<'a>>,
    /// Entries at which the next prune happens.
    prune_at: usize,
}

impl Default for LiveCalls<'_> {
    fn default() -> Self {
        LiveCalls {
            due: BinaryHeap::new(),
            fresh: Vec::new(),
            fresh_first: None,
            open: Vec::new(),
            prune_at: PRUNE_FLOOR,
        }
    }
}

impl<'a> LiveCalls<'a> {
    /// Adds a call that may end early.
    pub fn insert(&mut self, live: Live<'a>) {
        match live.deadline {
            Some((at, _)) => {
                if self.fresh_first.is_none_or(|first| at < first) {
                    self.fresh_first = Some(at);
                }
                self.fresh.push(Due(at, live));
            }
            None => self.open.push(live),
        }
        if self.len() >= self.prune_at {
            self.prune();
        }
    }

    /// The earliest deadline that may still be live.
    pub fn next_deadline(&self) -> Option<Instant> {
        let settled = self.due.peek().map(|Due(at, _)| *at);
        match (settled, self.fresh_first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Cancels, at its caller's word, the running call with request id
    /// `id`, and returns it; `None` when no such call runs (it ended, or
    /// never was).
    pub fn cancel(&mut self, id: u64) -> Option<&Live<'a>> {
        let found = self.running(id)?;
        found.cancel.give_up().then_some(found)
    }

    /// Claims, to answer it now, the running call with request id `id`
    /// (ends it as answered, so nothing here answers it again), and returns
    /// it; `None` when no such call runs (its caller cancelled it, or it
    /// never was).
    pub fn claim(&mut self, id: u64) -> Option<&Live<'a>> {
        let found = self.running(id)?;
        found.cancel.finish().then_some(found)
    }

    /// The running call with request id `id`, by a scan (see the module
    /// docs), newest entries first: a call that just came in is the usual
    /// one asked for (one the worker pool refused).
    fn running(&self, id: u64) -> Option<&Live<'a>> {
        self.fresh
            .iter()
            .rev()
            .map(|Due(_, l)| l)
            .chain(self.open.iter().rev())
            .chain(self.due.iter().rev().map(|Due(_, l)| l))
            .find(|l| l.reply_to.id == id && l.cancel.is_running())
    }

    /// Takes out the calls whose deadline is at or before `now` and cancels
    /// them; those it cancelled (not answered in the meantime) go to
    /// `expired`, for the caller to answer `DeadlineExceeded`.
    pub fn expire(&mut self, now: Instant, expired: &mut Vec<Live<'a>>) {
        self.settle();
        while self.due.peek().is_some_and(|Due(at, _)| *at <= now) {
            if let Some(Due(_, live)) = self.due.pop() {
                if live.cancel.give_up() {
                    expired.push(live);
                }
            }
        }
    }

    /// Cancels every call still running (the connection is closing) and
    /// forgets them all.
    pub fn cancel_all(&mut self) {
        self.fresh_first = None;
        for Due(_, live) in self.due.drain().chain(self.fresh.drain(..)) {
            live.cancel.give_up();
        }
        for live in self.open.drain(..) {
            live.cancel.give_up();
        }
    }

    /// Forgets the calls that have ended and gives back the table's memory
    /// (an idle connection's tidy).
    pub fn release(&mut self) {
        self.prune();
        if self.due.is_empty() {
            self.due = BinaryHeap::new();
        }
        self.fresh = Vec::new();
        if self.open.is_empty() {
            self.open = Vec::new();
        }
    }

    /// Drops the entries of calls that have ended; the next prune comes
    /// when the table has doubled again.
    fn prune(&mut self) {
        self.due.retain(|Due(_, l)| l.cancel.is_running());
        self.settle();
        self.open.retain(|l| l.cancel.is_running());
        self.prune_at = PRUNE_FLOOR.max(2 * self.len());
    }

    /// Moves the fresh entries of calls still running into the heap and
    /// drops the rest.
    fn settle(&mut self) {
        self.fresh_first = None;
        let running = self
            .fresh
            .drain(..)
            .filter(|Due(_, l)| l.cancel.is_running());
        self.due.extend(running);
    }

    /// Entries in the table, stale ones included.
    fn len(&self) -> usize {
        self.due.len() + self.fresh.len() + self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method_metrics::MethodMetrics;
    use bytes::Bytes;
    use rpc_core::{Context, HandlerFuture, ServiceHandler};
    use std::sync::Arc;

    struct Nothing;

    impl ServiceHandler for Nothing {
        fn service_name(&self) -> &'static str {
            "S"
        }
        fn method_names(&self) -> &'static [&'static str] {
            &["m"]
        }
        fn call(&self, _: usize, _: Context, _: Bytes) -> HandlerFuture<'_> {
            unreachable!("not called")
        }
    }

    fn route() -> RouteEntry {
        RouteEntry {
            handler: Arc::new(Nothing),
            service: "S",
            method: "m",
            index: 0,
            kind: rpc_core::MethodKind::Unary,
            metrics: MethodMetrics::default(),
        }
    }

    fn live(route: &RouteEntry, id: u64, at: Option<Instant>) -> Live<'_> {
        Live {
            cancel: CancelSignal::new(),
            route,
            reply_to: ReplyTo {
                id,
                serializer: 1,
                answer_in: rpc_core::Compression::None,
            },
            deadline: at.map(|at| (at, Duration::from_millis(10))),
        }
    }

    #[test]
    fn expired_calls_come_out_cancelled_and_answered_ones_do_not() {
        let route = route();
        let mut table = LiveCalls::default();
        let now = Instant::now();
        let soon = now + Duration::from_millis(5);
        let late = now + Duration::from_secs(5);
        let answered = live(&route, 2, Some(soon));
        let answered_signal = answered.cancel.clone();
        table.insert(live(&route, 1, Some(soon)));
        table.insert(answered);
        table.insert(live(&route, 3, Some(late)));
        table.insert(live(&route, 4, None));
        // Call 2 was answered just before its deadline came up.
        assert!(answered_signal.finish());
        let mut expired = Vec::new();
        table.expire(soon, &mut expired);
        assert_eq!(
            expired.iter().map(|l| l.reply_to.id).collect::<Vec<_>>(),
            [1]
        );
        assert!(expired[0].cancel.is_cancelled());
        assert!(
            !answered_signal.is_cancelled(),
            "an answered call is left alone"
        );
        assert_eq!(table.next_deadline(), Some(late));

        // A cancel finds a running call once, with a deadline or without.
        assert_eq!(table.cancel(4).map(|l| l.reply_to.id), Some(4));
        assert!(table.cancel(4).is_none(), "it is no longer running");
        assert!(table.cancel(99).is_none());
        let three = table.cancel(3).map(|l| l.cancel.clone()).unwrap();
        assert!(three.is_cancelled());
        table.cancel_all();
        assert_eq!(table.len(), 0);
        assert_eq!(table.next_deadline(), None);
    }

    #[test]
    fn a_claimed_call_is_answered_by_its_claimer_and_never_expires() {
        let route = route();
        let mut table = LiveCalls::default();
        let now = Instant::now();
        let (due, open, cancelled) = (
            live(&route, 1, Some(now)),
            live(&route, 2, None),
            live(&route, 3, Some(now)),
        );
        let signals = [due.cancel.clone(), open.cancel.clone()];
        table.insert(due);
        table.insert(open);
        table.insert(cancelled);
        assert!(table.cancel(3).is_some(), "its caller cancels call 3");

        assert!(table.claim(1).is_some(), "a running call with a deadline");
        assert_eq!(
            table.claim(2).map(|l| l.reply_to.id),
            Some(2),
            "one without"
        );
        assert!(table.claim(3).is_none(), "a cancelled call is not claimed");
        assert!(table.claim(1).is_none(), "nor one claimed already");
        assert!(table.claim(9).is_none(), "nor one that never was");
        assert!(signals.iter().all(|s| !s.is_running() && !s.give_up()));
        let mut expired = Vec::new();
        table.expire(now + Duration::from_secs(1), &mut expired);
        assert!(expired.is_empty(), "claimed calls are answered once");
    }

    #[test]
    fn ended_calls_are_pruned_as_the_table_grows() {
        let route = route();
        let mut table = LiveCalls::default();
        let at = Instant::now() + Duration::from_secs(60);
        let mut running = Vec::new();
        for id in 0..1000 {
            let call = live(&route, id, Some(at));
            if id % 100 == 0 {
                running.push(call.cancel.clone());
            } else {
                call.cancel.finish();
            }
            table.insert(call);
        }
        assert!(table.len() <= 2 * PRUNE_FLOOR, "{} entries", table.len());
        assert!(running.iter().all(|s| s.is_running()), "running calls stay");
        let mut expired = Vec::new();
        table.expire(at, &mut expired);
        assert_eq!(expired.len(), running.len());
    }

    #[test]
    fn a_fresh_call_s_deadline_is_watched_before_it_is_settled() {
        let route = route();
        let mut table = LiveCalls::default();
        let now = Instant::now();
        let late = now + Duration::from_secs(60);
        let soon = now + Duration::from_millis(5);
        // Settled into the heap by a prune: the call still runs.
        table.insert(live(&route, 1, Some(late)));
        table.prune();
        assert_eq!((table.due.len(), table.fresh.len()), (1, 0));
        assert_eq!(table.next_deadline(), Some(late));
        // A fresh call with an earlier deadline, and one answered at once.
        table.insert(live(&route, 2, Some(soon)));
        let answered = live(&route, 3, Some(now));
        answered.cancel.finish();
        table.insert(answered);
        assert_eq!(
            table.next_deadline(),
            Some(now),
            "the earliest fresh deadline, answered or not"
        );
        assert_eq!(table.cancel(2).map(|l| l.reply_to.id), Some(2));
        // Call 2 was cancelled by its caller, call 3 answered: the deadline
        // timer finds nothing to answer, and settles both away.
        let mut expired = Vec::new();
        table.expire(soon, &mut expired);
        assert!(expired.is_empty());
        assert_eq!(table.fresh.len(), 0);
        assert_eq!(table.next_deadline(), Some(late));
        // A running fresh call expires once its deadline has passed.
        table.insert(live(&route, 4, Some(soon)));
        table.expire(soon, &mut expired);
        assert_eq!(
            expired.iter().map(|l| l.reply_to.id).collect::<Vec<_>>(),
            [4]
        );
        assert_eq!(table.len(), 1, "only call 1 is left");
    }

    #[test]
    fn release_forgets_ended_calls_and_keeps_running_ones() {
        let route = route();
        let mut table = LiveCalls::default();
        let at = Instant::now() + Duration::from_secs(60);
        let running = live(&route, 1, Some(at));
        let keep = running.cancel.clone();
        table.insert(running);
        for id in 2..10 {
            let call = live(&route, id, if id % 2 == 0 { Some(at) } else { None });
            call.cancel.finish();
            table.insert(call);
        }
        table.release();
        assert_eq!(table.len(), 1, "only the running call stays");
        assert!(
            table.open.capacity() == 0,
            "the empty list's memory is given back"
        );
        keep.finish();
        table.release();
        assert_eq!(table.len(), 0);
        assert_eq!(table.due.capacity(), 0);
        assert_eq!(table.fresh.capacity(), 0);
    }
}
