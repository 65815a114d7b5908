//! [`AdaptiveReadBuffer`]: a read buffer that sizes each read from recent history.
//!
//! Modelled on Netty's `AdaptiveRecvByteBufAllocator`: a read that fills the
//! space offered grows the next read size by four steps of the size table at
//! once; two reads in a row that would have fit one step lower shrink it by one.
//! On top of that, when the decoder already knows a large frame's total size, the
//! buffer reserves exactly that once instead of growing through many small reads
//! (growing through small reads is what makes a fixed strategy dip at large
//! payloads). When the buffer is empty and
//! much larger than the current read size, it is released, so an idle
//! connection holds only `min` bytes.
//!
//! A new buffer starts small: until a read fills the space it was offered, a
//! read into an empty buffer offers only `min` bytes (512 by default), not the
//! 8 KiB starting read size. Most connections begin with a small frame, and
//! many then sit idle: a server with 10 000 idle connections allocated 8 KiB of
//! read buffer for each, 8 of the 26 KiB a connection cost (see BENCHMARKS.md,
//! "Idle connections"). The first read that fills its offer switches to the
//! adaptive sizes above, so a connection that streams pays one extra small
//! read; a frame whose size is known is reserved at once as before.
//!
//! Decoded frames are split off as `Bytes` that share this allocation; that is
//! why shrinking replaces the buffer rather than reallocating it in place.
//!
//! # Reads start over at the front
//!
//! Once every frame read is decoded and none is still in use, the next read
//! goes to the start of the allocation again instead of on behind them. A
//! connection then touches the same few KiB read after read, the ones it
//! touched last, rather than walking through the whole allocation (up to the
//! read size and half again): at 1000 connections with 1 KiB calls the
//! server's resident memory fell from 154 to 91 MiB, and the memory its reads
//! touch with it.
//!
//! # Two allocations, alternating
//!
//! When the buffer needs room while frames split off it are still in use (a
//! caller holding its answer, a pool job its request), it cannot be reclaimed
//! and a fresh allocation takes its place. The old one is kept as a *spare*
//! (two at most): by the next time room is needed its frames have usually been
//! dropped, and the spare is taken back instead of allocating again. Without it, large
//! frames (100 KiB at two calls in flight) cost a fresh allocation per frame,
//! which glibc serves from memory it had just returned to the kernel: 1.75
//! page faults per call, and the payload sweep's throughput dipped from 50 KiB
//! to 100 KiB.

use bytes::BytesMut;

/// Size classes: 512 B doubling up to 16 MiB.
const SIZES: [usize; 16] = [
    512,
    1 << 10,
    2 << 10,
    4 << 10,
    8 << 10,
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    16 << 20,
];
const GROW_STEPS: usize = 4;
const SHRINK_STEPS: usize = 1;
/// Previous allocations kept for reuse (see the module docs): at two calls in
/// flight, one spare was not enough (both frames still held when the third
/// arrives).
const SPARES: usize = 2;
/// Room worth reading into rather than allocating anew, when frames are small.
const MIN_ROOM: usize = 16 << 10;

/// A previous allocation of the buffer, kept for reuse.
#[derive(Debug, Default)]
struct Spare {
    /// A cleared view of the allocation.
    buf: BytesMut,
    /// The allocation's size, as last seen through the buffer's view (a
    /// cleared view no longer shows it); 0 for none.
    size: usize,
}

/// An adaptively sized read buffer.
#[derive(Debug)]
pub struct AdaptiveReadBuffer {
    buf: BytesMut,
    /// Previous allocations, newest first, while frames split off them may
    /// still be in use (`BytesMut::new()`, allocating nothing, otherwise).
    spares: [Spare; SPARES],
    /// The size of `buf`'s allocation (see [`Spare::size`]).
    buf_size: usize,
    index: usize,
    min_index: usize,
    max_index: usize,
    decrease_now: bool,
    /// True until a read fills what it was offered: reads into an empty buffer
    /// then offer only `SIZES[min_index]`, so idle connections stay small.
    starting: bool,
    /// The space offered to the last read (by `prepare`).
    offered: usize,
    /// The largest frame assembled recently (halved at every read between
    /// frames): a buffer sized for the frames actually streaming is not
    /// "oversized".
    recent_frame: usize,
    /// `prepare` offered a read into the empty buffer: the read that
    /// follows halves `recent_frame` (in `record`). Per read, not per
    /// `prepare`: a connection that polls its socket prepares many times
    /// for each read that finds bytes.
    between_frames: bool,
}

fn index_for(size: usize) -> usize {
    SIZES
        .iter()
        .position(|&s| s >= size)
        .unwrap_or(SIZES.len() - 1)
}

impl AdaptiveReadBuffer {
    /// A buffer whose read size moves between `min` and `max` bytes, starting at 8 KiB
    /// (clamped into that range) once a first, `min`-sized read has been filled.
    /// No memory is allocated until the first read.
    pub fn new(min: usize, max: usize) -> Self {
        let min_index = index_for(min);
        let max_index = index_for(max).max(min_index);
        let index = index_for(8 << 10).clamp(min_index, max_index);
        AdaptiveReadBuffer {
            buf: BytesMut::new(),
            spares: Default::default(),
            buf_size: 0,
            index,
            min_index,
            max_index,
            decrease_now: false,
            starting: true,
            offered: 0,
            recent_frame: 0,
            between_frames: false,
        }
    }

    /// The size the next read will offer.
    pub fn next_read_size(&self) -> usize {
        SIZES[self.index]
    }

    /// The buffered, not yet decoded bytes.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes currently allocated (for memory accounting and tests), the
    /// spare included.
    pub fn capacity(&self) -> usize {
        self.buf.capacity() + self.spares.iter().map(|s| s.size).sum::<usize>()
    }

    /// Bytes this buffer keeps alive: its allocation (also the part frames
    /// split off it use) and its spares.
    pub fn held(&self) -> usize {
        let own = self.buf_size.max(self.buf.capacity());
        own + self.spares.iter().map(|s| s.size).sum::<usize>()
    }

    /// True when no undecoded byte is buffered.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Lets go of every allocation when nothing is buffered (an idle
    /// connection): the buffer starts small again, as a new one does. Frames
    /// split off it keep their memory until they are dropped. False (and
    /// nothing released) while a partial frame is buffered.
    pub fn release(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        self.buf = BytesMut::new();
        self.buf_size = 0;
        self.spares = Default::default();
        self.recent_frame = 0;
        self.between_frames = false;
        self.starting = true;
        true
    }

    /// Makes room for the next read and returns the buffer to read into.
    /// `frame_len` is the total size of the frame being assembled, when known.
    pub fn prepare(&mut self, frame_len: Option<usize>) -> &mut BytesMut {
        self.buf_size = self.buf_size.max(self.buf.capacity());
        if self.buf.is_empty() && self.buf.capacity() < self.buf_size {
            // Every frame read so far is decoded, and when none is still in
            // use, the next read goes to the start of the allocation.
            let _ = self.buf.try_reclaim(self.buf_size);
        }
        let mut want = self.next_read_size();
        if self.starting && self.buf.is_empty() {
            // Nothing buffered and no read has filled its offer yet: stay small.
            want = SIZES[self.min_index].min(want);
        }
        // The rest of the frame being assembled: what this read must make
        // room for (reading past it is only an optimisation).
        let mut frame_rest = 0;
        if let Some(total) = frame_len {
            frame_rest = total.saturating_sub(self.buf.len());
            want = want.max(frame_rest);
            self.recent_frame = self.recent_frame.max(total);
        }
        if self.buf.is_empty() {
            // Oversized for the read size *and* for the frames that recently
            // streamed through: give the memory back, the spares' too. (Large
            // frames arrive in several reads, which shrink the read size; on
            // that alone the buffer was dropped after every 100 KiB frame and
            // allocated anew for the next, a page fault per 4 KiB read.)
            let sized_for = want.max(self.recent_frame).max(SIZES[self.min_index]);
            if self.buf.capacity() > 4 * sized_for {
                self.buf = BytesMut::new();
                self.buf_size = 0;
            }
            // A spare is let go on the same terms (held frames keep their
            // memory alive anyway; a spare must not keep it beyond them).
            for spare in &mut self.spares {
                if spare.size > 4 * sized_for {
                    *spare = Spare::default();
                }
            }
            // Frames of that size count less and less once they stop coming
            // (at the read, see `between_frames`).
            self.between_frames = true;
        } else {
            self.between_frames = false;
        }
        let room = self.buf.capacity() - self.buf.len();
        // Enough to go on with when the full read size would take a new
        // allocation: the rest of the frame, or room for a frame like the
        // recent ones (the read size overshoots: one full read grows it four
        // steps, 64 KiB to 1 MiB, and allocating that for 100 KiB frames faulted
        // in fresh pages on every call).
        let enough = if frame_len.is_some() {
            frame_rest
        } else {
            self.recent_frame.max(MIN_ROOM)
        }
        .max(SIZES[self.min_index])
        .min(want);
        if room < want && !self.buf.try_reclaim(want) && room < enough {
            // The allocation is still shared with frames in use, or too small.
            // Move to a previous allocation whose frames are gone, else to a
            // fresh one sized for this read; either way only the partial
            // frame is copied over (`BytesMut::reserve` would `realloc` the
            // old one, copying every byte already consumed along with it, a
            // cost that shows at many calls in flight).
            let needed = self.buf.len() + enough;
            let reusable = self
                .spares
                .iter_mut()
                .position(|s| s.buf.try_reclaim(needed));
            let mut next = match reusable {
                Some(i) => std::mem::take(&mut self.spares[i]),
                None => {
                    // Some slack for the next partial frame, unless this
                    // reserves one known (possibly large) frame.
                    let slack = if frame_len.is_some() { 0 } else { want / 2 };
                    let buf = BytesMut::with_capacity(self.buf.len() + want + slack);
                    Spare {
                        size: buf.capacity(),
                        buf,
                    }
                }
            };
            next.buf.extend_from_slice(&self.buf);
            self.buf.clear();
            let old = Spare {
                buf: std::mem::replace(&mut self.buf, next.buf),
                size: std::mem::replace(&mut self.buf_size, next.size),
            };
            match reusable {
                // The spare taken and this allocation trade places.
                Some(i) => self.spares[i] = old,
                // This one becomes the newest spare; the oldest, still in use
                // after all this time, is let go.
                None => {
                    self.spares.rotate_right(1);
                    self.spares[0] = old;
                }
            }
        }
        self.offered = self.buf.capacity() - self.buf.len();
        &mut self.buf
    }

    /// Records that a read returned `n` bytes, adapting the next read size.
    pub fn record(&mut self, n: usize) {
        if std::mem::take(&mut self.between_frames) {
            self.recent_frame /= 2;
        }
        if self.starting {
            if n < self.offered {
                // A small read that fit: no evidence for any size yet.
                return;
            }
            // Filled: from now on the adaptive sizes apply. A filled small
            // offer is not a small read, so it only counts if it reached the
            // read size.
            self.starting = false;
            if n < SIZES[self.index] {
                return;
            }
        }
        let lower = self.index.saturating_sub(SHRINK_STEPS).max(self.min_index);
        if n <= SIZES[lower] && self.index > self.min_index {
            if self.decrease_now {
                self.index = lower;
                self.decrease_now = false;
            } else {
                self.decrease_now = true;
            }
        } else if n >= SIZES[self.index] {
            self.index = (self.index + GROW_STEPS).min(self.max_index);
            self.decrease_now = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_fast_and_shrinks_slowly() {
        let mut b = AdaptiveReadBuffer::new(512, 1 << 20);
        assert_eq!(b.next_read_size(), 8 << 10);
        b.record(8 << 10);
        assert_eq!(
            b.next_read_size(),
            128 << 10,
            "a full read grows four steps"
        );
        b.record(100);
        assert_eq!(
            b.next_read_size(),
            128 << 10,
            "one small read is not enough"
        );
        b.record(100);
        assert_eq!(b.next_read_size(), 64 << 10, "two in a row shrink one step");
        for _ in 0..100 {
            b.record(10);
        }
        assert_eq!(b.next_read_size(), 512, "never below min");
        for _ in 0..10 {
            b.record(usize::MAX);
        }
        assert_eq!(b.next_read_size(), 1 << 20, "never above max");
    }

    #[test]
    fn a_held_allocation_is_taken_back_once_its_frames_are_dropped() {
        let mut b = AdaptiveReadBuffer::new(512, 1 << 20);
        let frame = vec![7u8; 100 << 10];
        let buf = b.prepare(Some(frame.len()));
        buf.extend_from_slice(&frame);
        let first = buf.as_ptr();
        let held = buf.split().freeze();
        // The next frame cannot go where `held` still lives.
        let buf = b.prepare(Some(frame.len()));
        let second = buf.as_ptr();
        assert_ne!(second, first);
        buf.extend_from_slice(&frame);
        let held2 = buf.split().freeze();
        drop(held);
        // The first allocation is free again: reused, not a third one.
        let buf = b.prepare(Some(frame.len()));
        assert_eq!(buf.as_ptr(), first);
        assert_eq!(held2.len(), frame.len());
    }

    #[test]
    fn reserves_a_known_frame_at_once() {
        let mut b = AdaptiveReadBuffer::new(512, 64 << 10);
        b.prepare(None).extend_from_slice(&[0u8; 28]);
        let buf = b.prepare(Some(3 << 20));
        assert!(buf.capacity() - buf.len() >= (3 << 20) - 28);
    }

    #[test]
    fn starts_small_until_a_read_fills_its_offer() {
        let mut b = AdaptiveReadBuffer::new(512, 1 << 20);
        assert!(
            b.prepare(None).capacity() < 1024,
            "an idle connection holds ~min"
        );
        // A small frame arrives and is decoded: the buffer stays small.
        b.record(60);
        b.buffer().clear();
        assert!(b.prepare(None).capacity() < 1024);
        assert_eq!(
            b.next_read_size(),
            8 << 10,
            "no adaptation from unfilled reads"
        );
        // A read fills the small offer: the full read size applies from now on.
        let offered = b.prepare(None).capacity();
        b.record(offered);
        b.buffer().clear();
        let buf = b.prepare(None);
        assert!(buf.capacity() >= 8 << 10, "capacity {}", buf.capacity());
        // A large frame is still reserved at once while starting.
        let mut c = AdaptiveReadBuffer::new(512, 1 << 20);
        c.prepare(None).extend_from_slice(&[0u8; 28]);
        let buf = c.prepare(Some(2 << 20));
        assert!(buf.capacity() - buf.len() >= (2 << 20) - 28);
    }

    #[test]
    fn releases_memory_when_idle() {
        let mut b = AdaptiveReadBuffer::new(512, 1 << 20);
        b.prepare(Some(4 << 20));
        assert!(b.capacity() >= 4 << 20);
        // The next (small) read still has the large frame's buffer: frames of
        // that size may be streaming.
        b.prepare(None);
        assert!(b.capacity() >= 4 << 20);
        // Small reads only: the buffer is given back within a few of them.
        for _ in 0..40 {
            b.record(10);
            b.prepare(None);
        }
        assert!(b.capacity() < 64 << 10, "capacity {}", b.capacity());
    }

    #[test]
    fn release_lets_go_of_everything_but_a_partial_frame() {
        let mut b = AdaptiveReadBuffer::new(512, 1 << 20);
        let buf = b.prepare(Some(256 << 10));
        buf.extend_from_slice(&vec![0u8; 256 << 10]);
        let held = buf.split().freeze();
        b.prepare(None);
        assert!(b.held() >= 256 << 10);
        assert!(b.release());
        assert_eq!(b.held(), 0);
        assert!(b.prepare(None).capacity() < 1024, "starts small again");
        // A partial frame is kept.
        b.buffer().extend_from_slice(&[1, 2, 3]);
        assert!(!b.release());
        assert_eq!(b.buffer().len(), 3);
        drop(held);
    }

    #[test]
    fn a_large_spare_is_let_go_once_small_frames_follow() {
        let mut b = AdaptiveReadBuffer::new(512, 16 << 20);
        // A 4 MiB frame, still held (by a handler, say) when the next read
        // comes: its allocation becomes a spare.
        let buf = b.prepare(Some(4 << 20));
        buf.extend_from_slice(&vec![0u8; 4 << 20]);
        let held = buf.split().freeze();
        b.prepare(None);
        assert!(b.capacity() >= 4 << 20, "the spare still counts");
        drop(held);
        // Small reads only: the spare goes within a few of them.
        for _ in 0..40 {
            b.record(10);
            b.prepare(None);
        }
        assert!(b.capacity() < 64 << 10, "capacity {}", b.capacity());
    }

    #[test]
    fn a_buffer_with_room_for_the_rest_of_the_frame_is_read_into() {
        let mut b = AdaptiveReadBuffer::new(512, 1 << 20);
        // Grow the read size to its top.
        for _ in 0..4 {
            b.record(usize::MAX);
        }
        assert_eq!(b.next_read_size(), 1 << 20);
        // A 100 KiB frame, half read, while an earlier frame of the same
        // allocation is still held: the read size would want 1 MiB more, the
        // frame only its other half, for which there is room.
        let buf = b.prepare(Some(300 << 10));
        buf.extend_from_slice(&[1u8; 100 << 10]);
        let held = buf.split().freeze();
        buf.extend_from_slice(&[2u8; 50 << 10]);
        let at = buf.as_ptr();
        let buf = b.prepare(Some(100 << 10));
        assert_eq!(buf.as_ptr(), at, "no new allocation");
        assert!(buf.capacity() - buf.len() >= 50 << 10);
        drop(held);
    }

    #[test]
    fn reads_go_back_to_the_start_once_every_frame_is_dropped() {
        let mut b = AdaptiveReadBuffer::new(512, 1 << 20);
        b.record(usize::MAX);
        let buf = b.prepare(None);
        let start = buf.as_ptr();
        // Three small frames read and decoded, then dropped.
        buf.extend_from_slice(&[3u8; 3000]);
        let frames: Vec<_> = (0..3).map(|_| buf.split_to(1000).freeze()).collect();
        // Still held: the next read goes on behind them.
        assert_ne!(b.prepare(None).as_ptr(), start);
        drop(frames);
        // Dropped: the next read lands where the first did, in memory a
        // connection touched last (what keeps many connections' reads in
        // the cache), and the allocation keeps its size.
        let buf = b.prepare(None);
        assert_eq!(buf.as_ptr(), start);
        assert!(buf.capacity() >= 128 << 10, "capacity {}", buf.capacity());
        // A partial frame is never moved for it.
        buf.extend_from_slice(&[4u8; 10]);
        let at = buf.as_ptr();
        assert_eq!(b.prepare(None).as_ptr(), at);
    }
}
