//! A client connection's reader task: reads answer frames, completes
//! their calls (one lock and the wakers outside it per read), routes
//! stream frames, polls for a lone caller's next answer (`busy_poll`),
//! and, when the connection breaks, fails every pending call with the
//! reason.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rpc_codec::{Code, Frame, FrameKind, OutFrame, Status, CONNECTION_REQUEST_ID};
use rpc_core::RpcError;
use tokio::io::AsyncRead;
use tracing::{debug, warn};

use super::Shared;
use crate::{BusyPoll, FrameReader, FrameWriter, Inbound, ReadNow};

pub(super) async fn read_loop<R: AsyncRead + ReadNow + Unpin>(
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
