//! Answer frames: what a call's outcome looks like on the wire, and encoding
//! it without ever leaving a caller unanswered.
//!
//! Only an answer can exceed the frame limit (requests over it are refused
//! from their header), and `finish_call` already turns most oversize answers
//! into errors; [`encode_answer`] catches the rest at the last moment, so a
//! caller always gets a frame — the answer or its `FrameTooLarge` error —
//! instead of waiting for its timeout.

use bytes::{Bytes, BytesMut};
use rpc_codec::OutFrame;
use rpc_core::RpcError;
use tracing::warn;

/// The binary protocol's answer frame for a call's outcome.
pub(crate) fn answer_frame(id: u64, serializer: u8, result: Result<Bytes, RpcError>) -> OutFrame {
    match result {
        Ok(body) => OutFrame::response(id, serializer, body),
        Err(e) => OutFrame::error(id, serializer, &e),
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
