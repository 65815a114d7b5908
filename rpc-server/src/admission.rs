//! [`Admission`]: which connections the server keeps when it is at its limits.
//!
//! The accept loop asks [`Admission::admit`] about every new connection. The
//! answer is a [`Ticket`] (serve it) or the `TooManyConnections` error to send
//! it before closing it. Two limits apply:
//!
//! - `max_connections_per_ip`: a peer address already holding that many
//!   connections is refused;
//! - `max_connections`: at the limit, the connection that has gone longest
//!   without a *call* is evicted to make room — if it has gone at least
//!   [`EVICTION_MIN_IDLE`] (or the idle timeout, when shorter) without one and
//!   has no call in progress — and
//!   the new one is admitted; when no connection qualifies, the new one is
//!   refused. A slot is therefore never held for good by a peer that only
//!   pings (or dribbles a ping frame inside every idle timeout), while
//!   clients that are calling are never evicted for a newcomer.
//!
//! # The table
//!
//! One [`Entry`] per admitted connection: the peer IP, the accept time, and the
//! time of its last call. The table's mutex is taken on accept and when a
//! connection ends, never per request: the connection task owns a
//! [`CallActivity`] that records calls with one relaxed atomic store per batch
//! of frames that held a request (pings, pongs and cancels are not calls), and
//! marks the entry busy while calls are in progress (a store when that
//! changes). The evictor reads those atomics under the table's lock.
//!
//! # Invariants
//!
//! - The table holds exactly the connections that count against the limits:
//!   admitted and not evicted. An evicted connection leaves the table at
//!   once (its slot goes to the newcomer) and is counted in `closing` until
//!   its task ends; at most [`MAX_CLOSING_EVICTED`] are closing at a time, and
//!   beyond that newcomers are refused rather than evicting more (each
//!   closing connection still holds a socket).
//! - `per_ip` counts the table's entries by IP; an IP with no entries has no key.
//! - An entry's eviction notice fires at most once, after the entry has left
//!   the table; the connection then stops taking calls (new requests are
//!   answered `TooManyConnections` without running), finishes those in
//!   progress, sends the connection-level `TooManyConnections` and closes.
//! - `ServerStats::open_connections` counts tickets alive (sockets being
//!   served, evicted ones included until they are gone).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rpc_core::RpcError;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::stats::ServerStats;
use crate::ServerConfig;

/// The longest a connection must go without a call before it may be evicted
/// for a newcomer (shorter when the idle timeout is shorter): long enough that
/// a client calling even once a second is never evicted, short enough that a
/// waiting client is let in within about a second.
pub const EVICTION_MIN_IDLE: Duration = Duration::from_secs(1);

/// Most evicted connections still closing at a time (see the module doc).
pub const MAX_CLOSING_EVICTED: usize = 64;

/// [`Entry::last_call_ms`] while the connection has calls in progress.
const BUSY: u64 = u64::MAX;

/// The server-wide connection table and its policy.
pub(crate) struct Admission {
    max_connections: usize,
    max_per_ip: Option<usize>,
    min_idle: Duration,
    /// Times in entries are milliseconds since this instant.
    epoch: Instant,
    table: Mutex<Table>,
    stats: Arc<ServerStats>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    live: HashMap<u64, Arc<Entry>>,
    per_ip: HashMap<IpAddr, usize>,
    /// Evicted connections whose tasks have not ended yet.
    closing: usize,
}

/// One admitted connection, as the table sees it.
pub(crate) struct Entry {
    id: u64,
    /// None for a Unix socket connection: counted by `max_connections` only.
    ip: Option<IpAddr>,
    accepted: Instant,
    /// Milliseconds since the epoch of the connection's last call (its accept
    /// time until it makes one), or [`BUSY`] while calls are in progress.
    last_call_ms: AtomicU64,
    /// Fired once when the connection is evicted.
    eviction: EvictionNotice,
}

/// What [`Admission::admit`] decided.
pub(crate) enum Admit {
    /// Serve the connection; dropping the ticket releases its slot.
    Accepted(Ticket),
    /// Send this error (`TooManyConnections`) and close.
    Refused(RpcError),
}

impl Admission {
    /// The limits of `config`, counting into `stats`.
    pub fn new(config: &ServerConfig, stats: Arc<ServerStats>) -> Admission {
        Admission::with_limits(
            config.max_connections,
            config.max_connections_per_ip,
            EVICTION_MIN_IDLE.min(config.transport.idle_timeout),
            stats,
        )
    }

    fn with_limits(
        max_connections: usize,
        max_per_ip: Option<usize>,
        min_idle: Duration,
        stats: Arc<ServerStats>,
    ) -> Admission {
        Admission {
            max_connections,
            max_per_ip,
            min_idle,
            epoch: Instant::now(),
            table: Mutex::new(Table::default()),
            stats,
        }
    }

    /// Decides about a connection from `ip` (none on a Unix socket) arriving
    /// at `now`; may evict the
    /// connection longest without a call (see the module doc).
    pub fn admit(self: &Arc<Self>, ip: Option<IpAddr>, now: Instant) -> Admit {
        let now_ms = self.ms(now);
        let mut evicted = None;
        let ticket = {
            let mut table = self.table.lock();
            if let (Some(max), Some(ip)) = (self.max_per_ip, ip) {
                if table.per_ip.get(&ip).copied().unwrap_or(0) >= max {
                    drop(table);
                    return self.refuse("max_connections_per_ip", max);
                }
            }
            if table.live.len() >= self.max_connections {
                let victim = if table.closing < MAX_CLOSING_EVICTED {
                    choose_victim(
                        table
                            .live
                            .values()
                            .map(|e| (e.id, e.last_call_ms.load(Ordering::Relaxed))),
                        now_ms,
                        self.min_idle.as_millis() as u64,
                    )
                } else {
                    None
                };
                let Some(victim) = victim.and_then(|id| table.remove(id)) else {
                    drop(table);
                    return self.refuse("max_connections", self.max_connections);
                };
                table.closing += 1;
                evicted = Some(victim);
            }
            let id = table.next_id;
            table.next_id += 1;
            let entry = Arc::new(Entry {
                id,
                ip,
                accepted: now,
                last_call_ms: AtomicU64::new(now_ms),
                eviction: EvictionNotice::default(),
            });
            table.live.insert(id, entry.clone());
            if let Some(ip) = ip {
                *table.per_ip.entry(ip).or_default() += 1;
            }
            Ticket {
                admission: self.clone(),
                entry,
            }
        };
        self.stats.open_connections.fetch_add(1, Ordering::Relaxed);
        if let Some(victim) = evicted {
            self.stats
                .evicted_connections
                .fetch_add(1, Ordering::Relaxed);
            let last = victim.last_call_ms.load(Ordering::Relaxed);
            tracing::info!(
                peer_ip = ?victim.ip,
                open_for = ?now.saturating_duration_since(victim.accepted),
                without_a_call_ms = now_ms.saturating_sub(last),
                max_connections = self.max_connections,
                "max_connections reached: evicting the connection longest without a call"
            );
            victim.eviction.fire();
        }
        Admit::Accepted(ticket)
    }

    fn refuse(&self, limit: &str, max: usize) -> Admit {
        self.stats
            .refused_connections
            .fetch_add(1, Ordering::Relaxed);
        Admit::Refused(RpcError::TooManyConnections {
            limit: limit.to_owned(),
            max: max as u64,
            evicted: false,
        })
    }

    /// Milliseconds from the epoch to `at` (0 before it).
    fn ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_millis() as u64
    }

    /// Connections counting against the limits now (evicted ones excluded).
    #[cfg(test)]
    fn live(&self) -> usize {
        self.table.lock().live.len()
    }
}

impl Table {
    /// Takes entry `id` out of the table and its IP count.
    fn remove(&mut self, id: u64) -> Option<Arc<Entry>> {
        let entry = self.live.remove(&id)?;
        if let Some(ip) = entry.ip {
            if let Some(n) = self.per_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    self.per_ip.remove(&ip);
                }
            }
        }
        Some(entry)
    }
}

/// The eviction policy: among `(id, last call in ms)` candidates, the one
/// longest without a call, if that is at least `min_idle_ms` at `now_ms`;
/// busy ones ([`BUSY`]) never qualify. Ties go to the older connection
/// (the lower id).
fn choose_victim(
    candidates: impl Iterator<Item = (u64, u64)>,
    now_ms: u64,
    min_idle_ms: u64,
) -> Option<u64> {
    candidates
        .filter(|&(_, last)| last != BUSY && now_ms.saturating_sub(last) >= min_idle_ms)
        .min_by_key(|&(id, last)| (last, id))
        .map(|(id, _)| id)
}

/// A connection's eviction notice: fired at most once, read without a lock
/// (the serving loop looks at it once per batch), waited on through a
/// `Notify`. A flag and a `Notify` (40 B), because every connection has one.
///
/// `rpc_core::CancelSignal` is the same flag and `Notify`, with a claim
/// between answer and cancellation that an eviction has no use for; it sits
/// behind an `Arc`, which would be a second allocation per connection beside
/// this entry's, and its wait is an `async fn` where the serving loop pins a
/// bare `Notified` ([`notified`](Self::notified)). `CloseSignal` (200 B) also
/// keeps a reason and an error nobody reads here.
#[derive(Debug, Default)]
pub(crate) struct EvictionNotice {
    fired: AtomicBool,
    notify: Notify,
}

impl EvictionNotice {
    /// Tells the connection to go; every waiter is woken.
    pub fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether it was fired.
    #[inline]
    pub fn is_fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }

    /// A waiter that completes on any fire after it is made, even one made
    /// before its first poll (tokio's `Notified`; only a polled one has a
    /// waker to wake). It does not look at the flag: the caller checks
    /// [`is_fired`](Self::is_fired) after making it.
    pub fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    /// Completes once fired (the TLS handshake waits for it).
    #[cfg(any(feature = "tls", test))]
    pub async fn fired(&self) {
        let notified = self.notified();
        if !self.is_fired() {
            notified.await;
        }
    }
}

/// A connection's place in the table; dropping it frees the place.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    entry: Arc<Entry>,
}

impl Ticket {
    /// Fired when this connection is evicted; the connection then winds down.
    pub fn eviction(&self) -> &EvictionNotice {
        &self.entry.eviction
    }

    /// The error an evicted connection's calls and its peer get.
    pub fn eviction_error(&self) -> RpcError {
        RpcError::TooManyConnections {
            limit: "max_connections".into(),
            max: self.admission.max_connections as u64,
            evicted: true,
        }
    }

    /// The recorder the connection task uses for its calls.
    pub fn activity(&self) -> CallActivity {
        CallActivity {
            entry: self.entry.clone(),
            epoch: self.admission.epoch,
            stored: self.entry.last_call_ms.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        {
            let mut table = self.admission.table.lock();
            if table.remove(self.entry.id).is_none() {
                // Evicted earlier: it was only closing.
                table.closing = table.closing.saturating_sub(1);
            }
        }
        self.admission
            .stats
            .open_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Records a connection's calls in its table entry, from the connection task
/// only: at most one relaxed store per batch of frames.
pub(crate) struct CallActivity {
    entry: Arc<Entry>,
    epoch: Instant,
    /// What this recorder last stored (no store when nothing changes).
    stored: u64,
}

impl CallActivity {
    /// After a batch read at `now`: `called` when the batch held a request,
    /// `busy` when calls are in progress now. A connection whose last call
    /// just finished counts as having called now.
    pub fn after_batch(&mut self, called: bool, busy: bool, now: Instant) {
        let value = if busy {
            BUSY
        } else if called || self.stored == BUSY {
            // u64 arithmetic: `as_millis` divides a u128 (~40 instructions a batch).
            let since = now.saturating_duration_since(self.epoch);
            since.as_secs() * 1000 + u64::from(since.subsec_millis())
        } else {
            return;
        };
        if value != self.stored {
            self.entry.last_call_ms.store(value, Ordering::Relaxed);
            self.stored = value;
        }
    }

    /// What a pool worker uses to record the end of the connection's last
    /// call while the connection's task sleeps (see [`QuietMarker`]).
    pub fn quiet_marker(&self) -> QuietMarker {
        QuietMarker {
            entry: self.entry.clone(),
            epoch: self.epoch,
        }
    }

    /// Another thread (a [`QuietMarker`]) may have stored since the last
    /// batch: the next one compares with what is stored now.
    pub fn resync(&mut self) {
        self.stored = self.entry.last_call_ms.load(Ordering::Relaxed);
    }
}

/// Records, from a pool worker, that a connection's last call ended: the
/// worker wrote its answer on the socket the connection lent, and the
/// connection's task, not woken, cannot record it (an eviction candidate must
/// not look busy until the task's next turn). The task stores again only
/// after it took its socket back, and [`CallActivity::resync`]s first.
pub(crate) struct QuietMarker {
    entry: Arc<Entry>,
    epoch: Instant,
}

impl QuietMarker {
    /// A marker of a connection in no table (unit tests of its users).
    #[cfg(test)]
    pub fn detached() -> Self {
        QuietMarker {
            entry: Arc::new(Entry {
                id: 0,
                ip: None,
                accepted: Instant::now(),
                last_call_ms: AtomicU64::new(0),
                eviction: EvictionNotice::default(),
            }),
            epoch: Instant::now(),
        }
    }

    /// A worker started a call of the connection (one it read itself, see
    /// `reply::worker_reads`): the connection is busy, not an eviction
    /// candidate, until its calls end.
    pub fn call_started(&self) {
        self.entry.last_call_ms.store(BUSY, Ordering::Relaxed);
    }

    /// The connection's calls all ended at `now`.
    pub fn calls_ended(&self, now: Instant) {
        let since = now.saturating_duration_since(self.epoch);
        let ms = since.as_secs() * 1000 + u64::from(since.subsec_millis());
        self.entry.last_call_ms.store(ms, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// `fired()` completes for a fire before its first poll and for one
    /// after; a fresh notice is not fired.
    #[tokio::test]
    async fn an_eviction_notice_is_heard_whenever_it_fires() {
        let early = EvictionNotice::default();
        assert!(!early.is_fired());
        let waiting = early.fired();
        early.fire();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("a fire before the first poll is heard");
        assert!(early.is_fired());

        let late = Arc::new(EvictionNotice::default());
        let waiter = tokio::spawn({
            let late = late.clone();
            async move { late.fired().await }
        });
        tokio::task::yield_now().await;
        late.fire();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("a fire after the wait began is heard")
            .expect("the waiter ran");
    }

    const A_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const A: Option<IpAddr> = Some(A_IP);
    const B: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    /// A Unix socket connection.
    const UNIX: Option<IpAddr> = None;

    fn admission(max: usize, per_ip: Option<usize>) -> Arc<Admission> {
        Arc::new(Admission::with_limits(
            max,
            per_ip,
            Duration::from_secs(1),
            Arc::new(ServerStats::default()),
        ))
    }

    fn accepted(admit: Admit) -> Ticket {
        match admit {
            Admit::Accepted(t) => t,
            Admit::Refused(e) => panic!("refused: {e}"),
        }
    }

    fn refused_limit(admit: Admit) -> (String, u64) {
        match admit {
            Admit::Refused(RpcError::TooManyConnections {
                limit,
                max,
                evicted: false,
            }) => (limit, max),
            Admit::Refused(e) => panic!("refused with another error: {e}"),
            Admit::Accepted(_) => panic!("accepted"),
        }
    }

    #[test]
    fn the_victim_is_the_one_longest_without_a_call_past_the_minimum() {
        let pick = |c: &[(u64, u64)], now| choose_victim(c.iter().copied(), now, 1000);
        assert_eq!(pick(&[(1, 500), (2, 100), (3, 900)], 2000), Some(2));
        assert_eq!(
            pick(&[(1, 1500), (2, 1200)], 2000),
            None,
            "all called recently"
        );
        assert_eq!(pick(&[(1, 1000)], 2000), Some(1), "exactly the minimum");
        assert_eq!(pick(&[(1, BUSY), (2, 1500)], 5000), Some(2), "busy never");
        assert_eq!(pick(&[(1, BUSY)], u64::MAX - 1), None);
        assert_eq!(pick(&[(7, 100), (3, 100)], 2000), Some(3), "tie: older");
        assert_eq!(pick(&[], 2000), None);
    }

    #[test]
    fn at_the_limit_an_idle_connection_is_evicted_and_an_active_one_kept() {
        let adm = admission(2, None);
        let t0 = Instant::now();
        let idle = accepted(adm.admit(A, t0));
        let active = accepted(adm.admit(B, t0));
        // `active` calls at +1.5 s; `idle` only pings (records nothing).
        active
            .activity()
            .after_batch(true, false, t0 + Duration::from_millis(1500));
        // Too soon: nobody has gone 1 s without a call... except `idle`, whose
        // accept time counts as its last call, once 1 s has passed.
        let (limit, max) = refused_limit(adm.admit(A, t0 + Duration::from_millis(900)));
        assert_eq!((limit.as_str(), max), ("max_connections", 2));
        let newcomer = accepted(adm.admit(A, t0 + Duration::from_millis(2000)));
        assert!(idle.eviction().is_fired(), "the idle one is told to go");
        assert!(!active.eviction().is_fired());
        assert!(!newcomer.eviction().is_fired());
        assert_eq!(adm.live(), 2);
        assert_eq!(adm.stats.evicted_connections.load(Ordering::Relaxed), 1);
        assert_eq!(adm.stats.refused_connections.load(Ordering::Relaxed), 1);
        assert_eq!(adm.stats.open_connections.load(Ordering::Relaxed), 3);
        drop(idle);
        assert_eq!(adm.stats.open_connections.load(Ordering::Relaxed), 2);
        assert_eq!(adm.table.lock().closing, 0);
        assert_eq!(
            adm.live(),
            2,
            "dropping an evicted ticket frees nothing twice"
        );
    }

    #[test]
    fn busy_connections_and_recent_callers_are_never_evicted() {
        let adm = admission(2, None);
        let t0 = Instant::now();
        let slow_call = accepted(adm.admit(A, t0));
        let caller = accepted(adm.admit(B, t0));
        let mut slow = slow_call.activity();
        slow.after_batch(true, true, t0 + Duration::from_millis(10));
        let mut fast = caller.activity();
        for step in 1..=10u64 {
            fast.after_batch(true, false, t0 + Duration::from_millis(500 * step));
        }
        // At +5.2 s: the slow call is still running, the caller called 200 ms ago.
        refused_limit(adm.admit(A, t0 + Duration::from_millis(5200)));
        // The slow call finishes at +5.3 s: that counts as its last call.
        slow.after_batch(false, false, t0 + Duration::from_millis(5300));
        fast.after_batch(true, false, t0 + Duration::from_millis(5800));
        refused_limit(adm.admit(A, t0 + Duration::from_millis(6000)));
        let _newcomer = accepted(adm.admit(A, t0 + Duration::from_millis(6400)));
        assert!(
            slow_call.eviction().is_fired(),
            "1.1 s after its call ended"
        );
        assert!(!caller.eviction().is_fired());
    }

    #[test]
    fn the_per_ip_cap_refuses_without_evicting_and_frees_on_close() {
        let adm = admission(10, Some(2));
        let t0 = Instant::now();
        let a1 = accepted(adm.admit(A, t0));
        let _a2 = accepted(adm.admit(A, t0));
        let late = t0 + Duration::from_secs(60);
        let (limit, max) = refused_limit(adm.admit(A, late));
        assert_eq!((limit.as_str(), max), ("max_connections_per_ip", 2));
        assert!(!a1.eviction().is_fired(), "the cap evicts nobody");
        let _b = accepted(adm.admit(B, late));
        drop(a1);
        let _a3 = accepted(adm.admit(A, late));
        assert_eq!(adm.table.lock().per_ip.get(&A_IP), Some(&2));
    }

    #[test]
    fn unix_socket_connections_count_against_max_connections_but_no_ip() {
        let adm = admission(3, Some(1));
        let t0 = Instant::now();
        let u1 = accepted(adm.admit(UNIX, t0));
        let _u2 = accepted(adm.admit(UNIX, t0));
        let _a = accepted(adm.admit(A, t0));
        assert_eq!(adm.live(), 3);
        assert!(
            adm.table.lock().per_ip.len() == 1,
            "only the TCP peer has an IP entry"
        );
        // The table is full: the newcomer evicts the one longest without a call.
        let late = t0 + Duration::from_secs(60);
        let _u3 = accepted(adm.admit(UNIX, late));
        assert_eq!(adm.live(), 3, "one evicted, the newcomer in");
        assert!(u1.eviction().is_fired(), "the oldest idle one is evicted");
        drop(u1);
        assert_eq!(adm.table.lock().per_ip.get(&A_IP), Some(&1));
    }

    #[test]
    fn evictions_stop_while_too_many_evicted_connections_are_still_closing() {
        let n = MAX_CLOSING_EVICTED + 1;
        let adm = admission(n, None);
        let t0 = Instant::now();
        let mut old: Vec<Ticket> = (0..n).map(|_| accepted(adm.admit(A, t0))).collect();
        let late = t0 + Duration::from_secs(10);
        let mut new = Vec::new();
        for _ in 0..MAX_CLOSING_EVICTED {
            new.push(accepted(adm.admit(B, late)));
        }
        refused_limit(adm.admit(B, late));
        // One evicted connection finishes closing: one more eviction is allowed.
        old.remove(0);
        let _one_more = accepted(adm.admit(B, late));
        assert_eq!(adm.live(), n);
    }

    #[test]
    fn call_activity_stores_only_on_change_and_a_worker_marks_the_end_of_pooled_calls() {
        let adm = admission(1, None);
        let t0 = Instant::now();
        let ticket = accepted(adm.admit(A, t0));
        let mut activity = ticket.activity();
        let at = |ms| t0 + Duration::from_millis(ms);
        let stored = || ticket.entry.last_call_ms.load(Ordering::Relaxed);
        let accept_ms = stored();
        activity.after_batch(false, false, at(5000));
        assert_eq!(stored(), accept_ms, "pings alone are not calls");
        activity.after_batch(true, true, at(6000));
        assert_eq!(stored(), BUSY);
        activity.after_batch(false, false, at(7000));
        assert_eq!(
            stored(),
            adm.ms(at(7000)),
            "the end of the last call counts"
        );

        // Pooled calls, whose last answer a worker wrote while the task
        // slept: the worker marks their end, the task resyncs.
        activity.after_batch(true, true, at(8000));
        assert_eq!(stored(), BUSY);
        activity.quiet_marker().calls_ended(at(8500));
        assert_eq!(stored(), adm.ms(at(8500)));
        activity.resync();
        // A ping alone changes nothing; new calls make it busy again.
        activity.after_batch(false, false, at(9000));
        assert_eq!(stored(), adm.ms(at(8500)));
        activity.after_batch(true, true, at(9500));
        assert_eq!(
            stored(),
            BUSY,
            "busy again: stored, not skipped as unchanged"
        );
    }
}
