//! [`FrameBudget`]: a bound on the bytes that large frames hold, across every
//! connection of an endpoint.
//!
//! Each connection bounds its own small frames (its read buffer), but a frame
//! larger than `read_buffer_max` gets an allocation of its own, sized exactly,
//! and lives until the call that received it has finished. Without a bound
//! across connections, memory grows with connections × `max_frame_size`: 20
//! clients sending 16 MiB frames held over 600 MiB. With a budget, a reader
//! reserves a large frame's size *before* it reads the frame's body; while the
//! budget is spent, that connection is simply not read, so TCP pushes back on
//! its client, and it goes on once other frames are dropped.
//!
//! The budget is a `tokio::sync::Semaphore` whose permits are bytes: waiting
//! is fair (first come, first served), so one large frame is not starved by a
//! stream of smaller ones. A frame never waits for more than the whole budget
//! (a budget smaller than one frame would otherwise never let it through).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes that large frames may hold at once, shared by the connections of
/// one endpoint (cheap to clone).
///
/// ```
/// # async fn demo() {
/// use rpc_transport::FrameBudget;
/// let budget = FrameBudget::new(64 << 20);
/// let held = budget.reserve(16 << 20).await;
/// assert_eq!(budget.available(), 48 << 20);
/// drop(held);
/// assert_eq!(budget.available(), 64 << 20);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct FrameBudget {
    bytes: usize,
    permits: Arc<Semaphore>,
}

/// Bytes reserved from a [`FrameBudget`]; given back when dropped.
#[derive(Debug)]
pub struct Reserved(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

impl FrameBudget {
    /// A budget of `bytes` (at least 1).
    pub fn new(bytes: usize) -> Self {
        let bytes = bytes.clamp(1, Semaphore::MAX_PERMITS);
        FrameBudget {
            bytes,
            permits: Arc::new(Semaphore::new(bytes)),
        }
    }

    /// The whole budget.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes not reserved right now.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// Waits until `n` bytes (at most the whole budget) are free and reserves
    /// them. Cancel-safe: dropping the future gives up its place in the queue.
    pub async fn reserve(&self, n: usize) -> Reserved {
        let n = n.min(self.bytes).min(u32::MAX as usize) as u32;
        // The semaphore is never closed, so the error case does not occur; a
        // frame then simply goes unbudgeted rather than failing its call.
        Reserved(self.permits.clone().acquire_many_owned(n).await.ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_reservation_waits_until_bytes_are_given_back() {
        let budget = FrameBudget::new(100);
        let first = budget.reserve(70).await;
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.reserve(50).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "70 + 50 > 100: the second waits");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("released within the bound")
            .expect("task ran");
        assert_eq!(budget.available(), 50);
        drop(second);
        assert_eq!(budget.available(), 100);
    }

    #[tokio::test]
    async fn a_frame_larger_than_the_budget_takes_all_of_it() {
        let budget = FrameBudget::new(10);
        let all = tokio::time::timeout(Duration::from_secs(5), budget.reserve(1_000))
            .await
            .expect("does not wait forever");
        assert_eq!(budget.available(), 0);
        drop(all);
        assert_eq!(budget.available(), 10);
    }
}
