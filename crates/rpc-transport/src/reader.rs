//! [`FrameReader`]: frames out of a byte stream.
//!
//! `next()` is cancel-safe — it only awaits inside `read_buf`, which either reads
//! or does not — so connection tasks can `select!` on it together with a shutdown
//! signal without losing bytes.

use rpc_codec::{Frame, FrameCodec};
use rpc_core::RpcError;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::codec::Decoder;

use crate::AdaptiveReadBuffer;

/// Reads frames from `R` through an adaptive buffer.
#[derive(Debug)]
pub struct FrameReader<R> {
    io: R,
    buf: AdaptiveReadBuffer,
    codec: FrameCodec,
    bytes_read: u64,
    counters: Option<std::sync::Arc<crate::IoCounters>>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader enforcing `max_frame_size`, with read sizes between `min` and `max`.
    pub fn new(io: R, max_frame_size: usize, min: usize, max: usize) -> Self {
        FrameReader {
            io,
            buf: AdaptiveReadBuffer::new(min, max),
            codec: FrameCodec::new(max_frame_size),
            bytes_read: 0,
            counters: None,
        }
    }

    /// Also counts every byte read into `counters`.
    pub fn with_counters(mut self, counters: std::sync::Arc<crate::IoCounters>) -> Self {
        self.counters = Some(counters);
        self
    }

    /// The next frame; `Ok(None)` on a clean end of stream between frames.
    /// A stream that ends inside a frame, or bytes that are not a frame, are errors.
    pub async fn next(&mut self) -> Result<Option<Frame>, RpcError> {
        loop {
            if let Some(frame) = self.codec.decode(self.buf.buffer())? {
                return Ok(Some(frame));
            }
            let frame_len = self.codec.pending_frame_len(self.buf.buffer())?;
            let dst = self.buf.prepare(frame_len);
            let n = self.io.read_buf(dst).await?;
            if n == 0 {
                let left = self.buf.buffer().len();
                if left == 0 {
                    return Ok(None);
                }
                return Err(RpcError::Protocol(format!(
                    "peer closed the stream in the middle of a frame ({left} bytes buffered)"
                )));
            }
            self.bytes_read += n as u64;
            if let Some(c) = &self.counters {
                c.add_in(n as u64);
            }
            self.buf.record(n);
        }
    }

    /// Decodes a frame that is already buffered, without reading (lets a caller
    /// drain a batch before going back to the socket).
    pub fn try_next_buffered(&mut self) -> Result<Option<Frame>, RpcError> {
        self.codec.decode(self.buf.buffer())
    }

    /// Total bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Bytes currently held by the read buffer.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }
}
