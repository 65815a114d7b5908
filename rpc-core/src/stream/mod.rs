//! Streams: the halves of a streaming call and the credit that bounds them.
//!
//! A streaming call is one request id on a multiplexed connection with up to
//! two flows of items: the caller's (client and bidirectional streams) and
//! the handler's (server and bidirectional streams). Each flow has a sender
//! and a receiver, on opposite sides of the connection, and the same four
//! pieces on both sides, which is why they live here and not in the client
//! or the server:
//!
//! - [`Inbox`]: the items of one flow that arrived and were not read yet,
//!   and how the flow ended. The connection's reader pushes into it.
//! - [`RawStreaming`]: the receiver's `Stream` of serialized items over an
//!   inbox. Reading an item earns the sender credit back.
//! - [`Credit`] and [`StreamSink`]: the sender's side. Every item takes one
//!   unit of credit first; credit comes only from the receiver.
//! - [`StreamPeer`]: how either end puts its frames on its connection — the
//!   client's write buffer, or a server connection's stream queue.
//!
//! # Flow control
//!
//! The receiver grants `window` items when the stream opens and gives credit
//! back as its reader consumes, in batches of half a window, so a sender is
//! at most `window` items ahead of its reader: the items buffered for one
//! flow, on both sides and in between, never exceed the window, whatever the
//! speeds. A sender without credit waits (asynchronously, on its own task);
//! a peer that sends past its credit ends that stream with an error instead
//! of growing memory. That a consumer that stops reading stalls exactly its
//! producer and nothing else on the connection follows from the same rule.
//!
//! # Ends
//!
//! A flow ends once: with an end (`Ok`), an error status, or because its
//! receiver went away (dropped early, deadline passed: the sender's credit is
//! stopped with the reason, and the peer told). Whatever ends it first
//! decides; later news is ignored.

mod credit;
mod inbox;
mod receiver;

use bytes::Bytes;

use crate::Status;

pub use credit::{Credit, StreamSink};
pub use inbox::Inbox;
pub use receiver::RawStreaming;

/// The flow window in items when none is configured: at 1 KiB items,
/// 256 KiB in flight per stream (HTTP/2 under tonic allows 1–2 MiB). With
/// 64 items a 100-item stream of 1 KiB waited once for credit mid-way, a
/// round trip that cost a third of its messages/s on loopback
/// (BENCHMARKS.md, streaming); 256 lets a short stream go out whole while
/// a hundred stalled streams of 1 KiB items still hold only 25 MiB.
pub const DEFAULT_WINDOW: u32 = 256;

/// A server's stream settings (`[streams]` in its config file).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamConfig {
    /// Items of a caller's flow the server takes before its handler reads
    /// any: what one client stream may have in flight (256).
    pub window: u32,
    /// Streams one connection may have open at once; one more is answered
    /// `ServerBusy` (1024). Open streams also count against
    /// `max_in_flight_per_connection`. With the window, this bounds what a
    /// connection's streams hold: `max_per_connection × window` items.
    pub max_per_connection: usize,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            window: DEFAULT_WINDOW,
            max_per_connection: 1024,
        }
    }
}

/// How one end of a streaming call reaches its connection.
///
/// Implemented by the client's connection (frames go into its write buffer)
/// and by a server connection (frames go into the queue its task writes
/// from). Nothing here waits: data frames are only sent with credit in hand,
/// so what is queued is bounded by the windows, and control frames are
/// bounded by the data they answer.
pub trait StreamPeer: Send + Sync + 'static {
    /// Queues one item of stream `id`, encoded in serializer `serializer`.
    /// An error means the connection is gone.
    fn send_item(&self, id: u64, serializer: u8, body: Bytes) -> Result<(), Status>;

    /// Ends this side's flow of stream `id`: `Ok` is a clean end, an error
    /// travels as its status.
    fn send_end(&self, id: u64, serializer: u8, end: Result<(), Status>);

    /// Gives the other side `n` more items of credit on stream `id`.
    fn send_credit(&self, id: u64, n: u32);

    /// The receiver of stream `id` on this side is gone: `early` when it
    /// went before the flow ended (the other side is told to stop sending),
    /// not when it read to the end.
    fn receiver_gone(&self, id: u64, early: bool);
}

#[cfg(test)]
mod tests;
