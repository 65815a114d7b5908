//! # rpc-transport: frames over TCP and Unix domain sockets
//!
//! This crate moves frames between two peers and nothing else. It owns:
//!
//! - [`addr`]: which addresses name TCP (`host:port`) and which a Unix
//!   socket (`unix:/path`), and binding the latter;
//! - [`FrameReader`]: reads frames through an [`AdaptiveReadBuffer`] that grows
//!   under load and shrinks when idle (a fixed read size dips at large
//!   payloads); reads a large frame into an allocation of its
//!   own, reserved from a [`FrameBudget`]; announces an over-size frame as
//!   [`Inbound::TooLarge`] and skips its bytes, so it costs one call, not the
//!   connection;
//! - [`ReadNow`]: a non-blocking read of a plain socket that does not wait
//!   for the runtime to see it readable, and [`BusyPoll`], which uses it:
//!   a connection whose peer answers fast polls for its next frame for a
//!   moment instead of parking (server and client side);
//! - [`WriteNow`]: a plain socket's descriptor ([`RawSocket`]), which a
//!   thread outside the runtime (a server's pool worker) writes with a
//!   non-blocking `send`;
//! - [`FrameWriter`]: a connection's write buffer, which callers encode their
//!   frames into, and the writer task that writes everything queued with one
//!   `write`, acknowledging `WriteMode::Sync` callers once their bytes are out.
//!   This is the client side's writer (many caller tasks share a connection);
//!   a server connection has one producer and coalesces its own answers (see
//!   rpc-server's `reply` module), using [`FrameReader`] and the budget from here;
//! - [`Connection`]: the client side of a multiplexed connection — a pending
//!   table whose slots the request ids name, taken *before* the write, completed
//!   by the reader, failed all at once when the connection breaks;
//! - `pending`: the calls waiting on a connection and the one timer per
//!   connection that times them out (no timer per call);
//! - `streams`: the streaming calls open on a client connection, routed by
//!   id, and the connection as their `StreamPeer`;
//! - [`heartbeat`]: ping/pong and the idle timeout that closes dead peers;
//! - `tls` (feature `tls`): rustls handshakes; a TLS stream is split with
//!   `tokio::io::split`, plain TCP keeps `into_split`.
//!
//! It knows nothing of services, handlers, pools or load balancing: `rpc-server`
//! and `rpc-client` build those on top.

#![warn(missing_docs)]

pub mod addr;
pub mod allocator;
pub mod budget;
pub mod busy_poll;
pub mod close;
pub mod config;
pub mod connection;
pub mod heartbeat;
mod pending;
pub mod read_buffer;
pub mod read_now;
pub mod reader;
mod streams;
#[cfg(feature = "tls")]
pub mod tls;
pub mod write_now;
pub mod writer;

pub use budget::{FrameBudget, Reserved};
pub use busy_poll::{BusyPoll, PollGroup};
pub use close::CloseSignal;
pub use config::{ClientTransport, IoCounters, TransportConfig};
pub use connection::{
    connect, Connection, OpenStream, PendingCall, SendSpec, Started, StreamSpec, WriteWait,
};
pub use pending::CallsInFlight;
pub use read_buffer::AdaptiveReadBuffer;
pub use read_now::ReadNow;
pub use reader::{FrameReader, Inbound};
pub use write_now::{RawSocket, WriteNow};
pub use writer::{FrameWriter, Offer, WriteAck};
