//! The streaming calls open on one client connection.
//!
//! A stream's request id is a slot of the connection's pending table, held
//! for the stream's whole life, so no unary call and no other stream can be
//! given the same id while its frames may still arrive. The table here maps
//! that id to the stream's two flows: the [`Inbox`] the reader task pushes
//! the server's items into, and — for client and bidirectional streams —
//! the [`Credit`] the server's grants add to.
//!
//! [`StreamLink`] is the connection as a [`StreamPeer`]: what the stream's
//! reader and sink send goes straight into the connection's write buffer
//! (past its bound: stream frames are bounded by credit, and a lost grant
//! would stall its stream). A broken connection ends every stream's flows
//! with its error.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use rpc_codec::{Frame, FrameKind, OutFrame};
use rpc_core::stream::{Credit, Inbox, StreamPeer};
use rpc_core::{Code, RpcError, Status};
use tracing::debug;

use crate::pending::PendingCalls;
use crate::FrameWriter;

/// One open stream's flows.
struct Flows {
    inbox: Arc<Inbox>,
    credit: Option<Arc<Credit>>,
}

/// The open streams of a connection.
#[derive(Default)]
pub(crate) struct OpenStreams {
    streams: Mutex<HashMap<u64, Flows>>,
}

impl std::fmt::Debug for OpenStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenStreams")
            .field("open", &self.len())
            .finish()
    }
}

/// A status for a local error, keeping its code (a local code never
/// travels: this one stays on this side).
pub(crate) fn local_status(err: &RpcError) -> Status {
    Status::new(err.code(), err.to_string())
}

impl OpenStreams {
    pub(crate) fn insert(&self, id: u64, inbox: Arc<Inbox>, credit: Option<Arc<Credit>>) {
        self.streams.lock().insert(id, Flows { inbox, credit });
    }

    /// Streams open.
    pub(crate) fn len(&self) -> usize {
        self.streams.lock().len()
    }

    /// Forgets stream `id`; its sender may send no more.
    fn remove(&self, id: u64) {
        let flows = self.streams.lock().remove(&id);
        if let Some(credit) = flows.and_then(|f| f.credit) {
            credit.stop(Status::new(Code::Cancelled, "the stream is over"));
        }
    }

    /// A stream frame from the server. Returns a frame to send back (a
    /// `Cancel` for items past their credit).
    pub(crate) fn on_frame(&self, frame: Frame) -> Option<OutFrame> {
        let id = frame.header.request_id;
        let streams = self.streams.lock();
        let Some(flows) = streams.get(&id) else {
            debug!(request_id = id, kind = ?frame.header.kind,
                "a frame for a stream that is no longer open: dropped");
            return None;
        };
        match frame.header.kind {
            FrameKind::StreamData => {
                if let Err(overrun) = flows.inbox.push(frame.body) {
                    if let Some(credit) = &flows.credit {
                        credit.stop(overrun);
                    }
                    return Some(OutFrame::control(FrameKind::Cancel, id));
                }
            }
            FrameKind::StreamEnd | FrameKind::StreamError => {
                flows.inbox.finish(frame.stream_end());
                // The server's end is the call's: nothing more goes to it.
                if let Some(credit) = &flows.credit {
                    credit.stop(Status::new(Code::Cancelled, "the call ended"));
                }
            }
            FrameKind::Credit => match (frame.credit(), &flows.credit) {
                (Ok(n), Some(credit)) => credit.grant(n),
                (Ok(_), None) => debug!(request_id = id, "credit for a stream that sends nothing"),
                (Err(e), _) => debug!(request_id = id, error = %e, "bad credit frame: ignored"),
            },
            FrameKind::Cancel => {
                if let Some(credit) = &flows.credit {
                    credit.stop(Status::new(
                        Code::Cancelled,
                        "the server stopped reading this stream",
                    ));
                }
            }
            _ => {}
        }
        None
    }

    /// The connection broke: every flow ends with `err`.
    pub(crate) fn fail_all(&self, err: &RpcError) {
        let status = local_status(err);
        for flows in self.streams.lock().values() {
            flows.inbox.finish(Err(status.clone()));
            if let Some(credit) = &flows.credit {
                credit.stop(status.clone());
            }
        }
    }
}

/// A client connection as the [`StreamPeer`] of its streams.
#[derive(Debug)]
pub(crate) struct StreamLink {
    pub(crate) writer: FrameWriter,
    pub(crate) streams: Arc<OpenStreams>,
    pub(crate) pending: Arc<PendingCalls>,
}

impl StreamLink {
    fn push(&self, frame: &OutFrame) -> Result<(), Status> {
        self.writer.push(frame).map_err(|e| local_status(&e))
    }
}

impl StreamPeer for StreamLink {
    fn send_item(&self, id: u64, serializer: u8, body: Bytes) -> Result<(), Status> {
        let frame = OutFrame::stream_data(id, serializer, body);
        // The client's only call: its items may be written through.
        let pushed = if self.pending.client_in_flight() == 1 {
            self.writer.push_alone(&frame)
        } else {
            self.writer.push(&frame)
        };
        pushed.map_err(|e| local_status(&e))
    }

    fn send_end(&self, id: u64, serializer: u8, end: Result<(), Status>) {
        let _ = self.push(&OutFrame::stream_end(id, serializer, &end));
    }

    fn send_credit(&self, id: u64, n: u32) {
        let _ = self.push(&OutFrame::credit(id, n));
    }

    fn receiver_gone(&self, id: u64, early: bool) {
        // The server's items are the call's answer: once nobody reads them
        // the call is over, and its id may go back to the table.
        if early {
            let _ = self.push(&OutFrame::control(FrameKind::Cancel, id));
        }
        self.streams.remove(id);
        self.pending.remove(id);
    }
}
