//! The read side of a connection's socket lent to the worker pool: a worker
//! that has just written a lone caller's answer reads the caller's next
//! request itself, and starts it, while the connection's task sleeps.
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
//! # What a worker takes, and what it leaves
//!
//! One `recv` per look, into a buffer of [`READ_MAX`] bytes on the worker's
//! stack. A worker keeps what it read only when it is exactly one whole
//! request frame, small enough for the connection's read buffer (a larger
//! one takes the frame budget, which is the task's) and not compressed;
//! anything else — nothing yet, a partial frame, several
//! frames, a frame of another kind (a `Cancel`, a ping, a stream's), a large
//! or malformed one, the end of the stream, an error — is handed back to the
//! connection's task with the bytes read, which it reads before the socket
//! (`FrameReader::unread`), so nothing is lost or reordered and every
//! unusual case goes the task's usual way.
//!
//! The connection side ([`TakeRequest`]) turns the frame into a call, and
//! records it for its task, under the lock that ends the loan: the task
//! that takes its read side back finds every call a worker started before
//! any frame read after it (a `Cancel` finds its call; a deadline is
//! watched). The lock is the one of the connection's answers
//! ([`PoolAnswers`](super::PoolAnswers)), which also closes the socket to
//! the workers before its halves drop.

use std::io;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use rpc_codec::{read_header, Frame, FrameKind};
use rpc_transport::RawSocket;

use super::PoolAnswers;

/// The largest request a worker reads itself; larger ones go to the
/// connection's task (and its frame budget).
pub(crate) const READ_MAX: usize = 8 * 1024;

/// The connection's side of a lent read: what makes a call of a request a
/// worker read.
pub(crate) trait TakeRequest: Send + Sync {
    /// Called with the connection's answers locked, for a request frame a
    /// worker read at `received`: records the call where the connection's
    /// task finds it (before the lock is let go) and counts it in `answers`
    /// ([`PoolAnswers::reserve`]); returns what starts it (or answers its
    /// error), run once the lock is let go — it may answer, which takes the
    /// lock.
    fn take(
        &self,
        frame: Frame,
        received: Instant,
        answers: &Arc<PoolAnswers>,
    ) -> Box<dyn FnOnce() + Send>;
}

/// What one look at the socket found.
pub(super) enum Found {
    /// Nothing to read yet.
    Nothing,
    /// One whole request, and nothing behind it.
    Request(Frame, usize),
    /// Something for the connection's task: the bytes read (maybe none), and
    /// the read's error, if it failed.
    HandBack(BytesMut, Option<io::Error>),
}

/// Reads what `socket` holds now (see the module docs for what is kept):
/// a request of at most `max` bytes (and [`READ_MAX`]) is kept.
///
/// # Safety
///
/// The socket must stay open for the call, and nothing else may read it
/// meanwhile (the lent read side's lock).
pub(super) unsafe fn read_request(socket: RawSocket, max: usize) -> Found {
    let mut scratch = [MaybeUninit::<u8>::uninit(); READ_MAX];
    // SAFETY: the caller's contract.
    let n = match unsafe { socket.recv_now(&mut scratch) } {
        Ok(n) => n,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            return Found::Nothing
        }
        Err(e) => return Found::HandBack(BytesMut::new(), Some(e)),
    };
    // SAFETY: `recv_now` initialized the first `n` bytes (`n` is within
    // the slice it was given).
    let read = unsafe { &*(&scratch[..n] as *const [MaybeUninit<u8>] as *const [u8]) };
    match read_header(read) {
        Ok(Some(header))
            if header.kind == FrameKind::Request
                && header.frame_len() == n as u64
                && n <= max
                // Opening a compressed body takes time the loan's lock
                // must not be held for: the task opens it.
                && !rpc_codec::compression::is_compressed(header.flags) =>
        {
            match Frame::from_bytes(header, Bytes::copy_from_slice(read)) {
                Ok(frame) => Found::Request(frame, n),
                // The task reads the same bytes, and fails the same way.
                Err(_) => Found::HandBack(BytesMut::from(read), None),
            }
        }
        _ => Found::HandBack(BytesMut::from(read), None),
    }
}
