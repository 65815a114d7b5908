//! The sizing and waiting rules both connection pools follow.
//!
//! Each pool is bounded with checkout/return semantics (one query per connection at a time,
//! like a JDBC pool) and every checkout waits at most [`CHECKOUT_TIMEOUT`], so "pool too small
//! for this concurrency" shows up as latency and, at worst, a clear
//! [`StoreError::PoolTimeout`](crate::store::StoreError::PoolTimeout) rather than a hang.

use std::time::Duration;

/// Pool size used when the configuration does not give one.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// How long a caller waits for a free pooled connection before
/// [`StoreError::PoolTimeout`](crate::store::StoreError::PoolTimeout).
pub const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(30);
