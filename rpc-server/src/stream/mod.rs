//! Streaming calls on the server: the streams open on one connection, the
//! queue their frames go out through, and how each runs.
//!
//! - [`ConnStreams`] (here): a connection task's table of its open streams,
//!   by request id — each stream's cancellation, the credit its handler
//!   sends within, the inbox of its caller's items, and the stream's run
//!   itself. The connection task routes every stream frame it reads
//!   through it.
//! - [`out`]: `StreamOut`, the queue from the streams' handlers to the
//!   connection's outbox, which writes their frames with its other answers.
//! - [`run`]: one stream's run — interceptors, handler, deadline, end.
//! - `local`: a flow read in this process (the HTTP gateway's streams).
//!
//! # Streams run on their connection's task
//!
//! A stream's run is a future the connection task polls itself (a
//! `FuturesUnordered` in the table), whatever the dispatch mode; there is
//! no task per stream. An item read is handled, and its answer queued, in
//! the same turn of the connection task that read it, and written with
//! that turn's other answers: a ping-pong round trip costs the server no
//! wake-up of another task and no hop between runtime threads, and
//! callers' answers share one `write`. Each poll of a handler is bounded:
//! it sends at most its credit before it waits. What this asks of a
//! handler is what tokio asks of any task — await, do not block; a handler
//! that must block or compute for long does it in
//! `tokio::task::spawn_blocking`, or it holds up its connection's other
//! calls for that long.
//!
//! # Bounds
//!
//! A connection opens at most `streams.max_per_connection` streams; each
//! of its callers' flows holds at most `streams.window` items here, and
//! each handler's flow is at most the caller's window ahead of its reader.
//! A caller that sends past its credit has that stream ended with an error;
//! the connection and its other calls go on.

#[cfg(feature = "http")]
mod local;
mod out;
mod run;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use rpc_codec::{Frame, FrameKind, OutFrame};
use rpc_core::stream::{Credit, Inbox, StreamConfig, StreamPeer};
use rpc_core::{
    CancelSignal, Code, RawStreaming, RpcError, RpcRequest, Status, StreamIo, StreamSink,
};
use tokio::io::AsyncWrite;
use tracing::debug;

use crate::ctx::ServerCtx;
use crate::reply::Outbox;
use crate::router::Route;

#[cfg(feature = "http")]
pub(crate) use local::LocalFlow;
pub(crate) use out::StreamOut;
pub(crate) use run::run_stream;

/// One open stream, as its connection knows it.
struct Open {
    cancel: CancelSignal,
    /// What its handler may still send.
    credit: Arc<Credit>,
    /// Its caller's items (client and bidirectional streams).
    inbox: Option<Arc<Inbox>>,
}

/// The streams open on one connection: nothing at all (one pointer in the
/// connection's future) until its first stream opens, because most
/// connections never stream and an idle connection's memory is mostly its
/// task.
#[derive(Default)]
pub(crate) struct ConnStreams(Option<Box<Table>>);

/// The table of a connection that has opened a stream.
struct Table {
    open: HashMap<u64, Open>,
    out: Arc<StreamOut>,
    config: StreamConfig,
    /// Frames taken from the queue and not yet in the outbox: they wait
    /// while the outbox is past its high-water mark, so that the
    /// connection goes on reading (and answering) unary calls beside a
    /// stream that never waits.
    backlog: VecDeque<OutFrame>,
    /// The streams' runs, polled by the connection task itself: each ends
    /// once its stream has, after queueing its end and its id in `out`.
    runs: FuturesUnordered<BoxFuture<'static, ()>>,
    /// Emptied buffers, reused every turn.
    frames: Vec<OutFrame>,
    ended: Vec<u64>,
}

impl ConnStreams {
    /// Streams open.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |t| t.open.len())
    }

    /// Starts `req` as a stream on `route`; it first runs at the next
    /// [`poll_streams`](Self::poll_streams). An error (too many streams) is
    /// for the caller to answer.
    pub fn start(
        &mut self,
        ctx: &Arc<ServerCtx>,
        route: Route,
        req: RpcRequest,
        serializer: u8,
    ) -> Result<(), RpcError> {
        let table = self.0.get_or_insert_with(|| {
            Box::new(Table {
                open: HashMap::new(),
                out: Arc::new(StreamOut::default()),
                config: ctx.config.streams.clone(),
                backlog: VecDeque::new(),
                frames: Vec::new(),
                ended: Vec::new(),
                runs: FuturesUnordered::new(),
            })
        });
        table.start(ctx, route, req, serializer)
    }

    /// A stream frame from the caller (data, end, error, credit); dropped
    /// when it names no open stream.
    pub fn on_frame(&mut self, frame: Frame) {
        match &mut self.0 {
            Some(table) => table.on_frame(frame),
            None => debug!(request_id = frame.header.request_id, kind = ?frame.header.kind,
                "a frame for a stream that is not open: dropped"),
        }
    }

    /// The caller's `Cancel`: true when it named an open stream, which is
    /// given up (its handler dropped, nothing more sent).
    pub fn cancel(&mut self, id: u64) -> bool {
        self.0.as_mut().is_some_and(|t| t.cancel(id))
    }

    /// Whether no stream is open and no stream frame waits to be written:
    /// the connection need not look here.
    pub fn is_idle(&self) -> bool {
        self.0.as_ref().is_none_or(|t| t.is_idle())
    }

    /// Runs the streams' handlers that were woken (on the calling task,
    /// which they wake again when they can go on), then is ready when
    /// frames wait to be moved into the outbox — in the backlog (at once)
    /// or newly queued — or a stream has ended.
    pub fn poll_streams(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.0
            .as_mut()
            .map_or(Poll::Pending, |t| t.poll_streams(cx))
    }

    /// Runs the streams' handlers that were woken, now, on the calling task
    /// (see [`poll_streams`](Self::poll_streams)); what they queue is left
    /// for [`write_into`](Self::write_into).
    pub async fn run_woken(&mut self) {
        std::future::poll_fn(|cx| {
            let _ = self.poll_streams(cx);
            Poll::Ready(())
        })
        .await
    }

    /// Moves the frames the streams queued into `outbox` while it has room
    /// (the rest wait, in order, for the next turn), and forgets the streams
    /// that ended.
    pub fn write_into<W: AsyncWrite + Unpin>(&mut self, outbox: &mut Outbox<W>) {
        if let Some(table) = &mut self.0 {
            table.write_into(outbox);
        }
    }

    /// Moves every frame the streams queued into `outbox`, room or not
    /// (the connection is closing: what was sent before goes out).
    pub fn drain_into<W: AsyncWrite + Unpin>(&mut self, outbox: &mut Outbox<W>) {
        if let Some(table) = &mut self.0 {
            table.drain_into(outbox);
        }
    }

    /// Lets the table go when no stream is open and nothing waits to be
    /// written (an idle connection's tidy); the next stream makes a new one.
    pub fn release(&mut self) {
        if self.is_idle() {
            self.0 = None;
        }
    }

    /// The connection is closing: every stream is given up and its flows
    /// end with `why`; nothing more is queued.
    pub fn close_all(&mut self, why: &str) {
        if let Some(table) = &mut self.0 {
            table.close_all(why);
        }
    }
}

impl Table {
    fn start(
        &mut self,
        ctx: &Arc<ServerCtx>,
        route: Route,
        req: RpcRequest,
        serializer: u8,
    ) -> Result<(), RpcError> {
        if self.open.len() >= self.config.max_per_connection {
            return Err(RpcError::ServerBusy(format!(
                "{} streams open on this connection (streams.max_per_connection)",
                self.open.len()
            )));
        }
        let id = req.cx.request_id();
        if self.open.contains_key(&id) {
            return Err(RpcError::Status(Status::new(
                Code::BadRequest,
                format!("stream {id} is already open on this connection"),
            )));
        }
        let peer: Arc<dyn StreamPeer> = self.out.clone();
        let inbox = route
            .kind
            .client_streams()
            .then(|| Arc::new(Inbox::new(self.config.window)));
        let incoming = inbox
            .as_ref()
            .map(|inbox| RawStreaming::new(id, inbox.clone(), peer.clone()));
        if let Some(inbox) = &inbox {
            peer.send_credit(id, inbox.window());
        }
        let credit = Credit::new();
        let io = StreamIo {
            incoming,
            out: StreamSink::new(id, serializer, credit.clone(), peer.clone()),
        };
        self.open.insert(
            id,
            Open {
                cancel: req.cx.cancellation().clone(),
                credit,
                inbox,
            },
        );
        let ctx = ctx.clone();
        let out = self.out.clone();
        self.runs.push(Box::pin(async move {
            run_stream(ctx, route, req, io, peer, serializer).await;
            out.ended(id);
        }));
        Ok(())
    }

    /// A stream frame from the caller (data, end, error, credit). Items
    /// past their credit end that flow with an error and the caller is told
    /// to stop.
    fn on_frame(&mut self, frame: Frame) {
        let id = frame.header.request_id;
        let Some(open) = self.open.get(&id) else {
            debug!(request_id = id, kind = ?frame.header.kind,
                "a frame for a stream that is not open: dropped");
            return;
        };
        match frame.header.kind {
            FrameKind::Credit => match frame.credit() {
                Ok(n) => open.credit.grant(n),
                Err(e) => debug!(request_id = id, error = %e, "bad credit frame: ignored"),
            },
            FrameKind::StreamData => match &open.inbox {
                Some(inbox) => {
                    if inbox.push(frame.body).is_err() {
                        let _ = self
                            .out
                            .push_frame(OutFrame::control(FrameKind::Cancel, id));
                    }
                }
                None => debug!(
                    request_id = id,
                    "an item for a stream that takes none: dropped"
                ),
            },
            FrameKind::StreamEnd | FrameKind::StreamError => {
                if let Some(inbox) = &open.inbox {
                    inbox.finish(frame.stream_end());
                }
            }
            _ => {}
        }
    }

    /// The caller's `Cancel`: true when it named an open stream, which is
    /// given up (its handler dropped, nothing more sent).
    fn cancel(&mut self, id: u64) -> bool {
        let Some(open) = self.open.get(&id) else {
            return false;
        };
        if open.cancel.give_up() {
            let gone = Status::new(Code::Cancelled, "the caller cancelled the stream");
            open.credit.stop(gone.clone());
            if let Some(inbox) = &open.inbox {
                inbox.finish(Err(gone));
            }
        }
        true
    }

    /// Whether no stream is open and no stream frame waits to be written:
    /// the connection need not look here.
    fn is_idle(&self) -> bool {
        self.open.is_empty() && self.backlog.is_empty() && self.runs.is_empty()
    }

    /// See [`ConnStreams::poll_streams`].
    fn poll_streams(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // `Ready(Some)`: a run ended (its id is in `out`), and the loop
        // polls the others woken. `Ready(None)`: none left.
        while let Poll::Ready(Some(())) = self.runs.poll_next_unpin(cx) {}
        if !self.backlog.is_empty() {
            return Poll::Ready(());
        }
        self.out.poll_news(cx)
    }

    /// Moves the frames the streams queued into `outbox` while it has room
    /// (the rest wait, in order, for the next turn), and forgets the streams
    /// that ended.
    fn write_into<W: AsyncWrite + Unpin>(&mut self, outbox: &mut Outbox<W>) {
        self.out.take(&mut self.frames, &mut self.ended);
        self.backlog.extend(self.frames.drain(..));
        while outbox.has_room() {
            match self.backlog.pop_front() {
                Some(frame) => outbox.push(frame),
                None => break,
            }
        }
        for id in self.ended.drain(..) {
            self.open.remove(&id);
        }
    }

    /// Moves every frame the streams queued into `outbox`, room or not
    /// (the connection is closing: what was sent before goes out).
    fn drain_into<W: AsyncWrite + Unpin>(&mut self, outbox: &mut Outbox<W>) {
        self.out.take(&mut self.frames, &mut self.ended);
        self.backlog.extend(self.frames.drain(..));
        for frame in self.backlog.drain(..) {
            outbox.push(frame);
        }
    }

    /// The connection is closing: every stream is given up and its flows
    /// end with `why`; nothing more is queued.
    fn close_all(&mut self, why: &str) {
        let gone = Status::new(Code::Cancelled, why.to_owned());
        for open in self.open.values() {
            open.cancel.give_up();
            open.credit.stop(gone.clone());
            if let Some(inbox) = &open.inbox {
                inbox.finish(Err(gone.clone()));
            }
        }
        self.out.close();
    }
}
