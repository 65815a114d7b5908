//! [`TransportConfig`]: the socket-level settings shared by clients and
//! servers, and [`ClientTransport`]: those plus what only a client's
//! connection has (a connect timeout, a write queue, TLS as a client).
//!
//! A server never dials and writes its answers itself, so a key that only a
//! client reads is not a `[transport]` key: it cannot be set where it would be
//! ignored.

use std::time::Duration;

use rpc_codec::DEFAULT_MAX_FRAME_SIZE;
use rpc_core::RpcError;
use serde::{Deserialize, Serialize};

use crate::pending::CallsInFlight;

/// Socket-level settings. Defaults follow jkrpc where it had one.
///
/// In config files durations are written in milliseconds with an `_ms` suffix
/// (`connect_timeout_ms = 500`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransportConfig {
    /// Largest frame accepted or sent, header included (16 MiB).
    pub max_frame_size: usize,
    /// Sizes the write buffers: a client connection's buffer is full at `16 ×`
    /// this many bytes, a server connection's unsent answers at `4 ×` (a single
    /// larger frame is still taken), and a buffer grown past twice that (a
    /// server's) or past it (a client's) is released once written.
    pub max_batch_bytes: usize,
    /// A client sends a ping when nothing was received for this long; both
    /// sides check for the idle timeout at this period.
    #[serde(
        rename = "heartbeat_interval_ms",
        with = "rpc_core::config::duration_ms"
    )]
    pub heartbeat_interval: Duration,
    /// Close the connection when nothing (not one byte) was received for this long.
    #[serde(rename = "idle_timeout_ms", with = "rpc_core::config::duration_ms")]
    pub idle_timeout: Duration,
    /// Smallest read size the adaptive read buffer shrinks to.
    pub read_buffer_min: usize,
    /// Largest read size it grows to. A frame bigger than this is read into an
    /// allocation of its own, sized exactly and freed with the frame (and, on a
    /// server, reserved from its `memory.frame_budget`).
    pub read_buffer_max: usize,
    /// Set TCP_NODELAY (the writer batches, so Nagle only adds latency).
    pub nodelay: bool,
}

/// Everything a client connection is opened with: the shared settings plus
/// the client's own. Built by the client from its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTransport {
    /// The settings both sides share.
    pub shared: TransportConfig,
    /// TCP connect timeout, TLS handshake included (jkrpc: 500 ms).
    pub connect_timeout: Duration,
    /// Frames that may wait in the connection's write buffer; callers wait
    /// for room when it is full.
    pub write_queue_capacity: usize,
    /// Connect with TLS (from the client's `tls` config or `ClientBuilder::tls`).
    #[cfg(feature = "tls")]
    pub tls: Option<crate::tls::TlsConnector>,
    /// Calls in flight on every connection opened with this transport — a
    /// client's; a connection several clients share (`reused`) counts all
    /// of its calls in the transport that opened it. A call alone in its
    /// count writes its frame through. Clones share the count.
    pub in_flight: CallsInFlight,
    /// How long a connection whose last two answers each came within this
    /// time of the one before polls for the next answer before its reader
    /// parks, while at most one call is in flight on the client (`0`:
    /// never; see [`busy_poll`](crate::busy_poll)).
    pub busy_poll: Duration,
}

impl Default for ClientTransport {
    fn default() -> Self {
        ClientTransport {
            shared: TransportConfig::default(),
            connect_timeout: ClientTransport::DEFAULT_CONNECT_TIMEOUT,
            write_queue_capacity: ClientTransport::DEFAULT_WRITE_QUEUE_CAPACITY,
            #[cfg(feature = "tls")]
            tls: None,
            in_flight: CallsInFlight::default(),
            busy_poll: ClientTransport::DEFAULT_BUSY_POLL,
        }
    }
}

impl ClientTransport {
    /// jkrpc's connect timeout.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
    /// Frames queued per connection before callers wait.
    pub const DEFAULT_WRITE_QUEUE_CAPACITY: usize = 4096;
    /// The client's busy poll, as the server's default.
    pub const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(200);
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_batch_bytes: 256 * 1024,
            heartbeat_interval: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(60),
            read_buffer_min: 512,
            read_buffer_max: 1024 * 1024,
            nodelay: true,
        }
    }
}

impl TransportConfig {
    /// Checks every value; errors name the config key.
    pub fn validate(&self, prefix: &str) -> Result<(), RpcError> {
        let key = |k: &str| format!("{prefix}{k}");
        if self.max_frame_size < rpc_codec::HEADER_LEN || self.max_frame_size > u32::MAX as usize {
            return Err(RpcError::config(
                key("max_frame_size"),
                format!("must be between {} and {}", rpc_codec::HEADER_LEN, u32::MAX),
            ));
        }
        if self.max_batch_bytes == 0 {
            return Err(RpcError::config(
                key("max_batch_bytes"),
                "must be at least 1",
            ));
        }
        if self.heartbeat_interval.is_zero() || self.idle_timeout.is_zero() {
            return Err(RpcError::config(
                key("heartbeat_interval_ms / idle_timeout_ms"),
                "must be greater than 0",
            ));
        }
        if self.read_buffer_min == 0 || self.read_buffer_min > self.read_buffer_max {
            return Err(RpcError::config(
                key("read_buffer_min"),
                "must be at least 1 and at most read_buffer_max",
            ));
        }
        Ok(())
    }
}

/// Byte counters shared by the connections of one endpoint (for metrics).
#[derive(Debug, Default)]
pub struct IoCounters {
    bytes_in: std::sync::atomic::AtomicU64,
    bytes_out: std::sync::atomic::AtomicU64,
}

impl IoCounters {
    /// Adds `n` bytes read.
    pub fn add_in(&self, n: u64) {
        self.bytes_in
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Adds `n` bytes written.
    pub fn add_out(&self, n: u64) {
        self.bytes_out
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Bytes read so far.
    pub fn bytes_in(&self) -> u64 {
        self.bytes_in.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes written so far.
    pub fn bytes_out(&self) -> u64 {
        self.bytes_out.load(std::sync::atomic::Ordering::Relaxed)
    }
}
