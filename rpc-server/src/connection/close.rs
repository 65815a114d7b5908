//! The end of a connection, once its serving loop has left: the streams
//! ended, the last answers and the goodbye frame written, then a lingering
//! close — and why it closed ([`CloseReason`]), for the log line.
//!
//! # Invariants
//!
//! - Answers already encoded still go out (good frames before a bad one, the
//!   last answers of a graceful stop), unless the server is forced down,
//!   and for at most 5 s.
//! - No worker writes behind the goodbye: the socket came back from the
//!   workers when the loop left (`PoolSide::take_back`) and is not lent
//!   again; the pooled answers are taken once more here and closed, so an
//!   answer of a call still running is dropped, not written. (That no
//!   worker touches the socket after its halves drop, however the task
//!   ends, is `pool_side`'s drop order, not this.)
//! - The goodbye — a connection-level "not run" — is the last frame, after
//!   every answer: nothing the client still has pending then is a call
//!   the server ran (the caller decides whether there is one: never after
//!   abandoned calls, which may have run).
//! - Closing a socket with unread input makes the kernel send a reset,
//!   which can destroy answers the client has not read yet: so the write
//!   side is shut first and what the client still sends is read and
//!   dropped, for at most a second (requests read then are not run; their
//!   callers get the close as their error).

use std::borrow::Cow;
use std::time::Duration;

use rpc_codec::{OutFrame, CONNECTION_REQUEST_ID};
use rpc_core::RpcError;
use rpc_transport::FrameReader;
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::debug;

use crate::ctx::ServerCtx;
use crate::reply::{Outbox, PoolAnswers};
use crate::stream::ConnStreams;

/// Why a connection closes when the server is forced down.
pub(super) const FORCED_CLOSE: &str = "server shut down before this connection's calls finished";

/// Why a connection's serving loop ended: the first reason given is kept,
/// for the log line at its end. Only the connection's own task ends it, and
/// it leaves the loop at once, so nothing needs to wait for this.
#[derive(Default)]
pub(super) struct CloseReason(Option<Cow<'static, str>>);

impl CloseReason {
    pub(super) fn set(&mut self, reason: impl Into<Cow<'static, str>>) {
        if self.0.is_none() {
            self.0 = Some(reason.into());
        }
    }

    fn reason(&self) -> &str {
        self.0.as_deref().unwrap_or("open")
    }
}

/// What a connection whose loop has ended still has to see to (see the
/// module docs). Its calls are settled already: the live ones cancelled,
/// the direct ones dropped.
pub(super) struct Closing<'c, R, W> {
    pub(super) ctx: &'c ServerCtx,
    pub(super) peer: &'c str,
    pub(super) outbox: &'c mut Outbox<W>,
    pub(super) reader: &'c mut FrameReader<R>,
    pub(super) streams: &'c mut ConnStreams,
    /// Where the workers put the connection's answers, if it called on the
    /// pool.
    pub(super) pooled: Option<&'c PoolAnswers>,
    /// The connection-level error sent last, if any.
    pub(super) goodbye: Option<RpcError>,
}

impl<R, W> Closing<'_, R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    /// Ends the streams, writes what is left and closes lingering; logs
    /// `close`'s reason.
    pub(super) async fn finish(self, close: &mut CloseReason) {
        let (ctx, peer) = (self.ctx, self.peer);
        // Streams too; what they queued before still goes out.
        self.streams.drain_into(self.outbox);
        self.streams.close_all("the connection closed");
        // One last turn of the streams' runs: each sees its call given up and
        // ends it as cancelled (counted, traced), as a task of its own would.
        self.streams.run_woken().await;
        if let Some(pooled) = self.pooled {
            self.outbox.take_pooled(pooled);
            // Answers of calls still running have nobody to go to.
            pooled.close();
        }
        if let Some(error) = &self.goodbye {
            self.outbox
                .push(OutFrame::error(CONNECTION_REQUEST_ID, 0, error));
        }
        let written = tokio::select! {
            biased;
            _ = ctx.stop.forced() => {
                close.set("server shut down");
                false
            }
            r = self.outbox.finish() => match r {
                Ok(()) => true,
                Err(e) => {
                    debug!(%peer, error = %e, "answers not written at close");
                    false
                }
            },
            _ = tokio::time::sleep(Duration::from_secs(5)) => {
                close.set("answers not written within 5 s of closing");
                false
            }
        };
        if written {
            // The lingering close (see the module docs). Frames read here
            // are dropped at once: they take no budget.
            self.reader.leave_budget();
            let drain = async { while let Ok(Some(_)) = self.reader.next().await {} };
            tokio::select! {
                _ = drain => {}
                _ = ctx.stop.forced() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
        close.set("connection finished");
        debug!(%peer, reason = close.reason(), "connection closed");
    }
}
