//! The read side of a connection's socket lent to the worker pool: a worker
//! that has just written a caller's answers — a lone caller's one, or the
//! last of a pipelining caller's run — reads the caller's next requests
//! itself, and starts them, while the connection's task sleeps.
//!
//! # Why
//!
//! A lone caller (one call at a time, 1:1) on pool dispatch pays, per call,
//! for its request to cross two threads: the runtime thread wakes for the
//! socket, the connection task reads the request and hands it to a worker.
//! The worker that wrote the previous answer is awake anyway, waiting for
//! the next call (`pool::rhythm`): when it reads the socket itself, the
//! request's path is the worker's alone, as in a thread-per-connection
//! server, and the runtime thread's wake-up for the socket is off the round
//! trip (measured in `examples/lone_call_threads.rs`).
//!
//! A pipelining caller alone on the pool (1:100) pays the same per run of
//! requests, and worse: the worker woken for a run preempts the runtime
//! thread on its core, runs the run and writes its answers, and the
//! caller, answered in small pieces, sends its next requests in small
//! pieces too, so the runs stay short and the two threads take turns with
//! a core idle between them (BENCHMARKS: "A worker reads a pipelining
//! caller's runs"). A worker that reads the next run itself is the
//! connection's only thread, as the task is in direct dispatch.
//!
//! # What a worker takes, and what it leaves
//!
//! One `recv` per look, of up to [`RECV_SIZE`] bytes — or the rest of a
//! request whose start an earlier look read, up to [`READ_MAX`] — into the
//! loan's inbox, which keeps the start of a request whose rest has not come
//! yet.
//! A worker keeps the whole request frames at the front of what it holds —
//! each of at most [`READ_MAX`] bytes and small enough for the
//! connection's read buffer (a larger one takes the frame budget, which is
//! the task's), and not compressed — so a
//! pipelining caller's run of requests (1:100) is read, run and answered by
//! one worker, as by the task in direct dispatch: the run's calls go to the
//! pool as one task (`dispatch::run`). Anything else — a frame of
//! another kind (a `Cancel`, a ping, a stream's), a large or malformed
//! one, the end of the stream, an error — is handed back to the
//! connection's task with everything read behind it, and so is a request
//! still in part when the loan ends; the task reads those bytes before the
//! socket (`FrameReader::unread`), so nothing is lost or reordered and
//! every unusual case goes the task's usual way.
//!
//! A loan can start with the start of a request in the inbox: the task
//! read a run whose last request the stream had cut, and gave that start to
//! the loan (`PoolAnswers::seed`) rather than keep its read side for it.
//! The worker completes it as one of its own; its bytes, counted when the
//! task read them, are not counted again, here or when they go back.
//!
//! The connection side ([`TakeRequest`]) turns the frames into calls, and
//! records them for its task, under the lock that ends the loan: the task
//! that takes its read side back finds every call a worker started before
//! any frame read after it (a `Cancel` finds its call; a deadline is
//! watched). The lock is the one of the connection's answers
//! ([`PoolAnswers`]), which also closes the socket to
//! the workers before its halves drop.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use rpc_codec::{read_header, Frame, FrameKind};
use rpc_transport::{AdaptiveReadBuffer, RawSocket};

use super::PoolAnswers;

/// How much one look reads at most: a pipelining caller's run of requests
/// in one `recv`.
pub(crate) const RECV_SIZE: usize = 32 * 1024;

/// The smallest look of a loan's inbox: a connection's first look reads
/// this much, then the looks grow to [`RECV_SIZE`] as they fill (a look
/// that completes a larger request reads its rest, see [`READ_MAX`]).
const INBOX_MIN: usize = 512;

/// A loan's inbox: the bytes a worker read and has not made calls of yet.
/// Sized and reused as the connection's own read buffer is (an
/// [`AdaptiveReadBuffer`]): the requests split off it stay in use while
/// their calls run, so a look that needs room moves to a spare allocation
/// (or a fresh one) and copies only a partial request, where growing the
/// one allocation in place (`realloc`) would copy every byte read before.
/// Made at the connection's first loan and let go, whole, when the
/// connection idles: a connection that called once holds nothing of it.
#[derive(Default)]
pub(super) struct Inbox(Option<Box<AdaptiveReadBuffer>>);

impl Inbox {
    /// True when no byte is buffered.
    pub(super) fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|reads| reads.is_empty())
    }

    /// The buffered bytes.
    pub(super) fn buffer(&mut self) -> &mut BytesMut {
        self.reads().buffer()
    }

    /// Everything buffered, taken out (nothing is made for an inbox that
    /// has none).
    pub(super) fn split(&mut self) -> BytesMut {
        self.0
            .as_mut()
            .map_or_else(BytesMut::new, |reads| reads.buffer().split())
    }

    /// Lets the buffer go when nothing is buffered (and says so).
    pub(super) fn release(&mut self) -> bool {
        let empty = self.is_empty();
        if empty {
            self.0 = None;
        }
        empty
    }

    /// Bytes of memory the inbox keeps alive (its allocations).
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.0.as_ref().map_or(0, |reads| reads.held())
    }

    fn reads(&mut self) -> &mut AdaptiveReadBuffer {
        self.0
            .get_or_insert_with(|| Box::new(AdaptiveReadBuffer::new(INBOX_MIN, RECV_SIZE)))
    }
}

/// The largest request a worker reads itself; larger ones go to the
/// connection's task (and, past its read buffer, its frame budget). Above
/// [`RECV_SIZE`] a request takes more than one look: once its header is in,
/// the next look makes room for its rest and reads it in one `recv`, under
/// the loan's lock (the connection's answers wait for it: tens of
/// microseconds for the largest). A lone caller of 50 KiB requests ran
/// 2.4× the calls per second once workers read them, level with direct
/// dispatch (BENCHMARKS.md, "A light load on one connection; workers read
/// large requests"). While the worker holds such requests (their calls
/// run), the inbox keeps up to three allocations of that size — its own and
/// two spares, as the connection's read buffer does; nothing once the
/// connection idles.
pub(crate) const READ_MAX: usize = 256 * 1024;

/// The socket's receive low-water mark while its read side is lent, so
/// that the kernel does not wake the runtime thread for the requests a
/// worker takes (see `PoolAnswers::poll_news`). For a lone caller (`lone`:
/// at most its one call on the pool) past the largest request the
/// connection's workers read (`max_request`): its next request, a large one
/// included, is the worker's; a larger one the worker that looks hands
/// back (and the mark goes back to 1 with the read side). For a pipelining
/// caller's runs past one look: once more than that waits, the task is
/// woken and reads along with the worker (at 1:100:10240 a mark past the
/// largest request cost 7–10 % of the calls per second). A run's loan with
/// one call left counts as a lone caller's. On Linux a mark past the
/// socket's receive buffer grows the buffer (and clamps the window to the
/// mark until the kernel's receive-buffer tuning grows it again).
pub(crate) fn lent_lowat(max_request: usize, lone: bool) -> usize {
    if lone {
        max_request.max(RECV_SIZE) + 1
    } else {
        RECV_SIZE + 1
    }
}

/// The connection's side of a lent read: what makes calls of the requests
/// a worker read.
pub(crate) trait TakeRequest: Send + Sync {
    /// Called with the connection's answers locked, for the request frames
    /// a worker read at `received` (it drains `frames`): records each call
    /// where the connection's task finds it (before the lock is let go) and
    /// counts it in `answers` ([`PoolAnswers::reserve`]); returns what
    /// starts them (or answers their errors), run once the lock is let go —
    /// it may answer, which takes the lock.
    fn take(
        &self,
        frames: &mut Vec<Frame>,
        received: Instant,
        answers: &Arc<PoolAnswers>,
    ) -> Box<dyn FnOnce() + Send>;
}

/// What one look at the socket found, beside the whole requests it moved
/// into `frames`.
#[derive(Default)]
pub(super) struct Look {
    /// Bytes of the requests moved into `frames`.
    pub taken: usize,
    /// Something for the connection's task, which ends the loan: the bytes
    /// read from there on (maybe none), and the read's error, if it failed.
    pub hand_back: Option<(BytesMut, Option<io::Error>)>,
}

/// Reads what `socket` holds now into `inbox` (see the module docs for
/// what is kept), and moves the whole requests at its front, of at most
/// `max` bytes each and at most `room` of them, into `frames`. With more
/// than `room` whole requests, the rest goes back to the task, which reads
/// no more while the connection has `max_in_flight_per_connection` calls.
///
/// # Safety
///
/// The socket must stay open for the call, and nothing else may read it
/// meanwhile (the lent read side's lock).
pub(super) unsafe fn read_requests(
    socket: RawSocket,
    inbox: &mut Inbox,
    max: usize,
    frames: &mut Vec<Frame>,
    room: usize,
) -> Look {
    if room == 0 {
        return Look {
            taken: 0,
            hand_back: Some((inbox.split(), None)),
        };
    }
    let reads = inbox.reads();
    // A request larger than a look, begun in an earlier one: room for its
    // rest, read at once.
    let begun = match read_header(reads.buffer()) {
        Ok(Some(header)) if (RECV_SIZE as u64 + 1..=max as u64).contains(&header.frame_len()) => {
            Some(header.frame_len() as usize)
        }
        _ => None,
    };
    let buf = reads.prepare(begun);
    let rest = begun.map_or(0, |len| len.saturating_sub(buf.len()));
    let spare = buf.spare_capacity_mut();
    let want = spare.len().min(RECV_SIZE.max(rest));
    // SAFETY: the caller's contract.
    match unsafe { socket.recv_now(&mut spare[..want]) } {
        // The end of the stream: the task reads it again, after the bytes.
        Ok(0) => return hand_back(buf, None),
        Ok(n) => {
            // SAFETY: `recv_now` initialized the first `n` bytes of the
            // spare capacity it was given.
            unsafe { buf.set_len(buf.len() + n) };
            reads.record(n);
        }
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            return Look::default()
        }
        Err(e) => return hand_back(inbox.buffer(), Some(e)),
    }
    let inbox = inbox.buffer();
    let mut taken = 0;
    loop {
        let header = match read_header(inbox) {
            // The start of a frame: kept for the next look.
            Ok(None) => break,
            Ok(Some(header)) => header,
            Err(_) => {
                return Look {
                    taken,
                    ..hand_back(inbox, None)
                }
            }
        };
        let len = header.frame_len();
        let kept = frames.len() < room
            && header.kind == FrameKind::Request
            && len <= max as u64
            // Opening a compressed body takes time the loan's lock must
            // not be held for: the task opens it.
            && !rpc_codec::compression::is_compressed(header.flags);
        if !kept {
            return Look {
                taken,
                ..hand_back(inbox, None)
            };
        }
        // `len <= max`, a `usize`.
        let len = len as usize;
        if inbox.len() < len {
            // The rest of it has not come yet.
            break;
        }
        let bytes = inbox.split_to(len).freeze();
        match Frame::from_bytes(header, bytes.clone()) {
            Ok(frame) => {
                frames.push(frame);
                taken += len;
            }
            // The task reads the same bytes, and fails the same way.
            Err(_) => {
                let mut back = BytesMut::from(&bytes[..]);
                back.extend_from_slice(inbox);
                inbox.clear();
                return Look {
                    taken,
                    hand_back: Some((back, None)),
                };
            }
        }
    }
    Look {
        taken,
        hand_back: None,
    }
}

/// Everything `inbox` holds goes back to the task, with `error`.
fn hand_back(inbox: &mut BytesMut, error: Option<io::Error>) -> Look {
    Look {
        taken: 0,
        hand_back: Some((inbox.split(), error)),
    }
}
