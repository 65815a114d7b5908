//! [`Spares`]: allocations the per-call path frees, kept for its next
//! call — on the thread that frees them and, in batches, for the other
//! threads.
//!
//! # Why
//!
//! A pooled call's parts are made on one thread and freed on another: the
//! connection task makes its cancel signal, the worker that ran the call
//! drops it last. glibc's allocator serves a thread from a small cache of
//! its own, so such a one-way flow misses it on both ends — every `malloc`
//! on the making thread and every `free` on the other goes to the shared
//! arena, under its lock. Measured with callgrind on a pool-dispatch server
//! (echo, 1:100:1024): about 160 instructions for each such `malloc` and 130
//! for its `free`, against 50 and 100 when one thread does both.
//!
//! # Shape
//!
//! - Each thread keeps up to [`BATCH`] spares of its own, taken and given
//!   back without a lock: a thread that makes and drops its own values (a
//!   connection task answering at once) never goes further.
//! - A thread whose stock is full hands the whole batch to a depot shared
//!   by every thread, and a thread whose stock is empty takes a full batch
//!   from it — whichever thread that is. In a one-way flow that is one lock
//!   per [`BATCH`] values on each side. The emptied batch's `Vec` goes back
//!   the other way, so the exchange itself allocates nothing in the steady
//!   state.
//! - The depot's count of full batches is read without the lock first: an
//!   empty stock finding the depot empty, or a full one finding it full,
//!   takes no lock (the value is then made, or freed, as usual).
//!
//! # Invariants
//!
//! - Bounded: [`BATCH`] spares per thread and [`DEPOT_BATCHES`] batches in
//!   the depot. Past that a value is freed as usual. The memory held is
//!   per thread: for `T` of `S` bytes, at most `BATCH × S` per thread that
//!   ever dropped one, plus `DEPOT_BATCHES × BATCH × S` (a pooled call's
//!   288-byte box: 9 KiB a thread, 72 KiB in the depot), kept until the
//!   thread exits.
//! - No `T` is dropped while a stock is borrowed or the depot is locked,
//!   so a `T` whose drop reaches these spares again cannot deadlock or
//!   panic: a re-entrant [`take`](Spares::take) gets `None`, a re-entrant
//!   [`keep`](Spares::keep) frees its value.
//! - A thread's stock is freed with the thread; a `keep` during the
//!   thread's teardown frees its value.
//! - A spare must not be reachable from anywhere else: what the owner of
//!   `T` puts here (see [`CancelSignal`](crate::CancelSignal)'s drop) is the
//!   last handle to it, reset to its new state.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::LocalKey;

use parking_lot::Mutex;

/// Spares a thread keeps without a lock; also the size of a batch that
/// goes through the depot.
pub const BATCH: usize = 32;

/// Full batches the depot keeps at most.
pub const DEPOT_BATCHES: usize = 8;

/// One kind of spare allocation: each thread's stock (`local`) and the
/// depot between threads (see the module docs).
///
/// Declared as a `static` next to a `thread_local!` stock:
///
/// ```
/// use std::cell::RefCell;
/// use rpc_core::spares::Spares;
///
/// thread_local! {
///     static STOCK: RefCell<Vec<Box<[u8; 64]>>> = const { RefCell::new(Vec::new()) };
/// }
/// static BUFFERS: Spares<Box<[u8; 64]>> = Spares::new(&STOCK);
///
/// let buffer = BUFFERS.take().unwrap_or_else(|| Box::new([0; 64]));
/// BUFFERS.keep(buffer);
/// assert!(BUFFERS.take().is_some(), "kept for the thread's next one");
/// ```
pub struct Spares<T: 'static> {
    local: &'static LocalKey<RefCell<Vec<T>>>,
    depot: Mutex<Depot<T>>,
    /// `depot.full.len()`, read without the lock (a hint: the lock decides).
    full_batches: AtomicUsize,
}

/// Batches on their way between threads.
struct Depot<T> {
    /// Batches of [`BATCH`] spares.
    full: Vec<Vec<T>>,
    /// Emptied batches' `Vec`s, for the next thread that hands one in.
    empty: Vec<Vec<T>>,
}

impl<T: 'static> Spares<T> {
    /// Spares kept in `local` (each thread's stock) and in a depot.
    pub const fn new(local: &'static LocalKey<RefCell<Vec<T>>>) -> Self {
        Spares {
            local,
            depot: Mutex::new(Depot {
                full: Vec::new(),
                empty: Vec::new(),
            }),
            full_batches: AtomicUsize::new(0),
        }
    }

    /// A spare, if this thread or the depot has one.
    #[inline]
    pub fn take(&self) -> Option<T> {
        // Re-entered (a spare's drop making another), or the thread exiting: none.
        let mine = self
            .local
            .try_with(|stock| stock.try_borrow_mut().ok()?.pop())
            .ok()
            .flatten();
        mine.or_else(|| self.refill())
    }

    /// Keeps `spare` for a later [`take`](Self::take); frees it when this
    /// thread's stock and the depot are full, when the thread is exiting, or
    /// when called from within the drop of a `T` this thread is keeping.
    #[inline]
    pub fn keep(&self, spare: T) {
        let full = self.local.try_with(|stock| match stock.try_borrow_mut() {
            Ok(mut stock) if stock.len() < BATCH => {
                stock.push(spare);
                None
            }
            _ => Some(spare),
        });
        // Not kept here (a thread exiting has dropped it with the closure).
        if let Ok(Some(spare)) = full {
            self.hand_in(spare);
        }
    }

    /// An empty stock takes a full batch from the depot, leaving its `Vec`.
    #[cold]
    fn refill(&self) -> Option<T> {
        if self.full_batches.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.local
            .try_with(|stock| {
                let mut stock = stock.try_borrow_mut().ok()?;
                let mut depot = self.depot.lock();
                let batch = depot.full.pop()?;
                self.full_batches.store(depot.full.len(), Ordering::Relaxed);
                let emptied = std::mem::replace(&mut *stock, batch);
                // Empty (this is the empty stock's `Vec`): nothing dropped here.
                debug_assert!(emptied.is_empty());
                if depot.empty.len() < DEPOT_BATCHES && emptied.capacity() >= BATCH {
                    depot.empty.push(emptied);
                }
                drop(depot);
                stock.pop()
            })
            .ok()
            .flatten()
    }

    /// A full stock goes to the depot as a batch and `spare` starts the next
    /// one; `spare` is freed when the depot is full (or the stock busy).
    #[cold]
    fn hand_in(&self, spare: T) {
        if self.full_batches.load(Ordering::Relaxed) >= DEPOT_BATCHES {
            return; // `spare` is freed: the depot is full.
        }
        let unkept = self
            .local
            .try_with(|stock| {
                let Ok(mut stock) = stock.try_borrow_mut() else {
                    return Some(spare);
                };
                let mut depot = self.depot.lock();
                if depot.full.len() >= DEPOT_BATCHES {
                    return Some(spare);
                }
                let next = depot.empty.pop().unwrap_or_default();
                let batch = std::mem::replace(&mut *stock, next);
                depot.full.push(batch);
                self.full_batches.store(depot.full.len(), Ordering::Relaxed);
                drop(depot);
                // A new `Vec` is allocated here, outside the lock.
                stock.reserve_exact(BATCH);
                stock.push(spare);
                None
            })
            .ok()
            .flatten();
        // Freed outside the borrow and the lock (its drop may reach these
        // spares again).
        drop(unkept);
    }
}

#[cfg(test)]
// Boxes kept are what these tests are about.
#[allow(clippy::vec_box)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its drops (frees), so a test sees what was kept.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    thread_local! {
        static LOCAL_ONLY: RefCell<Vec<Box<u64>>> = const { RefCell::new(Vec::new()) };
        static ONE_WAY: RefCell<Vec<Box<u64>>> = const { RefCell::new(Vec::new()) };
        static BOUNDED: RefCell<Vec<Counted>> = const { RefCell::new(Vec::new()) };
    }

    #[test]
    fn a_thread_takes_back_what_it_kept_last_first() {
        static SPARES: Spares<Box<u64>> = Spares::new(&LOCAL_ONLY);
        assert!(SPARES.take().is_none(), "nothing kept yet");
        let first = Box::new(1);
        let first_at = &*first as *const u64;
        SPARES.keep(first);
        SPARES.keep(Box::new(2));
        assert_eq!(SPARES.take().as_deref(), Some(&2));
        let again = SPARES.take().expect("the first one");
        assert_eq!(&*again as *const u64, first_at, "the same allocation");
        assert!(SPARES.take().is_none());
    }

    #[test]
    fn what_one_thread_drops_reaches_another_that_makes_in_batches() {
        static SPARES: Spares<Box<u64>> = Spares::new(&ONE_WAY);
        let dropper = std::thread::spawn(|| {
            for i in 0..(3 * BATCH as u64) {
                SPARES.keep(Box::new(i));
            }
            // Its own stock still holds the last (partial) batch.
            ONE_WAY.with(|stock| stock.borrow().len())
        });
        let left_there = dropper.join().unwrap();
        assert_eq!(left_there, BATCH, "two batches handed in, one kept");
        let maker = std::thread::spawn(|| {
            let mut taken = 0;
            while SPARES.take().is_some() {
                taken += 1;
            }
            taken
        });
        assert_eq!(maker.join().unwrap(), 2 * BATCH, "both batches reached it");
    }

    #[test]
    fn the_stock_and_the_depot_are_bounded() {
        static SPARES: Spares<Counted> = Spares::new(&BOUNDED);
        let freed = Arc::new(AtomicUsize::new(0));
        let most = BATCH * (DEPOT_BATCHES + 1);
        let kept = std::thread::spawn({
            let freed = freed.clone();
            move || {
                for _ in 0..most + 10 {
                    SPARES.keep(Counted(freed.clone()));
                }
                let stock = BOUNDED.with(|stock| stock.borrow().len());
                (stock, freed.load(Ordering::Relaxed))
            }
        })
        .join()
        .unwrap();
        assert_eq!(kept, (BATCH, 10), "a full stock and depot free the rest");
        // The thread's exit freed its own stock; the depot's batches remain.
        assert_eq!(freed.load(Ordering::Relaxed), 10 + BATCH);
        let taken = std::thread::spawn(|| {
            let mut n = 0;
            while let Some(spare) = SPARES.take() {
                drop(spare);
                n += 1;
            }
            n
        })
        .join()
        .unwrap();
        assert_eq!(taken, BATCH * DEPOT_BATCHES);
    }
}
