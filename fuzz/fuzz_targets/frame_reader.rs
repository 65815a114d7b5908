//! Fuzzes `rpc_transport::FrameReader`: any bytes, arriving in any chunk sizes
//! (with reads that are sometimes `Pending`, and `next()` sometimes cancelled
//! there), must give exactly the frames and over-size announcements that a
//! plain sequential reading of the same bytes gives, then a clean end or an
//! error — never a panic, a hang, or a read buffer beyond its bound.
//!
//! Input: 9 parameter bytes, then the stream.
//!
//! | byte | meaning |
//! |------|---------|
//! | 0    | `max_frame_size`: 64..=4096 |
//! | 1    | `read_max`: 64..=1024 (frames above get their own allocation) |
//! | 2    | `read_min`: 64..=1024 (may exceed `read_max`) |
//! | 3    | flags: bit 0 budget, bit 1 cancel `next()` when it is `Pending`, bit 2 drain with `try_next_buffered`, bits 4-5 a `Pending` every 0/2/3/5 reads, bits 6-7 keep the last 0-3 frames alive (as calls in flight would; their budget reservations are dropped at once) |
//! | 4    | budget bytes: 64..=16384 |
//! | 5-8  | read chunk sizes, cycled (see [`chunk_size`]) |
//!
//! Run: `cd fuzz && cargo fuzz run --sanitizer none frame_reader corpus/frame_reader seeds/frame_reader -- -max_total_time=60`
#![no_main]

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rpc_codec::{read_header, Frame, Header};
use rpc_transport::{FrameBudget, FrameReader, Inbound};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::runtime::Runtime;

thread_local! {
    /// One runtime for every input (building one per input would dominate).
    static RT: Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
}

const PARAMS: usize = 9;

/// 0..=255 onto lo..=hi.
fn scale(b: u8, lo: usize, hi: usize) -> usize {
    lo + (b as usize * (hi - lo)) / 255
}

/// A read chunk size: 1..=64, 16-byte steps to 1009, 256-byte steps to 16 129,
/// or whatever the reader offers.
fn chunk_size(b: u8) -> usize {
    let low = (b & 63) as usize;
    match b >> 6 {
        0 => 1 + low,
        1 => 1 + low * 16,
        2 => 1 + low * 256,
        _ => usize::MAX,
    }
}

/// An in-memory stream returning `data` in the given chunk sizes; every
/// `pending_every`-th read is first `Pending` once (waking at once).
struct Chunked<'a> {
    data: &'a [u8],
    chunks: [usize; 4],
    next_chunk: usize,
    pending_every: u32,
    reads: u32,
    pended: bool,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.reads += 1;
        if this.pending_every != 0 && this.reads.is_multiple_of(this.pending_every) && !this.pended
        {
            this.pended = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.pended = false;
        let want = this.chunks[this.next_chunk % this.chunks.len()];
        this.next_chunk += 1;
        let n = want.min(buf.remaining()).min(this.data.len());
        buf.put_slice(&this.data[..n]);
        this.data = &this.data[n..];
        Poll::Ready(Ok(()))
    }
}

/// What reading `data` front to back must give.
#[derive(Debug)]
enum Expected {
    Frame(Frame),
    TooLarge(Header),
}

/// The reference: the items of `data` in order, and whether it ends cleanly
/// (between frames) rather than in an error.
fn reference(data: &[u8], max_frame_size: usize) -> (Vec<Expected>, bool) {
    let mut items = Vec::new();
    let mut at = 0;
    loop {
        let rest = &data[at..];
        let header = match read_header(rest) {
            Ok(Some(h)) => h,
            Ok(None) => return (items, rest.is_empty()),
            Err(_) => return (items, false),
        };
        let total = header.frame_len();
        if total > max_frame_size as u64 {
            items.push(Expected::TooLarge(header));
            if (rest.len() as u64) < total {
                return (items, false);
            }
        } else {
            if (rest.len() as u64) < total {
                return (items, false);
            }
            let bytes = Bytes::copy_from_slice(&rest[..total as usize]);
            match Frame::from_bytes(header, bytes) {
                Ok(f) => items.push(Expected::Frame(f)),
                Err(_) => return (items, false),
            }
        }
        at += total as usize;
    }
}

/// `buffer_capacity()`'s bound as the code sizes things today (always below
/// the generous bound). `own` = max(read_max, read_min): frames above it get
/// their own allocation; `s` = the largest read size (sizes are powers of two
/// from 512 up, covering `own`). One allocation of the adaptive buffer holds
/// at most either fewer than a header's bytes, a read and half a read of
/// slack (no frame length known), or a partial frame of at most `own` bytes
/// and a read (frame length known). `held()` counts an allocation as up to
/// `own` more than it is (it adds the buffered bytes to a capacity that
/// includes them). The buffer and its two spares are three such; a large
/// frame's allocation is its exact size, at most `max_frame_size`.
fn tight_bound(max_frame_size: usize, own: usize) -> usize {
    let s = own.next_power_of_two().max(512);
    let one = (28 + s + s / 2).max(own + s);
    3 * (one + own) + max_frame_size
}

struct Check<'a> {
    expected: &'a [Expected],
    seen: usize,
    max_frame_size: usize,
    own_allocation_above: usize,
    budget: Option<FrameBudget>,
    /// What the reader may hold at any time, whatever the sizing details.
    bound: usize,
    /// What the sizing rules of `read_buffer.rs` and `reader.rs`, as written,
    /// let it hold (see [`tight_bound`]).
    tight: usize,
    /// The last frames, kept alive (at most `hold`).
    held: VecDeque<Frame>,
    hold: usize,
}

impl Check<'_> {
    fn capacity(&self, capacity: usize) {
        assert!(
            capacity <= self.bound,
            "the reader holds {capacity} bytes, over the bound {} \
             (max_frame_size {}, max(read_max, read_min) {})",
            self.bound,
            self.max_frame_size,
            self.own_allocation_above
        );
        assert!(
            capacity <= self.tight,
            "the reader holds {capacity} bytes, more than the read buffer's sizing rules \
             allow ({}; max_frame_size {}, max(read_max, read_min) {}): a regression, or \
             the rules changed and tight_bound must follow",
            self.tight,
            self.max_frame_size,
            self.own_allocation_above
        );
    }

    /// One item from the reader: the next one expected. Its reservation is
    /// dropped here; the frame too, or kept among the last `hold` frames.
    fn item(&mut self, inbound: Inbound) {
        let expected = self.expected.get(self.seen);
        self.seen += 1;
        match inbound {
            Inbound::Frame(frame, reserved) => {
                assert_eq!(frame.body.len() as u64, frame.header.body_len as u64);
                assert!(frame.header.frame_len() <= self.max_frame_size as u64);
                match expected {
                    Some(Expected::Frame(f)) => assert_eq!(&frame, f, "a different frame"),
                    other => panic!("got {frame:?}, expected {other:?}"),
                }
                match (&self.budget, &reserved) {
                    (None, Some(_)) => panic!("a reservation without a budget"),
                    (Some(budget), Some(_)) => {
                        let len = frame.header.frame_len() as usize;
                        assert!(
                            len > self.own_allocation_above,
                            "a reservation for a small frame ({len} bytes)"
                        );
                        // Every earlier reservation was dropped.
                        assert_eq!(budget.available(), budget.bytes() - len.min(budget.bytes()));
                    }
                    (_, None) => {}
                }
                drop(reserved);
                self.held.push_back(frame);
                if self.held.len() > self.hold {
                    self.held.pop_front();
                }
                if let Some(budget) = &self.budget {
                    assert_eq!(budget.available(), budget.bytes(), "given back");
                }
            }
            Inbound::TooLarge { header, max } => {
                assert_eq!(max, self.max_frame_size);
                assert!(header.frame_len() > max as u64);
                match expected {
                    Some(Expected::TooLarge(h)) => assert_eq!(&header, h),
                    other => panic!("got TooLarge {header:?}, expected {other:?}"),
                }
            }
        }
    }

    /// The end: a clean one exactly where the reference ends cleanly, an
    /// error where it fails, after every expected item.
    fn end(&self, clean: bool, expected_clean: bool) {
        assert_eq!(self.seen, self.expected.len(), "items missing");
        assert_eq!(clean, expected_clean, "clean end vs. error");
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < PARAMS {
        return;
    }
    let (p, stream) = data.split_at(PARAMS);
    let max_frame_size = scale(p[0], 64, 4096);
    let read_max = scale(p[1], 64, 1024);
    let read_min = scale(p[2], 64, 1024);
    let flags = p[3];
    let with_budget = flags & 1 != 0;
    let cancel = flags & 2 != 0;
    let drain = flags & 4 != 0;
    let pending_every = [0, 2, 3, 5][((flags >> 4) & 3) as usize];
    let hold = (flags >> 6) as usize;
    let budget = with_budget.then(|| FrameBudget::new(scale(p[4], 64, 16384)));
    let io = Chunked {
        data: stream,
        chunks: [p[5], p[6], p[7], p[8]].map(chunk_size),
        next_chunk: 0,
        pending_every,
        reads: 0,
        pended: false,
    };

    let (expected, expected_clean) = reference(stream, max_frame_size);
    let own_allocation_above = read_max.max(read_min);
    let mut check = Check {
        expected: &expected,
        seen: 0,
        max_frame_size,
        own_allocation_above,
        budget: budget.clone(),
        held: VecDeque::new(),
        hold,
        // The adaptive buffer's allocation and its two spares, each a few
        // read sizes at most, plus one large frame's own allocation (at most
        // max_frame_size): generous, so only unbounded growth trips it.
        bound: 4 * (max_frame_size + own_allocation_above) + (64 << 10),
        tight: tight_bound(max_frame_size, own_allocation_above),
    };

    let mut reader = FrameReader::new(io, max_frame_size, read_min, read_max);
    if let Some(budget) = budget {
        reader = reader.with_budget(budget);
    }

    RT.with(|rt| {
        rt.block_on(async {
            loop {
                let next = if cancel {
                    // Poll once; on Pending, drop the future (next() is
                    // cancel-safe) and start again.
                    let polled = {
                        let mut fut = pin!(reader.next());
                        poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
                    };
                    check.capacity(reader.buffer_capacity());
                    match polled {
                        Poll::Ready(r) => r,
                        Poll::Pending => continue,
                    }
                } else {
                    reader.next().await
                };
                check.capacity(reader.buffer_capacity());
                match next {
                    Ok(Some(inbound)) => check.item(inbound),
                    Ok(None) => {
                        assert_eq!(reader.bytes_read(), stream.len() as u64, "all read");
                        return check.end(true, expected_clean);
                    }
                    Err(e) => return error(&check, e, expected_clean),
                }
                if drain {
                    loop {
                        match reader.try_next_buffered() {
                            Ok(Some(inbound)) => check.item(inbound),
                            Ok(None) => break,
                            Err(e) => return error(&check, e, expected_clean),
                        }
                        check.capacity(reader.buffer_capacity());
                    }
                }
            }
        })
    });
});

fn error(check: &Check<'_>, e: impl std::fmt::Display, expected_clean: bool) {
    let _ = e.to_string();
    check.end(false, expected_clean);
}
