//! Streaming calls on the server: the streams open on one connection, the
//! queue their frames go out through, and the task each runs on.
//!
//! - [`ConnStreams`] (here): a connection task's table of its open streams,
//!   by request id — each stream's cancellation, the credit its handler
//!   sends within, and the inbox of its caller's items. The connection task
//!   routes every stream frame it reads through it.
//! - [`out`]: `StreamOut`, the queue from the streams' tasks to the
//!   connection task, which writes their frames with its other answers.
//! - [`run`]: one stream's task — interceptors, handler, deadline, end.
//! - [`local`]: a flow read in this process (the HTTP gateway's streams).
//!
//! # Answers that share a write
//!
//! When the connection task has handed the handlers items that are not
//! answered yet, it lets their tasks run before it writes
//! (`ConnStreams::gather_answers`): ping-pong callers' answers then share
//! one `write` instead of taking one each. A stream that only sends never
//! waits; one that only receives waits at most once per credit grant it
//! sends.
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
    /// Emptied buffers, reused every turn.
    frames: Vec<OutFrame>,
    ended: Vec<u64>,
    /// Items handed to the handlers and not yet matched by a frame taken
    /// from their queue (see [`ConnStreams::gather_answers`]). Any frame
    /// counts — a credit grant, an end — so it errs towards waiting less.
    fed: usize,
}

impl ConnStreams {
    /// Streams open.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |t| t.open.len())
    }

    /// Starts `req` as a stream on `route`, on a task of its own. An error
    /// (too many streams) is for the caller to answer.
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
                fed: 0,
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

    /// Ready when frames wait to be moved into the outbox — in the backlog
    /// (at once) or newly queued — or a stream has ended.
    pub fn poll_news(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_ref().map_or(Poll::Pending, |t| t.poll_news(cx))
    }

    /// Before the connection writes the streams' frames: when two or more
    /// items handed to the handlers are unanswered and fewer frames than
    /// that are queued (ping-pong callers, each answering its item; or one
    /// caller pipelining items), lets those handlers' tasks run first — one
    /// `yield` — so that their answers leave in one `write`, not one each.
    /// The yield is tokio's: the connection runs again once its thread has
    /// run the other tasks ready there and polled the I/O driver, so its
    /// reads, pool answers, timer and stop signals wait that long. A yield
    /// after which nothing new was queued shows handlers that do not
    /// answer item by item; the count starts again from the next items.
    pub async fn gather_answers(&mut self) {
        let Some(table) = self.0.as_mut() else {
            return;
        };
        if table.fed < 2 {
            return;
        }
        let queued = table.out.queued();
        if queued < table.fed {
            tokio::task::yield_now().await;
            if table.out.queued() == queued {
                table.fed = 0;
            }
        }
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
        tokio::spawn(async move {
            run_stream(ctx, route, req, io, peer, serializer).await;
            out.ended(id);
        });
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
                    self.fed += 1;
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
        self.open.is_empty() && self.backlog.is_empty()
    }

    /// Ready when frames wait to be moved into the outbox — in the backlog
    /// (at once) or newly queued — or a stream has ended.
    fn poll_news(&self, cx: &mut Context<'_>) -> Poll<()> {
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
        self.fed = self.fed.saturating_sub(self.frames.len());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection's table with `fed` items handed out and nothing open.
    fn table(fed: usize) -> (ConnStreams, Arc<StreamOut>) {
        let out = Arc::new(StreamOut::default());
        let table = Table {
            open: HashMap::new(),
            out: out.clone(),
            config: StreamConfig::default(),
            backlog: VecDeque::new(),
            frames: Vec::new(),
            ended: Vec::new(),
            fed,
        };
        (ConnStreams(Some(Box::new(table))), out)
    }

    fn fed(streams: &ConnStreams) -> usize {
        streams.0.as_ref().map_or(0, |t| t.fed)
    }

    /// Pushes `n` answers when it first runs: a handler task woken with an item.
    fn answers(out: &Arc<StreamOut>, n: u64) {
        let out = out.clone();
        tokio::spawn(async move {
            for id in 0..n {
                out.send_item(id, 1, bytes::Bytes::from_static(b"pong"))
                    .unwrap();
            }
        });
    }

    #[tokio::test(flavor = "current_thread")]
    async fn answers_of_several_streams_are_gathered_before_the_write() {
        let (mut streams, out) = table(3);
        out.send_item(9, 1, bytes::Bytes::from_static(b"first"))
            .unwrap();
        answers(&out, 2);
        streams.gather_answers().await;
        assert_eq!(out.queued(), 3, "the handlers' tasks ran before the write");
        assert_eq!(fed(&streams), 3, "still counted until written");
    }

    /// A caller's item, as the connection reads it.
    fn item(id: u64) -> Frame {
        use tokio_util::codec::{Decoder, Encoder};
        let mut codec = rpc_codec::FrameCodec::default();
        let mut buf = bytes::BytesMut::new();
        codec
            .encode(
                OutFrame::stream_data(id, 1, bytes::Bytes::from_static(b"ping")),
                &mut buf,
            )
            .unwrap();
        codec.decode(&mut buf).unwrap().unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn items_read_are_counted_until_their_answers_are_taken() {
        let (mut streams, out) = table(0);
        let table = streams.0.as_mut().unwrap();
        for id in [1, 2] {
            let open = Open {
                cancel: CancelSignal::default(),
                credit: Credit::new(),
                inbox: Some(Arc::new(Inbox::new(8))),
            };
            table.open.insert(id, open);
        }
        streams.on_frame(item(1));
        streams.on_frame(item(2));
        streams.on_frame(item(3)); // no such stream: not counted
        assert_eq!(fed(&streams), 2);
        // One handler has answered; the other is woken and answers when it runs.
        out.send_item(1, 1, bytes::Bytes::from_static(b"pong"))
            .unwrap();
        answers(&out, 1);
        streams.gather_answers().await;
        assert_eq!(out.queued(), 2, "the second answer was waited for");
        let transport = rpc_transport::TransportConfig::default();
        let counters = Arc::new(rpc_transport::IoCounters::default());
        let mut outbox = Outbox::new(Vec::<u8>::new(), &transport, counters);
        streams.write_into(&mut outbox);
        assert_eq!(fed(&streams), 0, "both answers taken");
        assert_eq!(out.queued(), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn one_item_or_all_answers_in_hand_write_at_once() {
        for (items, queued) in [(1, 0), (2, 2)] {
            let (mut streams, out) = table(items);
            for id in 0..queued {
                out.send_item(id, 1, bytes::Bytes::from_static(b"in hand"))
                    .unwrap();
            }
            answers(&out, 1);
            streams.gather_answers().await;
            assert_eq!(
                out.queued(),
                queued as usize,
                "no yield: the task did not run"
            );
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn handlers_that_do_not_answer_each_item_stop_the_waiting() {
        let (mut streams, out) = table(5);
        out.send_credit(1, 32);
        streams.gather_answers().await;
        assert_eq!(fed(&streams), 0, "nothing came during the yield");
        // And nothing is waited for until new items come...
        answers(&out, 1);
        streams.gather_answers().await;
        assert_eq!(out.queued(), 1);
        // ...but then it is again.
        streams.0.as_mut().unwrap().fed = 2;
        streams.gather_answers().await;
        assert_eq!(out.queued(), 2, "the woken handler ran first");
    }
}
