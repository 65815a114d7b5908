//! Answer frames: what a call's outcome looks like on the wire, and encoding
//! it without ever leaving a caller unanswered.
//!
//! Only an answer can exceed the frame limit (requests over it are refused
//! from their header), and `finish_call` already turns most oversize answers
//! into errors; [`encode_answer`] catches the rest at the last moment, so a
//! caller always gets a frame — the answer or its `FrameTooLarge` error —
//! instead of waiting for its timeout.

use bytes::{Bytes, BytesMut};
use rpc_codec::compression;
use rpc_codec::{Header, OutFrame};
use rpc_core::{Compression, RpcError, RpcResponse};
use tracing::warn;

use crate::config::AnswerCompression;

/// Whom an answer goes to: the request's id on its connection and the
/// serializer byte it arrived with (kept raw, so that a request naming an
/// unknown serializer is still answered in kind). Carried as one value from
/// the frame that was read to the frame that answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplyTo {
    pub id: u64,
    pub serializer: u8,
    /// The compression the answer goes in: what the request asked for, when
    /// the server answers compressed (see `AnswerCompression`); one byte, so
    /// the answer address stays two words.
    pub answer_in: Compression,
}

impl ReplyTo {
    /// The caller of a request frame, answered as `compression` says.
    #[inline]
    pub fn of(header: &Header, compression: &AnswerCompression) -> Self {
        ReplyTo {
            id: header.request_id,
            serializer: header.serializer,
            answer_in: compression.answer_in(header.flags),
        }
    }

    /// The answer frame for the call's outcome (with the metadata the
    /// handler sent back, if any), its body compressed as the caller asked
    /// and `compression` allows. Run where the call ran (a worker, in pool
    /// dispatch), so compressing an answer costs no I/O task time.
    #[inline]
    pub fn answer(
        self,
        result: Result<RpcResponse, RpcError>,
        compression: &AnswerCompression,
    ) -> OutFrame {
        match result {
            Ok(RpcResponse { body, metadata }) => {
                if self.answer_in != Compression::None {
                    return self.compressed_answer(body, metadata, compression);
                }
                let mut frame = OutFrame::response(self.id, self.serializer, body);
                frame.metadata = metadata;
                frame
            }
            Err(e) => self.error(&e),
        }
    }

    /// [`answer`](Self::answer)'s compressed case, out of the plain
    /// answer's way: the body compressed in what the caller asked for (when
    /// it is large enough and shrinks), and the flags that say so.
    #[cold]
    #[inline(never)]
    fn compressed_answer(
        self,
        body: Bytes,
        metadata: rpc_core::Metadata,
        settings: &AnswerCompression,
    ) -> OutFrame {
        let (body, used) = settings.compressor(self.answer_in).compress(body);
        let mut frame = OutFrame::response(self.id, self.serializer, body);
        frame.flags = compression::flags(used, Compression::None);
        frame.metadata = metadata;
        frame
    }

    /// The error frame for `err`.
    pub fn error(self, err: &RpcError) -> OutFrame {
        OutFrame::error(self.id, self.serializer, err)
    }

    /// The error frame for `err` when the request opened a stream: the
    /// stream's end, with its status.
    pub fn stream_error(self, err: &RpcError) -> OutFrame {
        OutFrame::stream_end(self.id, self.serializer, &Err(rpc_core::Status::from(err)))
    }
}

/// Encodes an answer frame at the end of `buf`. An answer too large for the
/// frame limit is replaced by its `FrameTooLarge` error.
pub(crate) fn encode_answer(buf: &mut BytesMut, frame: &OutFrame, max_frame: usize) {
    if let Err(e) = frame.encode(buf, max_frame) {
        let error = OutFrame::error(frame.request_id, frame.serializer, &e);
        if let Err(e) = error.encode(buf, max_frame) {
            warn!(error = %e, request_id = frame.request_id, "answer not encodable: dropped");
        }
    }
}
