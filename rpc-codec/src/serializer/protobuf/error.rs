//! The serializer's error type and how an error names where it happened.
//!
//! Every error is a [`PbError`] holding one human-readable message. Decoding
//! errors carry the path of the field they occurred in, built from the inside
//! out: each level that hands a field to a nested deserializer prefixes its
//! field number (or `[i]` for an element index) as the error passes back up,
//! so the finished message reads `at field 3[2].1: <problem>`. The path costs
//! nothing on success; it is only assembled on the error path.

use std::fmt;

use serde::{de, ser};

/// An error while encoding to or decoding from the protobuf wire format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PbError(pub String);

impl fmt::Display for PbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PbError {}

impl ser::Error for PbError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        PbError(msg.to_string())
    }
}

impl de::Error for PbError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        PbError(msg.to_string())
    }
}

/// This serializer's `Result`: [`PbError`] unless said otherwise.
pub(super) type Result<T, E = PbError> = std::result::Result<T, E>;

/// An error with this message and no field path yet.
pub(super) fn err(msg: impl Into<String>) -> PbError {
    PbError(msg.into())
}

const PATH_PREFIX: &str = "at field ";

/// Prefixes a path segment (a field number, or `[i]` for an element index)
/// to the error's location, building messages like `at field 3[2].1: ...`.
fn with_segment(e: PbError, segment: &str) -> PbError {
    if let Some(rest) = e.0.strip_prefix(PATH_PREFIX) {
        if let Some((path, msg)) = rest.split_once(": ") {
            let sep = if path.starts_with('[') { "" } else { "." };
            return PbError(format!("{PATH_PREFIX}{segment}{sep}{path}: {msg}"));
        }
    }
    PbError(format!("{PATH_PREFIX}{segment}: {}", e.0))
}

/// Locates `e` in field number `field` of the enclosing message.
pub(super) fn in_field(e: PbError, field: u32) -> PbError {
    with_segment(e, &field.to_string())
}

/// Locates `e` at element `index` of a repeated field or map.
pub(super) fn at_index(e: PbError, index: usize) -> PbError {
    with_segment(e, &format!("[{index}]"))
}

/// A wire value that does not fit the integer type asked for.
pub(super) fn out_of_range(v: impl fmt::Display, target: &str) -> PbError {
    err(format!("value {v} is out of range for {target}"))
}
