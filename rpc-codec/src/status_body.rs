//! The body of an error response: a [`Status`]'s message and details, field by
//! field.
//!
//! The code itself travels in the header's status byte; the body carries the
//! rest as a protobuf message (prost), so typed details — a frame's size and
//! limit, a connection limit, a deadline — reach the caller as numbers, not as
//! text to be parsed back:
//!
//! ```text
//! message StatusBody {
//!   string message    = 1;   // for people
//!   bytes  details    = 2;   // the application's own, opaque
//!   uint32 detail     = 3;   // which typed detail follows: 0 none, 1 frame size,
//!                            // 2 connection limit, 3 deadline, 4 serializer
//!   uint64 size       = 4;   // frame size: size, max
//!   uint64 max        = 5;   // also connection limit: max
//!   string limit      = 6;   // connection limit: the setting's name
//!   bool   evicted    = 7;   // connection limit: closed to make room
//!   uint64 timeout_ms = 8;   // deadline
//!   uint32 serializer = 9;   // serializer id
//! }
//! ```
//!
//! A body that is not such a message (a peer of another version, a bug) still
//! fails the call with the code the header names: its bytes become the message.

use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use rpc_core::{Code, Detail, Status};

#[derive(Clone, PartialEq, prost::Message)]
struct StatusBody {
    #[prost(string, tag = "1")]
    message: String,
    #[prost(bytes = "bytes", tag = "2")]
    details: Bytes,
    #[prost(uint32, tag = "3")]
    detail: u32,
    #[prost(uint64, tag = "4")]
    size: u64,
    #[prost(uint64, tag = "5")]
    max: u64,
    #[prost(string, tag = "6")]
    limit: String,
    #[prost(bool, tag = "7")]
    evicted: bool,
    #[prost(uint64, tag = "8")]
    timeout_ms: u64,
    #[prost(uint32, tag = "9")]
    serializer: u32,
}

const DETAIL_NONE: u32 = 0;
const DETAIL_FRAME_SIZE: u32 = 1;
const DETAIL_CONNECTION_LIMIT: u32 = 2;
const DETAIL_DEADLINE: u32 = 3;
const DETAIL_SERIALIZER: u32 = 4;

/// Encodes `status`'s message and details as an error response's body.
pub fn encode(status: &Status) -> Bytes {
    let mut body = StatusBody {
        message: status.message().to_owned(),
        details: status.details().clone(),
        ..StatusBody::default()
    };
    match status.detail() {
        Detail::FrameSize { size, max } => {
            body.detail = DETAIL_FRAME_SIZE;
            body.size = *size;
            body.max = *max;
        }
        Detail::ConnectionLimit {
            limit,
            max,
            evicted,
        } => {
            body.detail = DETAIL_CONNECTION_LIMIT;
            body.limit = limit.clone();
            body.max = *max;
            body.evicted = *evicted;
        }
        Detail::Deadline { timeout } => {
            body.detail = DETAIL_DEADLINE;
            body.timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        }
        Detail::Serializer { id } => {
            body.detail = DETAIL_SERIALIZER;
            body.serializer = u32::from(*id);
        }
        _ => body.detail = DETAIL_NONE,
    }
    Bytes::from(body.encode_to_vec())
}

/// Reads the status an error response carries: `code` from its header, the
/// rest from `body`.
pub fn decode(code: Code, body: &[u8]) -> Status {
    let Ok(body) = StatusBody::decode(body) else {
        return Status::new(code, String::from_utf8_lossy(body).into_owned());
    };
    let detail = match body.detail {
        DETAIL_FRAME_SIZE => Detail::FrameSize {
            size: body.size,
            max: body.max,
        },
        DETAIL_CONNECTION_LIMIT => Detail::ConnectionLimit {
            limit: body.limit,
            max: body.max,
            evicted: body.evicted,
        },
        DETAIL_DEADLINE => Detail::Deadline {
            timeout: Duration::from_millis(body.timeout_ms),
        },
        DETAIL_SERIALIZER => Detail::Serializer {
            id: u8::try_from(body.serializer).unwrap_or(u8::MAX),
        },
        _ => Detail::None,
    };
    Status::new(code, body.message)
        .with_detail(detail)
        .with_details(body.details)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn typed_details_cross_as_numbers() {
        let status =
            Status::new(Code::TooManyConnections, "full").with_detail(Detail::ConnectionLimit {
                limit: "max_connections".into(),
                max: 64,
                evicted: true,
            });
        assert_eq!(decode(Code::TooManyConnections, &encode(&status)), status);
        let status = Status::new(Code::DeadlineExceeded, "late").with_detail(Detail::Deadline {
            timeout: Duration::from_millis(1500),
        });
        assert_eq!(decode(Code::DeadlineExceeded, &encode(&status)), status);
    }

    #[test]
    fn a_body_that_is_no_status_becomes_the_message() {
        let status = decode(Code::Handler, &[0xff, 0xff, 0xff]);
        assert_eq!(status.code(), Code::Handler);
        assert_eq!(status.detail(), &Detail::None);
    }

    proptest! {
        #[test]
        fn any_status_round_trips(
            message in ".{0,40}",
            details in proptest::collection::vec(any::<u8>(), 0..40),
            size in any::<u64>(),
            max in any::<u64>(),
        ) {
            let status = Status::new(Code::FrameTooLarge, message)
                .with_detail(Detail::FrameSize { size, max })
                .with_details(Bytes::from(details));
            prop_assert_eq!(decode(Code::FrameTooLarge, &encode(&status)), status);
        }

        #[test]
        fn any_bytes_decode_without_panicking(body in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(Code::Internal, &body);
        }
    }
}
