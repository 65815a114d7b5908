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

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use rpc_codec::{Code, Frame, FrameKind, OutFrame, Status, CONNECTION_REQUEST_ID};
use rpc_core::{RpcError, WriteMode};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::addr::Address;
use crate::heartbeat::{self, Activity};
use crate::pending::{self, PendingCalls};
use crate::streams::{OpenStreams, StreamLink};
use crate::writer::Offer;
use crate::{BusyPoll, ClientTransport, CloseSignal, FrameReader, FrameWriter, Inbound, ReadNow};
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

/// Opens a connection to `addr` (`host:port`, or `unix:/path` for a Unix
/// domain socket; see [`addr`](crate::addr)) within `client.connect_timeout`.
pub async fn connect(addr: &str, client: &ClientTransport) -> Result<Arc<Connection>, RpcError> {
    match Address::parse(addr) {
        Address::Tcp(host_port) => {
            let stream =
                within_connect_timeout(addr, client, TcpStream::connect(host_port)).await?;
            #[cfg(feature = "tls")]
            if let Some(tls) = &client.tls {
                if let Err(e) = stream.set_nodelay(client.shared.nodelay) {
                    debug!(%addr, error = %e, "could not set TCP_NODELAY");
                }
                return over_tls(stream, addr, tls, client).await;
            }
            Connection::from_stream(stream, client)
        }
        Address::Unix(path) => {
            let stream = within_connect_timeout(addr, client, connect_unix(path)).await?;
            #[cfg(feature = "tls")]
            if let Some(tls) = &client.tls {
                return over_tls(stream, addr, tls, client).await;
            }
            let (read_half, write_half) = stream.into_split();
            Ok(Connection::from_halves(
                read_half,
                write_half,
                addr.into(),
                client,
            ))
        }
    }
}

/// Connects to the Unix socket at `path`. A full accept queue fails a Unix
/// connect at once (`EAGAIN`) where TCP would wait for room, so that is
/// tried again after a short pause; the connect timeout bounds the tries.
async fn connect_unix(path: &std::path::Path) -> std::io::Result<UnixStream> {
    let mut pause = Duration::from_millis(1);
    loop {
        match UnixStream::connect(path).await {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

/// Awaits `connecting` within `client.connect_timeout`; a failure names `addr`.
async fn within_connect_timeout<S>(
    addr: &str,
    client: &ClientTransport,
    connecting: impl Future<Output = std::io::Result<S>>,
) -> Result<S, RpcError> {
    match tokio::time::timeout(client.connect_timeout, connecting).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(RpcError::Connect {
            addr: addr.to_owned(),
            reason: e.to_string(),
            source: Some(rpc_core::Cause::new(e)),
        }),
        Err(_) => Err(RpcError::ConnectTimeout {
            addr: addr.to_owned(),
            timeout: client.connect_timeout,
        }),
    }
}

/// The TLS handshake on a connected `stream`, then the connection over it.
#[cfg(feature = "tls")]
async fn over_tls<S>(
    stream: S,
    addr: &str,
    tls: &crate::tls::TlsConnector,
    client: &ClientTransport,
) -> Result<Arc<Connection>, RpcError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // One deadline for the handshake too: a peer that never answers it
    // (a plain TCP server, say) fails the connect instead of hanging it.
    let handshake = tokio::time::timeout(client.connect_timeout, tls.connect(stream, addr));
    let tls_stream = match handshake.await {
        Ok(r) => r?,
        Err(_) => {
            let reason = format!(
                "TLS handshake with {addr} failed: no answer within {:?} (is it a TLS server?)",
                client.connect_timeout
            );
            return Err(RpcError::Connect {
                addr: addr.to_owned(),
                reason,
                source: None,
            });
        }
    };
    let (read_half, write_half) = tokio::io::split(tls_stream);
    Ok(Connection::from_halves(
        read_half,
        write_half,
        addr.into(),
        client,
    ))
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

/// How one request goes out: what [`Connection::start`] needs beside the
/// frame (which carries the names, the serializer, the metadata and the body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendSpec {
    /// Return once the frame is queued ([`WriteMode::Async`]) or written
    /// ([`WriteMode::Sync`]).
    pub mode: WriteMode,
    /// When the caller gives up, on the write and on the answer.
    pub deadline: Instant,
    /// The time left until `deadline` when the request is sent: it travels in
    /// the frame (the server's view of the deadline) and is what a timeout
    /// error reports.
    pub timeout: Duration,
}

/// How a stream is opened: what [`Connection::open_stream`] needs beside
/// the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSpec {
    /// Items of the server's flow the caller takes before it reads any.
    pub window: u32,
    /// Whether the caller sends a flow of its own.
    pub client_streams: bool,
    /// The whole stream's deadline, from now (`None`: none).
    pub timeout: Option<Duration>,
}

/// A stream just opened.
#[derive(Debug)]
pub struct OpenStream {
    /// The server's items.
    pub items: RawStreaming,
    /// Where the caller's items go (client and bidirectional streams).
    pub sink: Option<StreamSink>,
}

/// A deadline no stream's id slot reaches (streams time themselves).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(60 * 60 * 24 * 365 * 30)
}

/// What [`Connection::start`] did with a request.
#[derive(Debug)]
pub enum Started {
    /// Registered and queued for writing: await the call's response.
    Sent(PendingCall),
    /// Registered; the write still has to wait (for room in the write queue, or
    /// for the write itself in [`WriteMode::Sync`]): await the [`WriteWait`] first.
    Waiting(PendingCall, WriteWait),
}

/// The waiting half of a send; resolves once the request is queued (async
/// write mode) or written (sync), or with the write error or timeout.
pub struct WriteWait(Pin<Box<dyn Future<Output = Result<(), RpcError>> + Send>>);

impl std::fmt::Debug for WriteWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriteWait")
    }
}

impl Future for WriteWait {
    type Output = Result<(), RpcError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// A request that has been sent and waits for its response.
///
/// Dropping it before its answer (the caller gave up, lost a `select!`) and
/// timing out both remove its pending slot, so a late response is
/// recognised as stale and dropped, and tell the server with a `Cancel`
/// frame, so it stops the call (or discards its answer) instead of running
/// it for nobody.
#[derive(Debug)]
pub struct PendingCall {
    conn: Arc<Connection>,
    id: u64,
    timeout: Duration,
    service: Cow<'static, str>,
    method: Cow<'static, str>,
    answered: bool,
}

impl PendingCall {
    /// The request id on its connection.
    pub fn request_id(&self) -> u64 {
        self.id
    }

    /// Waits for the response frame until the call's deadline (enforced by the
    /// connection's deadline sweeper: one timer per connection, not per call).
    pub async fn response(self) -> Result<Frame, RpcError> {
        self.outcome(false).await
    }

    /// [`response`](Self::response); `armed`: the slot holds the waker of
    /// the poll this future is first polled in (see [`Connection::call`]),
    /// so that poll waits without looking.
    async fn outcome(mut self, mut armed: bool) -> Result<Frame, RpcError> {
        let outcome = std::future::poll_fn(|cx| {
            if std::mem::take(&mut armed) {
                return Poll::Pending;
            }
            self.conn.shared.pending.poll(self.id, cx)
        })
        .await;
        // Collected (or never there): the slot is free.
        self.answered = true;
        match outcome {
            Some(Err(RpcError::Timeout { .. })) => Err({
                self.send_cancel();
                RpcError::Timeout {
                    service: self.service.to_string(),
                    method: self.method.to_string(),
                    timeout: self.timeout,
                }
            }),
            Some(outcome) => outcome,
            None => {
                let shared = &self.conn.shared;
                Err(shared.close.error(&shared.peer))
            }
        }
    }
}

impl PendingCall {
    /// Tells the server this call is given up. Without waiting: a full write
    /// queue or a closed connection drops the cancel (the server's deadline
    /// still ends the call).
    fn send_cancel(&self) {
        let _ = self
            .conn
            .writer
            .try_send(&OutFrame::control(FrameKind::Cancel, self.id));
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        // Collected by `response`; otherwise the caller gave up on it: free
        // the slot and tell the server.
        if !self.answered {
            let was_waiting = self.conn.shared.pending.remove(self.id);
            // An answer that arrived but was not collected needs no cancel.
            if was_waiting && !self.conn.shared.close.is_closed() {
                self.send_cancel();
            }
        }
    }
}

async fn read_loop<R: AsyncRead + ReadNow + Unpin>(
    shared: Arc<Shared>,
    mut reader: FrameReader<R>,
    writer: FrameWriter,
    busy_poll: Duration,
) {
    let close = shared.close.clone();
    let mut closed = close.watch();
    // A lone caller's answers are polled for (see `busy_poll`).
    let mut poll = BusyPoll::new(busy_poll, reader.can_read_now());
    // One read's answers, and their callers' wakers (kept for reuse).
    let mut answers: Vec<Frame> = Vec::new();
    let mut wakers = Vec::new();
    loop {
        // The read comes first: while frames keep arriving, the close waiter is
        // not polled at all; it is checked with one atomic load instead, and
        // polled (cheaply, see `ClosedWatch`) only when the read has to wait.
        if close.is_closed() {
            break;
        }
        let polling = poll.keep_polling();
        let next = tokio::select! {
            biased;
            r = reader.next() => r,
            _ = &mut closed => break,
            // Last: only when the read has to wait. What `read_now` buffers,
            // the next turn's `next` hands up at once.
            _ = tokio::task::yield_now(), if polling => {
                if reader.read_now() {
                    shared.busy_poll_reads.fetch_add(1, Ordering::Relaxed);
                } else if shared.pending.client_in_flight() == 0 {
                    // Nothing can be answered before the caller's next call,
                    // and the caller may be on another thread (a runtime
                    // worker that took its task, a blocking caller): this
                    // thread's core is offered to whatever waits for it on
                    // this CPU. Spinning on with both cores of a small
                    // machine held by polls (this one and the server's) left
                    // that thread without a core until a poll ran out: 1:1
                    // p99 at the 200 µs limit, measured (BENCHMARKS.md,
                    // "The client's poll offers its core").
                    shared.busy_poll_core_offers.fetch_add(1, Ordering::Relaxed);
                    std::thread::yield_now();
                } else if shared.waits_for_nothing() {
                    // The client's call went to another of its connections
                    // (calls that overlapped moved the client's `fixed`
                    // connections on): its answer will not come here.
                    poll.stop();
                }
                continue;
            }
        };
        // One clock reading per read (the frames buffered behind this one
        // are handled below without it), only while at most one call is in
        // flight (a lone caller: its next answer is worth polling for).
        if poll.is_on() {
            let lone = shared.pending.client_in_flight() <= 1;
            if lone {
                let now = std::time::Instant::now();
                if poll.arrived(now) {
                    shared.busy_polled_frames.fetch_add(1, Ordering::Relaxed);
                }
                poll.waits(now, true);
            } else {
                poll.start_over();
            }
        }
        // This frame, then every one already buffered behind it; the answers
        // among them are completed together (`PendingCalls::complete_answers`),
        // before anything else is handled, so nothing overtakes an answer.
        let mut next = next;
        let ended = loop {
            match next {
                Ok(Some(Inbound::Frame(frame, _))) if is_plain_answer(&frame) => {
                    writer.note_read();
                    answers.push(frame);
                }
                other => {
                    complete_answers(&shared, &mut answers, &mut wakers);
                    if on_inbound(&shared, &writer, other).is_break() {
                        break true;
                    }
                }
            }
            next = match reader.try_next_buffered() {
                Ok(None) => break false,
                other => other,
            };
        };
        complete_answers(&shared, &mut answers, &mut wakers);
        if ended {
            break;
        }
    }
    shared.fail_all(&writer);
}

/// An answer to a call (not the connection-level error a server closes
/// with): completed with the others of its read.
fn is_plain_answer(frame: &Frame) -> bool {
    frame.header.kind == FrameKind::Response
        && !(frame.header.request_id == CONNECTION_REQUEST_ID && frame.code() != Code::Ok)
}

/// Completes the answers gathered from one read (see `read_loop`).
fn complete_answers(shared: &Shared, answers: &mut Vec<Frame>, wakers: &mut Vec<std::task::Waker>) {
    shared.pending.complete_answers(answers, wakers, |id| {
        debug!(peer = %shared.peer, request_id = id,
            "response for a request that is no longer pending (timed out or cancelled): dropped");
    });
}

/// Handles what the reader handed up other than a plain answer; `Break`
/// ends the connection's reading (the connection is closed by then).
fn on_inbound(
    shared: &Shared,
    writer: &FrameWriter,
    next: Result<Option<Inbound>, RpcError>,
) -> std::ops::ControlFlow<()> {
    use std::ops::ControlFlow::{Break, Continue};
    let close = &shared.close;
    match next {
        Ok(Some(Inbound::Frame(frame, _))) => {
            writer.note_read();
            let id = frame.header.request_id;
            match frame.header.kind {
                FrameKind::Response => {
                    // Not a plain answer: the connection-level error.
                    let status = frame.error_status().unwrap_or_else(|| {
                        Status::new(Code::Internal, "connection-level error without a status")
                    });
                    let error = status.into_error("", "");
                    warn!(peer = %shared.peer, %error, "the server closed the connection with an error");
                    close.close_with(error);
                    return Break(());
                }
                FrameKind::StreamData
                | FrameKind::StreamEnd
                | FrameKind::StreamError
                | FrameKind::Credit
                | FrameKind::Cancel => {
                    if let Some(reply) = shared.streams.on_frame(frame) {
                        let _ = writer.push(&reply);
                    }
                }
                FrameKind::Ping => {
                    let _ = writer.try_send(&OutFrame::control(FrameKind::Pong, id));
                }
                FrameKind::Pong => {}
                kind => {
                    warn!(peer = %shared.peer, ?kind, "unexpected frame kind from a server: ignored")
                }
            }
        }
        Ok(Some(Inbound::TooLarge { header, max })) => {
            let id = header.request_id;
            warn!(peer = %shared.peer, request_id = id, size = header.frame_len(), max,
                "answer larger than max_frame_size: skipped, its call fails");
            if header.kind == FrameKind::Response {
                shared
                    .pending
                    .complete(id, Err(Inbound::too_large_error(&header, max)));
            }
        }
        Ok(None) => {
            close.close("the server closed the connection");
            return Break(());
        }
        Err(e) => {
            warn!(peer = %shared.peer, error = %e, "closing connection");
            close.close(e.to_string());
            return Break(());
        }
    }
    Continue(())
}
