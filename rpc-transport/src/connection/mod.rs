//! [`Connection`]: the client side of one multiplexed connection (TCP or a
//! Unix domain socket, either one plain or under TLS).
//!
//! Many calls share one connection. Each call takes a slot in the pending table
//! **before** its frame is queued (a local server can answer before the write
//! call even returns) — the slot's request id goes on the wire — encodes the
//! frame into the [`FrameWriter`]'s buffer, and waits for the reader task to
//! complete the slot with the response carrying its id. A response whose id is
//! not pending (the call timed out or was cancelled) is dropped with a log line.
//!
//! Deadlines are kept in the pending table and enforced by one sweeper task per
//! connection (no timer per call); an expired slot is removed and its call fails
//! with `Timeout`, so nothing accumulates. When the connection breaks — read
//! error, write error, peer close, idle timeout, `close()` — the [`CloseSignal`]
//! records why and the reader fails every pending call at once with that reason. A call that registers while
//! the connection is closing sees the signal right after registering and fails
//! too, so no call can be left pending forever.
//!
//! A failed call says whether its request may have reached the server: calls
//! whose frame was still in the write buffer (or never got there) fail with
//! `NotSent`, which any caller may retry; calls whose frame was written fail
//! with `ConnectionClosed`, which only an idempotent call should retry. An
//! answer too large for this side's `max_frame_size` fails its one call with
//! `FrameTooLarge` and is skipped; the connection goes on.
//!
//! Request ids start at 1, so id 0 never names a call: a response with id 0 and
//! an error status is the server speaking about the whole connection (it
//! refused it at a connection limit, say) just before it closes it. The reader
//! closes the connection with that error ([`CloseSignal::close_with`]), and every
//! call pending on it, or started on it afterwards, fails with that error —
//! `TooManyConnections`, not a `ConnectionClosed` that looks like a crash.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use rpc_codec::{Frame, OutFrame};
use rpc_core::{RpcError, WriteMode};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::heartbeat::{self, Activity};
use crate::pending::{self, PendingCalls};
use crate::streams::{OpenStreams, StreamLink};
use crate::writer::Offer;
use crate::{ClientTransport, CloseSignal, FrameReader, FrameWriter, ReadNow};
use rpc_core::stream::{Credit, Inbox, RawStreaming, StreamPeer, StreamSink};

/// State shared by a connection's handle and its reader task.
#[derive(Debug)]
struct Shared {
    peer: Arc<str>,
    pending: Arc<PendingCalls>,
    streams: Arc<OpenStreams>,
    close: Arc<CloseSignal>,
    /// Frames the reader's busy poll read from the socket itself.
    busy_poll_reads: AtomicU64,
    /// Frames that arrived while the reader was polling for them.
    busy_polled_frames: AtomicU64,
    /// Polling turns, with no call in flight, that offered the core.
    busy_poll_core_offers: AtomicU64,
}

impl Shared {
    /// No call waits for an answer here and no stream is open (two locks:
    /// only while busy-polling).
    fn waits_for_nothing(&self) -> bool {
        self.pending.len() == 0 && self.streams.len() == 0
    }

    /// Fails every pending call with the close reason: `NotSent` for the
    /// requests `writer` never wrote (stopping it for good), the close error
    /// for the rest.
    fn fail_all(&self, writer: &FrameWriter) {
        let unsent = writer.stop_unsent();
        if !unsent.is_empty() {
            let not_sent = self.not_sent();
            for id in unsent {
                self.pending.complete(id, Err(not_sent.clone()));
            }
        }
        let err = self.close.error(&self.peer);
        self.pending.fail_all(&err);
        self.streams.fail_all(&err);
    }

    /// The error of a call that found the connection closed before it was
    /// queued: the error the server closed it with, if it sent one, else
    /// `NotSent`.
    fn not_sent(&self) -> RpcError {
        self.close.not_sent_error(&self.peer, || {
            format!("the connection closed ({})", self.close.reason())
        })
    }
}

/// A multiplexed client connection. Dropping the last handle closes it.
#[derive(Debug)]
pub struct Connection {
    shared: Arc<Shared>,
    writer: FrameWriter,
    /// This connection as its streams' peer.
    link: Arc<StreamLink>,
    max_frame_size: usize,
}

impl Connection {
    /// Wraps an already connected stream (spawns its reader, writer and heartbeat).
    pub fn from_stream(
        stream: TcpStream,
        client: &ClientTransport,
    ) -> Result<Arc<Connection>, RpcError> {
        let peer: Arc<str> = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "unknown peer".into())
            .into();
        stream
            .set_nodelay(client.shared.nodelay)
            .map_err(|e| RpcError::io(format!("setting TCP_NODELAY on {peer}"), e))?;
        let (read_half, write_half) = stream.into_split();
        Ok(Connection::from_halves(read_half, write_half, peer, client))
    }

    /// Wraps the two halves of a connected stream: a TCP or Unix socket's
    /// `into_split` halves (which the busy poll can read at once), or any
    /// stream split with `tokio::io::split` (a TLS stream, say); `peer`
    /// names the other end in errors and logs.
    pub fn from_halves<R, W>(
        read_half: R,
        write_half: W,
        peer: Arc<str>,
        client: &ClientTransport,
    ) -> Arc<Connection>
    where
        R: AsyncRead + ReadNow + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let config = &client.shared;
        let close = Arc::new(CloseSignal::new());
        let writer = FrameWriter::spawn(
            write_half,
            config,
            client.write_queue_capacity,
            close.clone(),
            peer.clone(),
        );
        let pending = Arc::new(PendingCalls::counted_in(client.in_flight.clone()));
        pending::spawn_sweeper(pending.clone(), close.clone());
        let streams = Arc::new(OpenStreams::default());
        let link = Arc::new(StreamLink {
            writer: writer.clone(),
            streams: streams.clone(),
            pending: pending.clone(),
        });
        let shared = Arc::new(Shared {
            peer,
            pending,
            streams,
            close: close.clone(),
            busy_poll_reads: AtomicU64::new(0),
            busy_polled_frames: AtomicU64::new(0),
            busy_poll_core_offers: AtomicU64::new(0),
        });
        let activity = Arc::new(Activity::default());
        let reader = FrameReader::new(
            read_half,
            config.max_frame_size,
            config.read_buffer_min,
            config.read_buffer_max,
        )
        .with_activity(activity.clone());
        tokio::spawn(read_loop(
            shared.clone(),
            reader,
            writer.clone(),
            client.busy_poll,
        ));
        heartbeat::spawn(
            activity,
            config.heartbeat_interval,
            config.idle_timeout,
            writer.clone(),
            close,
        );
        Arc::new(Connection {
            shared,
            writer,
            link,
            max_frame_size: config.max_frame_size,
        })
    }

    /// Registers the request and, in the usual case (async write mode, room
    /// in the write queue), queues it — without awaiting anything, so a
    /// caller's future holds no send state at all. Otherwise the returned
    /// [`WriteWait`] finishes the write (it must be awaited before the call
    /// counts as sent): with [`WriteMode::Sync`] it waits until the frame is
    /// written; with [`WriteMode::Async`] only for room in the write queue (a
    /// later write failure completes the call with that error). The spec's
    /// deadline bounds the whole call, write included.
    ///
    /// The frame is encoded by reference (its `request_id` and `timeout_ms` are
    /// set here): a caller that may try again elsewhere keeps it for the next
    /// try instead of cloning it up front. Only the waiting path clones it.
    ///
    /// The call keeps `self` (its [`PendingCall`] waits on this connection):
    /// a caller hands over the reference it holds rather than a clone, as a
    /// reference count taken and given back per call is two atomic writes to
    /// a line every calling thread writes.
    pub fn start(
        self: Arc<Self>,
        frame: &mut OutFrame,
        spec: SendSpec,
    ) -> Result<Started, RpcError> {
        self.start_waking(frame, spec, None)
    }

    /// Sends `frame` and waits for its answer: [`start`](Self::start) and
    /// [`PendingCall::response`] in one future, which saves the response's
    /// first look at the pending table. The call's slot is registered with
    /// the waker of the poll that starts it, and the answer cannot have been
    /// collected before that same poll first waits for it, so that wait
    /// returns `Pending` without taking the table's lock (a lock both the
    /// caller's thread and the reader's take: one of the client's costliest
    /// writes per call at 10:100:1024, `perf`).
    pub async fn call(
        self: Arc<Self>,
        frame: &mut OutFrame,
        spec: SendSpec,
    ) -> Result<Frame, RpcError> {
        let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        // No await between here and the response's first poll but for a
        // write that must wait, which polls the table as `response` does.
        match self.start_waking(frame, spec, Some(waker))? {
            Started::Sent(call) => call.outcome(true).await,
            Started::Waiting(call, wait) => {
                wait.await?;
                call.response().await
            }
        }
    }

    /// [`start`](Self::start), the call's slot registered with `waker`.
    fn start_waking(
        self: Arc<Self>,
        frame: &mut OutFrame,
        spec: SendSpec,
        waker: Option<Waker>,
    ) -> Result<Started, RpcError> {
        let SendSpec {
            mode,
            deadline,
            timeout,
        } = spec;
        self.may_send(frame)?;
        let (id, in_flight) = self.shared.pending.insert_counted(deadline, waker);
        frame.request_id = id;
        // At least 1 ms: 0 on the wire means "no deadline".
        frame.timeout_ms = timeout.as_millis().clamp(1, u32::MAX as u128) as u32;
        let call = PendingCall {
            conn: self,
            id,
            timeout,
            service: frame.service.clone(),
            method: frame.method.clone(),
            answered: false,
        };
        // From here the connection is the call's (an error drops the call,
        // which frees its slot).
        let conn = &call.conn;
        if conn.shared.close.is_closed() {
            return Err(conn.shared.not_sent());
        }

        // The usual case: room in the write buffer, encoded there at once
        // (or, the client's only call in flight, written to the socket right
        // here: nobody could join its write).
        if mode == WriteMode::Async {
            let offered = if in_flight == 1 {
                conn.writer.offer_alone(frame)?
            } else {
                conn.writer.offer(frame)?
            };
            if offered == Offer::Queued {
                return Ok(Started::Sent(call));
            }
        }
        let frame = frame.clone();
        // Waiting (for room, or for the write itself) is boxed: its timer and
        // select state would otherwise sit in every call's future, which is
        // moved on every call.
        let conn = conn.clone();
        let wait = Box::pin(async move { conn.write_waiting(frame, spec).await });
        Ok(Started::Waiting(call, WriteWait(wait)))
    }

    /// The slow half of [`start`](Self::start): waits for room in the write
    /// queue and, with [`WriteMode::Sync`], for the write, until the deadline.
    async fn write_waiting(&self, frame: OutFrame, spec: SendSpec) -> Result<(), RpcError> {
        let SendSpec {
            mode,
            deadline,
            timeout,
        } = spec;
        let write_timeout = || RpcError::WriteTimeout {
            peer: self.shared.peer.to_string(),
            timeout,
        };
        // `biased` below polls the write first: when it completes at once the
        // sleep is never polled, so no timer is registered for it.
        let sleep = tokio::time::sleep_until(deadline);
        tokio::pin!(sleep);
        match mode {
            WriteMode::Async => {
                tokio::select! {
                    biased;
                    r = self.writer.send(&frame, None) => r?,
                    _ = &mut sleep => return Err(write_timeout()),
                }
            }
            WriteMode::Sync => {
                let (ack_tx, ack_rx) = oneshot::channel();
                tokio::select! {
                    biased;
                    r = self.writer.send(&frame, Some(ack_tx)) => r?,
                    _ = &mut sleep => return Err(write_timeout()),
                }
                tokio::select! {
                    biased;
                    r = ack_rx => match r {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return Err(e),
                        Err(_) => return Err(self.shared.close.error(&self.shared.peer)),
                    },
                    _ = &mut sleep => return Err(write_timeout()),
                }
            }
        }
        Ok(())
    }

    /// Whether `frame` may go out: not over this side's `max_frame_size`
    /// (`FrameTooLarge`, the connection untouched), and the connection not
    /// closed (`NotSent`, or the error the server closed it with).
    #[inline]
    fn may_send(&self, frame: &OutFrame) -> Result<(), RpcError> {
        let size = frame.encoded_len();
        if size > self.max_frame_size {
            return Err(RpcError::FrameTooLarge {
                size: size as u64,
                max: self.max_frame_size as u64,
            });
        }
        if self.shared.close.is_closed() {
            return Err(self.shared.not_sent());
        }
        Ok(())
    }

    /// Opens a streaming call with `frame` (a `StreamOpen`; its id and
    /// timeout are set here): the server's items arrive in the returned
    /// stream, within `spec.window` items of credit; with
    /// `spec.client_streams` the caller's items go through the returned
    /// sink, within the server's credit. Nothing here waits.
    pub fn open_stream(
        self: &Arc<Self>,
        frame: &mut OutFrame,
        spec: StreamSpec,
    ) -> Result<OpenStream, RpcError> {
        self.may_send(frame)?;
        // The id's slot is held until the stream is over (`StreamLink`); a
        // stream's deadline is its own (`RawStreaming`), not the sweeper's.
        let (id, _) = self.shared.pending.insert_counted(far_future(), None);
        frame.request_id = id;
        frame.timeout_ms = spec
            .timeout
            .map_or(0, |t| t.as_millis().clamp(1, u32::MAX as u128) as u32);
        let inbox = Arc::new(Inbox::new(spec.window));
        let credit = spec.client_streams.then(Credit::new);
        self.shared
            .streams
            .insert(id, inbox.clone(), credit.clone());
        let link: Arc<dyn StreamPeer> = self.link.clone();
        let items = RawStreaming::new(id, inbox.clone(), link.clone()).with_deadline(
            spec.timeout
                .and_then(|t| std::time::Instant::now().checked_add(t)),
        );
        // The open and the first grant go in one write.
        let sent = self
            .writer
            .push(frame)
            .and_then(|()| self.writer.push(&OutFrame::credit(id, inbox.window())));
        // On an error `items` is dropped, which frees the slot.
        sent?;
        let sink = credit.map(|c| StreamSink::new(id, frame.serializer, c, link).end_on_drop());
        Ok(OpenStream { items, sink })
    }

    /// Streams open on this connection.
    pub fn open_streams(&self) -> usize {
        self.shared.streams.len()
    }

    /// True until the connection breaks or is closed.
    pub fn is_open(&self) -> bool {
        !self.shared.close.is_closed() && self.shared.close.write_error().is_none()
    }

    /// Closes the connection; pending calls fail with `reason`.
    pub fn close(&self, reason: &str) {
        self.shared.close.close(reason.to_owned());
    }

    /// Completes when the connection has closed.
    pub async fn closed(&self) {
        self.shared.close.closed().await
    }

    /// Why the connection closed ("open" while it is open).
    pub fn close_reason(&self) -> String {
        self.shared.close.reason().to_owned()
    }

    /// Frames encoded and waiting for the connection's next write, or
    /// written through since its last read: a batch still gathering, which
    /// one more call can join for free (`usize::MAX` while the write buffer
    /// is full).
    pub fn queued_frames(&self) -> usize {
        self.writer.queued_frames()
    }

    /// Times the connection's reader, busy-polling for an answer, read
    /// something from the socket itself before any runtime thread had seen
    /// it readable (a whole frame, or several; the header of a large one;
    /// the end of the stream): each a wake-up saved
    /// ([`ClientTransport::busy_poll`]).
    pub fn busy_poll_reads(&self) -> u64 {
        self.shared.busy_poll_reads.load(Ordering::Relaxed)
    }

    /// Frames that arrived while the connection's reader was busy-polling
    /// for them instead of parked, whether the poll read them itself
    /// ([`busy_poll_reads`](Self::busy_poll_reads)) or a runtime thread saw
    /// the socket readable first: the answers a lone caller was polled for.
    /// Frames that came in one read (a pushed stream's items) count once.
    pub fn busy_polled_frames(&self) -> u64 {
        self.shared.busy_polled_frames.load(Ordering::Relaxed)
    }

    /// Turns of the reader's busy poll that found nothing while the client
    /// had no call in flight, and so offered the thread's core to another
    /// thread (`std::thread::yield_now`) before polling on: the caller of
    /// the next call may be waiting for a core.
    pub fn busy_poll_core_offers(&self) -> u64 {
        self.shared.busy_poll_core_offers.load(Ordering::Relaxed)
    }

    /// Calls waiting for a response on this connection.
    pub fn pending_count(&self) -> usize {
        self.shared.pending.len()
    }

    /// The server address.
    pub fn peer(&self) -> &str {
        &self.shared.peer
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared.close.close("connection handle dropped");
    }
}

/// A deadline no stream's id slot reaches (streams time themselves).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(60 * 60 * 24 * 365 * 30)
}

mod call;
mod dial;
mod read_loop;

pub use call::{OpenStream, PendingCall, SendSpec, Started, StreamSpec, WriteWait};
pub use dial::connect;
use read_loop::read_loop;
