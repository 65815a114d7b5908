//! [`FixedConnections`]: `n` multiplexed connections picked round-robin.
//!
//! # Calls made together share a write
//!
//! Strict round-robin per call spreads a burst — the callers woken by one read
//! of answers, each making its next call in the same scheduler tick — over
//! every connection: `n` writes of one frame each on the client, `n` reads and
//! `n` writes on the server, where one of each would do. A call therefore joins
//! the connection its thread's previous call went to while that connection's next write
//! is still gathering (its writer task has not taken the batch yet) and holds
//! fewer than `coalesce_calls` ([`Connect::Fixed`](crate::Connect::Fixed)) frames;
//! otherwise it moves on, round-robin. Calls that do not overlap see an empty
//! batch and go round-robin exactly as before; a burst fills one connection's
//! write, up to the cap, then the next one's. At 10 connections and 100 calls
//! in flight this halved the syscalls per call on both sides (at 10:100:1024,
//! BENCHMARKS.md round 5). The cap keeps a big burst spread
//! over several connections, so several server connection tasks (and cores)
//! still share it, and a connection whose write buffer is full (a peer that
//! does not read) is never joined: it gets no more calls than round-robin gave.
//!
//! The price: a burst of up to `coalesce_calls` calls lands on one server
//! connection task. With `direct` dispatch and handlers that burn CPU or
//! block, those calls then run one after the other on one core where strict
//! round-robin would have spread them; use `pool` dispatch for such handlers
//! (the default), or `coalesce_calls = 1`.
//!
//! # Each calling thread gathers on its own connection
//!
//! Where a batch gathers is kept per calling thread (a *lane*, 8 of them,
//! threads numbered as they first call), not once for the client. With one
//! gathering connection, the callers both runtime threads woke at the same
//! time queued on it together, each call taking its pending table's and its
//! write buffer's locks in turn with the other thread's calls: at 1000
//! connections × 1000 calls the client gave up its core (`sched_yield`, in
//! `parking_lot`'s spin) 7–12 k times a second. With a lane each, the two
//! threads fill two connections' writes side by side: 0.7 k yields a second,
//! 17–24 % more calls per second, p99 7 ms instead of 16–18 ms (BENCHMARKS.md).
//! It is a tendency, not a guarantee: round-robin steps do not skip a slot
//! another lane gathers on, and a process with more than 8 calling threads
//! has threads that share a lane; either way a call joins only a batch that
//! is still gathering and below the cap.
//!
//! # A light load stays on one connection
//!
//! A call made while fewer than [`LIGHT_LOAD`] calls of the client are in
//! flight, and fewer than the cap (a lone caller, one call after another,
//! or a few callers) goes to the connection the call before went to, not
//! round-robin, while that connection is open and its write buffer not
//! full: there is no load to spread, and the server busy-polls a connection
//! whose requests follow each other closely (its connection task, or with
//! pool dispatch the worker that answered, for the next request), as the
//! client does for a lone caller's answer (`busy_poll`). Taken in turns
//! over `n` connections, each would see a call only now and then, no poll
//! would catch one, and every call would pay a wake-up on each side. As
//! soon as more calls overlap, they spread as above. `coalesce_calls = 1`
//! keeps strict round-robin, a light load's calls included. The count is
//! the client's (every address, streams included): a client with 4 streams
//! open anywhere spreads its calls as under load.
//!
//! # A broken slot is reconnected by the call that found it
//!
//! A call first asks [`ready`](FixedConnections::ready) for an open connection
//! without waiting; when the slot it picks is broken, the call goes on to
//! [`acquire`](FixedConnections::acquire), which reconnects *that* slot.
//! Picking again instead would step on to the next (open) slot, so with two
//! connections the broken one would be skipped by every call and never
//! reconnected: after a server restart a client under load would run on one
//! connection of two. `ready` leaves
//! the broken slot's index for the next `acquire` to take; when several calls
//! race, each reconnect attempt is one connect under the slot's lock, and any
//! call that misses the hint picks round-robin, which reaches every slot.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rpc_core::RpcError;
use rpc_transport::{CallsInFlight, ClientTransport, Connection};

use super::slot::Slot;
use crate::ClientConfig;

/// `connections` connections to one address, created up front unless
/// `lazy_connect`, each shared by many concurrent calls.
pub struct FixedConnections {
    slots: Vec<Slot>,
    next: AtomicUsize,
    /// The slot the last round-robin step chose: where a light load's calls
    /// go (see the module docs).
    current: AtomicUsize,
    /// Per calling thread (see [`lane`]), the slot its last round-robin step
    /// chose: where that thread's calls gather.
    lanes: Box<[Lane; LANES]>,
    /// A slot `ready` found broken, plus one (0: none): the next `acquire`
    /// reconnects it.
    broken: AtomicUsize,
    /// Most frames a batch takes before calls move on (`coalesce_calls`).
    batch_cap: usize,
    /// Calls in flight on the whole client: with fewer than [`LIGHT_LOAD`],
    /// the next call stays where the one before went.
    in_flight: CallsInFlight,
}

impl FixedConnections {
    /// Creates the slots and, unless `lazy_connect`, connects them all now (the
    /// first failure is returned: a server that cannot be reached is an error at start).
    pub async fn new(
        config: &ClientConfig,
        transport: &ClientTransport,
        connections: usize,
        coalesce_calls: usize,
    ) -> Result<FixedConnections, RpcError> {
        let slots: Vec<Slot> = (0..connections)
            .map(|_| Slot::new(&config.addr, transport))
            .collect();
        if !config.lazy_connect {
            for slot in &slots {
                slot.get().await?;
            }
        }
        Ok(FixedConnections {
            slots,
            next: AtomicUsize::new(0),
            current: AtomicUsize::new(0),
            lanes: Box::new(std::array::from_fn(|_| Lane(AtomicUsize::new(NO_SLOT)))),
            broken: AtomicUsize::new(0),
            batch_cap: coalesce_calls.max(1),
            in_flight: transport.in_flight.clone(),
        })
    }

    /// Where the next call goes: the connection of this thread's lane while
    /// its next write is gathering and below the cap, the current slot (the
    /// last round-robin step's) under a light load (fewer than
    /// [`LIGHT_LOAD`] calls in flight, and fewer than the cap; not with a cap
    /// of 1) while it is usable, else the next slot in round-robin order.
    fn pick(&self) -> Pick {
        let n = self.slots.len();
        if n == 1 {
            return Pick::Next(0);
        }
        let lane = &self.lanes[lane()].0;
        // A thread's first call has no slot of its own to join: it never
        // joins another thread's batch on a lane's starting value.
        let gathering = lane.load(Ordering::Relaxed);
        if gathering != NO_SLOT {
            if let Some(conn) = self.slots[gathering % n].joinable(self.batch_cap) {
                return Pick::Join(conn);
            }
        }
        if self.batch_cap > 1 && self.in_flight.get() < LIGHT_LOAD.min(self.batch_cap) {
            let at = self.current.load(Ordering::Relaxed) % n;
            // A broken connection, or one whose write buffer is full, is
            // left to round-robin, which moves on (and reconnects a broken
            // slot it picks).
            if let Some(conn) = self.slots[at].usable() {
                // Round-robin steps on from here once the load grows.
                self.next.store(at + 1, Ordering::Relaxed);
                lane.store(at, Ordering::Relaxed);
                return Pick::Join(conn);
            }
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % n;
        // Racing callers on other threads may each step on; any of their
        // choices is a fine place for the next batch.
        lane.store(i, Ordering::Relaxed);
        self.current.store(i, Ordering::Relaxed);
        Pick::Next(i)
    }

    /// The connection for the next call (see the module doc), reconnected if
    /// broken: first the slot [`ready`](Self::ready) found broken, if any.
    pub async fn acquire(&self) -> Result<Arc<Connection>, RpcError> {
        let broken = self.broken.swap(0, Ordering::Relaxed);
        if let Some(slot) = broken.checked_sub(1).and_then(|i| self.slots.get(i)) {
            return slot.get().await;
        }
        match self.pick() {
            Pick::Join(conn) => Ok(conn),
            Pick::Next(i) => self.slots[i].get().await,
        }
    }

    /// The connection for the next call if it is open now; `None` (the
    /// picked slot is broken) leaves that slot for [`acquire`](Self::acquire).
    pub fn ready(&self) -> Option<Arc<Connection>> {
        match self.pick() {
            Pick::Join(conn) => Some(conn),
            Pick::Next(i) => {
                let conn = self.slots[i].current();
                if conn.is_none() {
                    self.broken.store(i + 1, Ordering::Relaxed);
                }
                conn
            }
        }
    }

    /// Connections currently open.
    pub fn open_count(&self) -> usize {
        self.slots.iter().filter(|s| s.is_open()).count()
    }

    /// Closes every connection (they reconnect if used again).
    pub fn close(&self) {
        for s in &self.slots {
            s.close("client closed");
        }
    }
}

/// Calls in flight on the whole client below which the next call stays on
/// the connection of the call before (see the module docs). Measured on two
/// cores, 10 connections, sync callers (BENCHMARKS.md, "A light load on one
/// connection"): at 2 and 4 callers one connection ran 1.8–3.7× the calls
/// per second of round-robin, in both server dispatch modes; a mark of 8
/// gained 2× at 8 callers too, but cost 10–20 % at 16, where the calls
/// in flight hover about the mark and half of them pile onto one
/// connection while the rest spread. At 4, pool dispatch was level from 8
/// callers up and direct dispatch 5–8 % lower at 8 and 16.
const LIGHT_LOAD: usize = 4;

/// Lanes of a [`FixedConnections`]: threads beyond this many share them.
const LANES: usize = 8;

/// A lane whose thread has not called yet.
const NO_SLOT: usize = usize::MAX;

/// One lane's gathering slot, on cache lines of its own: each is written by
/// its thread's round-robin steps and read by its every call.
#[derive(Debug)]
#[repr(align(128))]
struct Lane(AtomicUsize);

/// The calling thread's lane (threads are numbered as they first call).
fn lane() -> usize {
    static THREADS: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static LANE: usize = THREADS.fetch_add(1, Ordering::Relaxed) % LANES;
    }
    LANE.with(|lane| *lane)
}

/// [`FixedConnections::pick`]'s answer.
enum Pick {
    /// Join this connection's gathering write.
    Join(Arc<Connection>),
    /// Take the connection of the slot at this index (connecting it if need be).
    Next(usize),
}
