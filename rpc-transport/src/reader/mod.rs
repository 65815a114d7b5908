//! [`FrameReader`]: frames out of a byte stream.
//!
//! # What it keeps true
//!
//! - **Nothing is allocated for a frame before its size is known to be
//!   acceptable.** The fixed header is read first.
//! - **An over-size frame costs one answer, not the connection.** A valid
//!   header that announces more than `max_frame_size` still names its request
//!   id, so the reader hands it up as [`Inbound::TooLarge`] (a server answers
//!   that request `FrameTooLarge`, a client fails that one call) and then
//!   discards the frame's bytes as they arrive, without buffering them. Only
//!   bytes that are not a brisk frame at all (bad magic, version or kind) are
//!   an error, after which the stream cannot be trusted.
//! - **A large frame owns its memory.** A frame over `read_buffer_max` is read
//!   into an allocation of its own, sized exactly, which the frame alone keeps
//!   alive: when the call is done with it, the memory is gone, instead of
//!   staying behind as the connection's read buffer for as long as the
//!   connection lives. With a [`FrameBudget`], the reader reserves the frame's
//!   size before it reads the body, and waits (not reading, so TCP pushes back)
//!   while the budget is spent; the reservation comes out with the frame, for
//!   the caller to hold as long as the call holds memory for it. A frame that
//!   holds a reservation must arrive at [`LARGE_FRAME_MIN_RATE`] or faster
//!   (after [`LARGE_FRAME_GRACE`]), or the connection is closed: a peer cannot
//!   pin the shared budget by announcing a large frame and dribbling its body.
//! - **An idle connection holds no read buffer.** A new reader allocates
//!   nothing until bytes arrive, and when nothing arrives for
//!   [`IDLE_RELEASE`] with nothing buffered, the buffer is let go (after large
//!   frames the allocator is also asked to return freed memory to the system,
//!   see [`allocator`](crate::allocator)). A reader without a buffer waits
//!   for the first bytes of the next frame with a [`HEADER_LEN`]-byte read
//!   into the future itself, then allocates for the frame that header
//!   announces: one more read on a connection's first call and after each
//!   idle second, in exchange for servers that hold thousands of idle
//!   connections without a buffer each (issue 21's 5 KB per idle
//!   connection).
//! - **Any byte received is activity** (for the idle timeout), not only a
//!   complete frame: a large frame that takes longer than the idle timeout to
//!   arrive is not mistaken for a dead peer.
//!
//! `next()` is cancel-safe — it only awaits in `read_buf`, which either reads
//! or does not, in a timer, or in a budget reservation that is kept across
//! calls — so connection tasks can `select!` on it together with a shutdown
//! signal without losing bytes.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use rpc_codec::{read_header, Frame, Header, HEADER_LEN};
use rpc_core::RpcError;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::budget::{FrameBudget, Reserved};
use crate::heartbeat::Activity;
use crate::read_now::ReadNow;
use crate::{AdaptiveReadBuffer, IoCounters};

/// How long a connection must receive nothing before its read buffer is let go.
pub const IDLE_RELEASE: Duration = Duration::from_secs(1);

/// What the reader found on the stream.
#[derive(Debug)]
pub enum Inbound {
    /// A complete frame, and for a large frame read under a [`FrameBudget`]
    /// its share of the budget: hold it as long as the call holds memory for
    /// this frame (a server holds it until the call's answer is written, so
    /// the answer is paid for by the request).
    Frame(Frame, Option<Reserved>),
    /// A valid header announcing more than `max` bytes. Nothing was
    /// allocated for it; the reader discards its bytes as they arrive, and the
    /// frames after it are read as usual.
    TooLarge {
        /// The over-size frame's header (its kind and request id).
        header: Header,
        /// The limit it exceeds (`max_frame_size`).
        max: usize,
    },
}

impl Inbound {
    /// The error the sender of an over-size frame gets.
    pub fn too_large_error(header: &Header, max: usize) -> RpcError {
        RpcError::FrameTooLarge {
            size: header.frame_len(),
            max: max as u64,
        }
    }
}

/// A frame over the size limit of the read buffer, read into its own allocation.
struct LargeFrame {
    header: Header,
    buf: BytesMut,
    total: usize,
    /// Its share of the endpoint's budget, held as long as the frame's memory.
    reserved: Option<Reserved>,
    /// With a reservation: when the frame must be complete (see
    /// [`large_frame_deadline`]); a peer cannot hold budget by stalling.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// A frame holding part of a [`FrameBudget`] must arrive at this rate or
/// faster (after [`LARGE_FRAME_GRACE`]), or its connection is closed: the
/// budget is shared, and a peer that announces a large frame and then
/// dribbles its body would otherwise hold its share for as long as it likes.
pub const LARGE_FRAME_MIN_RATE: u64 = 1 << 20;

/// The time a budgeted frame gets on top of its size at [`LARGE_FRAME_MIN_RATE`].
pub const LARGE_FRAME_GRACE: Duration = Duration::from_secs(10);

/// The error of a budgeted frame of `total` bytes that had only `got` at its deadline.
fn too_slow(total: usize, got: usize) -> RpcError {
    RpcError::Protocol(format!(
        "a {total}-byte frame arrived too slowly ({got} bytes in {:?}); a frame holding part of \
         the frame budget must arrive at {} KiB/s or faster, after {:?}",
        large_frame_deadline(total),
        LARGE_FRAME_MIN_RATE >> 10,
        LARGE_FRAME_GRACE
    ))
}

/// How long a budgeted frame of `total` bytes may take to arrive.
pub fn large_frame_deadline(total: usize) -> Duration {
    LARGE_FRAME_GRACE + Duration::from_millis(total as u64 * 1000 / LARGE_FRAME_MIN_RATE)
}

impl LargeFrame {
    fn finish(self) -> Result<Inbound, RpcError> {
        let frame = Frame::from_bytes(self.header, self.buf.freeze())?;
        Ok(Inbound::Frame(frame, self.reserved))
    }
}

/// The timer that lets an idle connection's read buffer go; armed once per
/// [`IDLE_RELEASE`] period, not per read.
struct IdleRelease {
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// `bytes_read` when the timer was armed: unchanged at expiry means idle.
    read_at_arm: u64,
}

type Reserving = Pin<Box<dyn Future<Output = Reserved> + Send>>;

/// How the stream ended when [`FrameReader::read_now`] found out: kept for
/// `next`, which reports it after the frames buffered before it (a socket
/// error is reported by the kernel once; read again, it looks like an end).
#[derive(Debug)]
enum Ended {
    Eof,
    Failed(io::Error),
}

/// Reads frames from `R` through an adaptive buffer.
pub struct FrameReader<R> {
    io: R,
    buf: AdaptiveReadBuffer,
    max_frame_size: usize,
    /// Frames above this size get an allocation of their own (`read_buffer_max`).
    own_allocation_above: usize,
    /// Bytes of an over-size frame still to be discarded.
    skip: u64,
    /// The large frame being read, boxed: it is rare, and this reader lives
    /// in every connection's future, idle ones included.
    large: Option<Box<LargeFrame>>,
    budget: Option<FrameBudget>,
    /// A budget reservation in progress, kept across cancelled `next()` calls
    /// so the reader keeps its place in the queue.
    reserving: Option<Reserving>,
    idle: Option<IdleRelease>,
    /// A large frame was read since the connection was last idle.
    had_large: bool,
    /// The end of the stream, or a read error, found by `read_now`.
    ended: Option<Ended>,
    bytes_read: u64,
    counters: Option<Arc<IoCounters>>,
    activity: Option<Arc<Activity>>,
}

impl<R> std::fmt::Debug for FrameReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameReader")
            .field("max_frame_size", &self.max_frame_size)
            .field("bytes_read", &self.bytes_read)
            .field("held", &self.buf.held())
            .finish_non_exhaustive()
    }
}

impl<R: AsyncRead + ReadNow + Unpin> FrameReader<R> {
    /// Whether [`read_now`](Self::read_now) can read this stream (not TLS).
    pub fn can_read_now(&self) -> bool {
        self.io.can_read_now()
    }

    /// Reads what the socket holds now into the buffer, without waiting for
    /// the runtime to see it readable (see [`ReadNow`]). Returns whether the
    /// reader now has something to hand up: a whole frame (for
    /// [`try_next_buffered`](Self::try_next_buffered)), the header of one
    /// that [`next`](Self::next) must read or refuse, or the end of the
    /// stream or a read error, which `next` reports before reading again.
    /// Bytes of a frame not yet whole stay buffered, and `false` is
    /// returned: the next try, or `next`, reads the rest.
    ///
    /// For a connection polling for its peer's next small frame: while a
    /// large frame is assembled or an over-size one skipped, with no
    /// buffer allocated (an idle reader allocates only when `next` reads),
    /// or on a stream that cannot be read so, it reads nothing.
    pub fn read_now(&mut self) -> bool {
        if self.ended.is_some() {
            return true;
        }
        if self.large.is_some() || self.skip > 0 || self.reserving.is_some() || self.buf.held() == 0
        {
            return false;
        }
        let frame_len = match read_header(self.buf.buffer()) {
            Ok(Some(header)) if header.frame_len() > self.read_now_max() => return true,
            Ok(Some(header)) => Some(header.frame_len() as usize),
            Ok(None) => None,
            Err(_) => return true,
        };
        let dst = self.buf.prepare(frame_len);
        let start = dst.len();
        let room = dst.spare_capacity_mut();
        let offered = room.len();
        match self.io.read_now(room) {
            Ok(0) => {
                self.ended = Some(Ended::Eof);
                true
            }
            Ok(n) => {
                assert!(
                    n <= offered,
                    "ReadNow reported more bytes than it was given room for"
                );
                // SAFETY: `read_now` initialized the first `n` bytes of the
                // spare capacity it was given (the `ReadNow` contract), and
                // `n` is within it.
                unsafe { dst.set_len(start + n) };
                self.buf.record(n);
                self.count(n);
                self.frame_buffered()
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::Interrupted
                        | io::ErrorKind::Unsupported
                ) =>
            {
                false
            }
            Err(e) => {
                self.ended = Some(Ended::Failed(e));
                true
            }
        }
    }

    /// Whether the buffer holds a whole frame, or a header `next` must act on.
    fn frame_buffered(&mut self) -> bool {
        let max = self.read_now_max();
        let buf = self.buf.buffer();
        match read_header(buf) {
            Ok(Some(header)) => header.frame_len() > max || buf.len() as u64 >= header.frame_len(),
            Ok(None) => false,
            Err(_) => true,
        }
    }
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader enforcing `max_frame_size`, with read sizes between `min` and
    /// `max`; frames larger than `max` are read into their own allocation.
    pub fn new(io: R, max_frame_size: usize, min: usize, max: usize) -> Self {
        FrameReader {
            io,
            buf: AdaptiveReadBuffer::new(min, max),
            max_frame_size,
            own_allocation_above: max.max(min),
            skip: 0,
            large: None,
            budget: None,
            reserving: None,
            idle: None,
            had_large: false,
            ended: None,
            bytes_read: 0,
            counters: None,
            activity: None,
        }
    }

    /// Also counts every byte read into `counters`.
    pub fn with_counters(mut self, counters: Arc<IoCounters>) -> Self {
        self.counters = Some(counters);
        self
    }

    /// Records every read in `activity` (for the idle timeout).
    pub fn with_activity(mut self, activity: Arc<Activity>) -> Self {
        self.activity = Some(activity);
        self
    }

    /// Reserves every large frame's size from `budget` before reading it.
    pub fn with_budget(mut self, budget: FrameBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Whether nothing is buffered or in progress: no bytes of a next frame,
    /// no large frame being assembled or over-size one skipped, no end of
    /// the stream found. Only such a reader's stream may be read by someone
    /// else for a while (a connection lending its read side to a worker),
    /// who hands back what it read with [`unread`](Self::unread).
    pub fn is_drained(&self) -> bool {
        self.buf.is_empty()
            && self.large.is_none()
            && self.skip == 0
            && self.reserving.is_none()
            && self.ended.is_none()
    }

    /// The size a buffered partial frame announces (`Some(0)` while even its
    /// header is incomplete), when that start of a frame is all the reader
    /// holds; `None` otherwise (nothing buffered, a whole frame, a large or
    /// skipped frame, the end).
    pub fn partial_frame(&mut self) -> Option<u64> {
        if self.large.is_some()
            || self.skip > 0
            || self.reserving.is_some()
            || self.ended.is_some()
            || self.buf.is_empty()
        {
            return None;
        }
        let buf = self.buf.buffer();
        match read_header(buf) {
            Ok(None) => Some(0),
            Ok(Some(h)) if (buf.len() as u64) < h.frame_len() => Some(h.frame_len()),
            _ => None,
        }
    }

    /// Moves the start of a frame the reader holds
    /// ([`partial_frame`](Self::partial_frame)) to the end of `into`, for
    /// whoever reads the stream next (they stay counted as read here); the
    /// reader is then [drained](Self::is_drained). What comes back goes in
    /// with [`unread`](Self::unread).
    pub fn hand_partial(&mut self, into: &mut BytesMut) {
        let buf = self.buf.buffer();
        into.extend_from_slice(buf);
        buf.clear();
    }

    /// Puts `bytes`, read off the stream by someone else while this reader
    /// [`is_drained`](Self::is_drained), first in line, and `error`, the
    /// error that read ended with, behind them: both come out of the reader
    /// before anything read from the stream. Counted as read here, but for
    /// the first `counted`, which this reader read itself and handed out
    /// ([`hand_partial`](Self::hand_partial)).
    pub fn unread(&mut self, bytes: &[u8], counted: usize, error: Option<io::Error>) {
        debug_assert!(self.is_drained(), "unread into a reader holding bytes");
        if !bytes.is_empty() {
            let frame_len = match read_header(bytes) {
                Ok(Some(header)) if header.frame_len() <= self.read_now_max() => {
                    Some(header.frame_len() as usize)
                }
                _ => None,
            };
            self.buf.prepare(frame_len).extend_from_slice(bytes);
            self.count(bytes.len().saturating_sub(counted));
        }
        if let Some(e) = error {
            self.ended = Some(Ended::Failed(e));
        }
    }

    /// The largest frame [`read_now`](Self::read_now) (or
    /// [`unread`](Self::unread)) puts into the adaptive buffer; larger ones
    /// are `next`'s.
    fn read_now_max(&self) -> u64 {
        self.own_allocation_above.min(self.max_frame_size) as u64
    }

    /// Stops reserving from the budget (and gives up a reservation being
    /// waited for): for a reader whose frames are only discarded now.
    pub fn leave_budget(&mut self) {
        self.budget = None;
        self.reserving = None;
    }

    /// The next frame (or over-size announcement); `Ok(None)` on a clean end
    /// of stream between frames. A stream that ends inside a frame, or bytes
    /// that are not a frame, are errors.
    pub async fn next(&mut self) -> Result<Option<Inbound>, RpcError> {
        loop {
            if let Some(inbound) = self.try_next_buffered()? {
                return Ok(Some(inbound));
            }
            // Where the next read goes: the large frame being assembled, or
            // the adaptive buffer (sized for the frame whose header is there).
            let n = if let Some(ended) = self.ended.take() {
                match ended {
                    Ended::Eof => 0,
                    Ended::Failed(e) => return Err(e.into()),
                }
            } else if let Some(large) = &mut self.large {
                let rest = large.total - large.buf.len();
                let mut into = (&mut large.buf).limit(rest);
                let read = match &mut large.deadline {
                    None => Some(self.io.read_buf(&mut into).await?),
                    Some(deadline) => tokio::select! {
                        biased;
                        n = self.io.read_buf(&mut into) => Some(n?),
                        _ = deadline.as_mut() => None,
                    },
                };
                match read {
                    Some(n) => n,
                    None => return Err(too_slow(large.total, large.buf.len())),
                }
            } else {
                let header = match self.skip {
                    0 => read_header(self.buf.buffer())?,
                    _ => None,
                };
                let frame_len = header.map(|h| h.frame_len() as usize);
                if let (Some(header), Some(total)) = (header, frame_len) {
                    if total > self.own_allocation_above {
                        self.start_large(header, total).await;
                        continue;
                    }
                }
                if self.buf.is_empty() && self.buf.held() == 0 && header.is_none() {
                    self.read_first_bytes().await?
                } else if self.buf.is_empty() {
                    match self.read_or_release().await? {
                        Some(n) => n,
                        // The idle timer fired: nothing read, go round again.
                        None => continue,
                    }
                } else {
                    let n = self.io.read_buf(self.buf.prepare(frame_len)).await?;
                    self.buf.record(n);
                    n
                }
            };
            if n == 0 {
                let partial = self.skip > 0 || self.large.is_some() || !self.buf.is_empty();
                if !partial {
                    return Ok(None);
                }
                return Err(RpcError::Protocol(format!(
                    "peer closed the stream in the middle of a frame ({} bytes buffered)",
                    self.buf.buffer().len() + self.large.as_ref().map_or(0, |l| l.buf.len())
                )));
            }
            self.count(n);
        }
    }

    /// Counts `n` bytes read (the idle timeout's activity, the counters).
    fn count(&mut self, n: usize) {
        self.bytes_read += n as u64;
        if let Some(c) = &self.counters {
            c.add_in(n as u64);
        }
        if let Some(a) = &self.activity {
            a.bump();
        }
    }

    /// What is already buffered, without reading (lets a caller drain a batch
    /// before going back to the socket).
    pub fn try_next_buffered(&mut self) -> Result<Option<Inbound>, RpcError> {
        if self.skip > 0 {
            let buf = self.buf.buffer();
            let n = (buf.len() as u64).min(self.skip) as usize;
            buf.advance(n);
            self.skip -= n as u64;
            if self.skip > 0 {
                return Ok(None);
            }
        }
        if let Some(large) = self.large.take() {
            if large.buf.len() < large.total {
                self.large = Some(large);
                return Ok(None);
            }
            self.had_large = true;
            return large.finish().map(Some);
        }
        let Some(header) = read_header(self.buf.buffer())? else {
            return Ok(None);
        };
        let total = header.frame_len();
        if total > self.max_frame_size as u64 {
            self.skip = total;
            return Ok(Some(Inbound::TooLarge {
                header,
                max: self.max_frame_size,
            }));
        }
        let total = total as usize;
        let buf = self.buf.buffer();
        if buf.len() < total {
            return Ok(None);
        }
        let bytes = buf.split_to(total).freeze();
        Frame::from_bytes(header, bytes).map(|f| Some(Inbound::Frame(f, None)))
    }

    /// Reserves a large frame's budget (waiting, cancel-safely, while it is
    /// spent) and moves its first bytes into an allocation of its own.
    async fn start_large(&mut self, header: Header, total: usize) {
        let reserved = match &self.budget {
            Some(budget) => {
                let budget = budget.clone();
                let reserving = self
                    .reserving
                    .get_or_insert_with(|| Box::pin(async move { budget.reserve(total).await }));
                let reserved = reserving.as_mut().await;
                self.reserving = None;
                Some(reserved)
            }
            None => None,
        };
        let mut buf = BytesMut::with_capacity(total);
        let small = self.buf.buffer();
        buf.extend_from_slice(small);
        small.clear();
        let deadline = reserved
            .is_some()
            .then(|| Box::pin(tokio::time::sleep(large_frame_deadline(total))));
        self.large = Some(Box::new(LargeFrame {
            header,
            buf,
            total,
            reserved,
            deadline,
        }));
    }

    /// With no buffer allocated: waits for the next frame's first bytes
    /// with a read of at most a header into the future itself, then moves
    /// them into a buffer sized for that frame (see the module docs).
    async fn read_first_bytes(&mut self) -> Result<usize, RpcError> {
        let mut first = [0u8; HEADER_LEN];
        let n = self.io.read(&mut first).await?;
        if n == 0 {
            return Ok(0);
        }
        let frame_len = match read_header(&first[..n]) {
            Ok(Some(header))
                if self.skip == 0 && header.frame_len() <= self.own_allocation_above as u64 =>
            {
                Some(header.frame_len() as usize)
            }
            // Too short for a header yet, bytes of a frame being skipped, a
            // frame that takes an allocation of its own or is refused, or bad
            // bytes: the usual path decides.
            _ => None,
        };
        self.buf.prepare(frame_len).extend_from_slice(&first[..n]);
        Ok(n)
    }

    /// One read into the empty adaptive buffer, or — when nothing arrives
    /// for [`IDLE_RELEASE`] — `None`, having let the buffer go (or re-armed
    /// the timer, when something arrived since it was armed).
    async fn read_or_release(&mut self) -> Result<Option<usize>, RpcError> {
        let bytes_read = self.bytes_read;
        let idle = self.idle.get_or_insert_with(|| IdleRelease {
            sleep: Box::pin(tokio::time::sleep(IDLE_RELEASE)),
            read_at_arm: bytes_read,
        });
        let dst = self.buf.prepare(None);
        tokio::select! {
            biased;
            n = self.io.read_buf(dst) => {
                let n = n?;
                self.buf.record(n);
                Ok(Some(n))
            }
            _ = idle.sleep.as_mut() => {
                if idle.read_at_arm == bytes_read {
                    self.buf.release();
                    self.idle = None;
                    if std::mem::take(&mut self.had_large) {
                        crate::allocator::release_freed();
                    }
                } else {
                    idle.read_at_arm = bytes_read;
                    let at = tokio::time::Instant::now() + IDLE_RELEASE;
                    idle.sleep.as_mut().reset(at);
                }
                Ok(None)
            }
        }
    }

    /// Total bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Bytes currently held by the read buffer (a large frame being read
    /// included).
    pub fn buffer_capacity(&self) -> usize {
        self.buf.held() + self.large.as_ref().map_or(0, |l| l.buf.capacity())
    }
}

#[cfg(test)]
mod tests;
