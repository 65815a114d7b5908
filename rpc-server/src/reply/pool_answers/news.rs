//! [`pool_news`]: how the connection task waits for its pool's answers —
//! lending its socket and parking at once, or yielding (and, for a call
//! alone on the pool, spinning) before it parks (see "Waiting for answers"
//! in the module docs).

use std::sync::Arc;
use std::task::Poll;

use super::PoolAnswers;

/// Completes when the worker pool has news for this connection (never, when
/// there is no pool).
///
/// `lend` (only for a connection that [`lends`](PoolAnswers::lends)): the
/// task lends its socket and parks at once. Otherwise, with calls on the
/// pool, it first yields its thread [`ANSWER_YIELDS`] times while no news has
/// come, before it lets the runtime thread park; when its one call is the
/// only task on the pool (`alone`, asked only then) it spins for up to
/// [`ANSWER_SPIN`] first (see the module docs).
pub(crate) async fn pool_news(
    pooled: Option<&Arc<PoolAnswers>>,
    alone: impl FnOnce() -> bool,
    lend: bool,
    lend_read: Option<&crate::pool::WorkerPool>,
) {
    let Some(pooled) = pooled else {
        return std::future::pending().await;
    };
    let lend_read = lend_read.filter(|_| lend);
    // Lending its socket, the task needs no answer's news: it parks at once
    // and leaves the thread to the workers that write.
    let mut yields = if pooled.in_flight() > 0 && !lend {
        ANSWER_YIELDS
    } else {
        0
    };
    if pooled.in_flight() == 1 && !lend && alone() {
        crate::pool::yield_while(ANSWER_SPIN, || pooled.in_flight() == 1);
    }
    std::future::poll_fn(|cx| loop {
        match pooled.poll_news(cx, lend, lend_read) {
            Poll::Pending if yields > 0 => {
                yields -= 1;
                std::thread::yield_now();
            }
            news => return news,
        }
    })
    .await
}

/// How many times a connection task waiting only for pool answers yields its
/// thread before it parks (see [`pool_news`]).
const ANSWER_YIELDS: u32 = 2;

/// How long a connection task whose call is the only one on the pool waits
/// for its answer by spinning before it parks (see [`pool_news`]).
const ANSWER_SPIN: std::time::Duration = std::time::Duration::from_micros(30);
