//! [`LiveCalls`]: the calls of one connection that can still end early — by
//! the client's `Cancel` frame or by their deadline — and the one timer that
//! watches all their deadlines.
//!
//! # Invariants
//!
//! - Whoever takes a call out of the table answers it (or, for a cancel,
//!   decides that nobody is answered): the connection on a deadline, the
//!   finished call otherwise. So a call is answered exactly once even when
//!   its handler finishes in the same turn its deadline passes.
//! - A call leaves the table when it ends, however it ends; at most
//!   `max_in_flight_per_connection` calls are in it.
//!
//! # Why one timer
//!
//! A `tokio::time::timeout` around every call would put each one in the
//! runtime's timer wheel and take it out again — for a timer that almost
//! never fires. Deadlines go into a min-heap instead, and the connection
//! task sleeps (one `Sleep`, re-armed only when the earliest deadline moves
//! earlier or has fired) until the first of them. Calls that end are not
//! looked for in the heap: their entries are skipped when they come up, and
//! the heap is rebuilt from the live calls when stale entries outnumber them.
//! Calls that finish in the first poll on the connection task (most direct
//! calls) never enter the table at all.

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use rpc_core::CancelSignal;

use crate::reply::ReplyTo;
use crate::router::RouteEntry;

/// One call that can still end early.
pub(crate) struct Live<'a> {
    /// The call's context's cancellation.
    pub cancel: CancelSignal,
    pub route: &'a RouteEntry,
    /// Whom a deadline's answer goes to.
    pub reply_to: ReplyTo,
    /// When the caller stops waiting, and what it allowed (for the error).
    pub deadline: Option<(Instant, Duration)>,
    /// On the worker pool (its answer comes through `PoolAnswers`), or
    /// polled by the connection task.
    pub pooled: bool,
}

/// Request ids are chosen by the client: a multiplicative hash is enough,
/// since the table never holds more than the connection's in-flight bound.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The live calls of one connection.
#[derive(Default)]
pub(crate) struct LiveCalls<'a> {
    calls: HashMap<u64, Live<'a>, BuildHasherDefault<IdHasher>>,
    deadlines: BinaryHeap<Reverse<(Instant, u64)>>,
}

impl<'a> LiveCalls<'a> {
    /// Adds call `id`. A client that reuses the id of a call still live gets
    /// false: that second call cannot be cancelled or timed out here (its
    /// answers are the client's own confusion).
    pub fn insert(&mut self, id: u64, live: Live<'a>) -> bool {
        let deadline = live.deadline;
        match self.calls.entry(id) {
            Entry::Occupied(_) => return false,
            Entry::Vacant(slot) => {
                slot.insert(live);
            }
        }
        if let Some((at, _)) = deadline {
            self.deadlines.push(Reverse((at, id)));
        }
        if self.deadlines.len() > 2 * self.calls.len() + 64 {
            self.prune();
        }
        true
    }

    /// Takes call `id` out (it ended, or is being answered now).
    pub fn remove(&mut self, id: u64) -> Option<Live<'a>> {
        self.calls.remove(&id)
    }

    /// The earliest deadline that may still be live.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.peek().map(|Reverse((at, _))| *at)
    }

    /// Takes out, with their ids, the calls whose deadline is at or before
    /// `now`. Their contexts are left for the caller to cancel: a pooled
    /// call must be settled first, or its worker, woken by the cancellation,
    /// could answer before the deadline's answer.
    pub fn expire(&mut self, now: Instant, expired: &mut Vec<(u64, Live<'a>)>) {
        while let Some(&Reverse((at, id))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            let current = self
                .calls
                .get(&id)
                .is_some_and(|l| l.deadline.is_some_and(|(d, _)| d == at));
            if current {
                if let Some(live) = self.calls.remove(&id) {
                    expired.push((id, live));
                }
            }
        }
    }

    /// Cancels every live call (the connection is closing) and forgets them.
    pub fn cancel_all(&mut self) {
        for live in self.calls.values() {
            live.cancel.cancel();
        }
        self.calls.clear();
        self.deadlines.clear();
    }

    /// Calls in the table.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Drops the heap entries of calls that have ended.
    fn prune(&mut self) {
        let calls = &self.calls;
        self.deadlines.retain(|Reverse((at, id))| {
            calls
                .get(id)
                .is_some_and(|l| l.deadline.is_some_and(|(d, _)| d == *at))
        });
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
            metrics: MethodMetrics::default(),
        }
    }

    fn live(route: &RouteEntry, at: Option<Instant>) -> Live<'_> {
        Live {
            cancel: CancelSignal::new(),
            route,
            reply_to: ReplyTo {
                id: 0,
                serializer: 1,
            },
            deadline: at.map(|at| (at, Duration::from_millis(10))),
            pooled: false,
        }
    }

    #[test]
    fn expired_calls_come_out_cancelled_and_ended_ones_do_not() {
        let route = route();
        let mut table = LiveCalls::default();
        let now = Instant::now();
        let soon = now + Duration::from_millis(5);
        let late = now + Duration::from_secs(5);
        assert!(table.insert(1, live(&route, Some(soon))));
        assert!(table.insert(2, live(&route, Some(soon))));
        assert!(table.insert(3, live(&route, Some(late))));
        assert!(table.insert(4, live(&route, None)));
        assert!(!table.insert(4, live(&route, None)), "an id already live");
        let ended = table.remove(2).unwrap();
        let mut expired = Vec::new();
        table.expire(soon, &mut expired);
        assert_eq!(expired.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [1]);
        assert!(!ended.cancel.is_cancelled(), "an ended call is left alone");
        assert_eq!(table.next_deadline(), Some(late));
        assert_eq!(table.len(), 2);
        table.cancel_all();
        assert_eq!(table.len(), 0);
        assert_eq!(table.next_deadline(), None);
    }

    #[test]
    fn stale_heap_entries_are_pruned() {
        let route = route();
        let mut table = LiveCalls::default();
        let at = Instant::now() + Duration::from_secs(60);
        for id in 0..1000 {
            assert!(table.insert(id, live(&route, Some(at))));
            table.remove(id);
        }
        assert!(table.deadlines.len() <= 2 * table.len() + 65);
    }
}
