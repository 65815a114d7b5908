//! The protobuf wire primitives both directions share.
//!
//! Keys, varints and wire types are `prost::encoding`'s, re-exported here so
//! that this is the one non-test module that imports prost. On top of them: zigzag for signed
//! integers, field numbers for enum variants and struct fields (checked
//! against [`MAX_TAG`]), the one-byte length placeholder the encoder writes
//! submessages behind (see "Encoder trade-off" in [the module docs](super)), the raw
//! field values the decoder reads before it knows their Rust type, and the
//! nesting limit both sides enforce, so that whatever encodes also decodes.
//!
//! Reading never panics and allocates only to describe an error: a length
//! is checked against the bytes left before it is used, and a value is a
//! borrowed slice of the input.

use bytes::{Buf, BufMut, BytesMut};
use prost::encoding::{decode_key, encoded_len_varint};
pub(super) use prost::encoding::{decode_varint, encode_key, encode_varint, WireType, MAX_TAG};

use super::error::{err, in_field, PbError, Result};

/// Deepest nesting of submessages (and newtype structs) that is encoded or
/// decoded; deeper data is an error rather than a stack overflow.
pub(super) const RECURSION_LIMIT: u32 = 100;

/// One level deeper; an error past [`RECURSION_LIMIT`].
pub(super) fn enter(depth: u32) -> Result<u32> {
    let depth = depth + 1;
    if depth > RECURSION_LIMIT {
        Err(err(format!(
            "nesting exceeds the recursion limit of {RECURSION_LIMIT}"
        )))
    } else {
        Ok(depth)
    }
}

/// The field number of enum variant `index` inside its oneof submessage.
pub(super) fn variant_tag(index: u32) -> Result<u32> {
    index
        .checked_add(1)
        .filter(|tag| *tag <= MAX_TAG)
        .ok_or_else(|| {
            err(format!(
                "enum variant index {index} is too large for a field number"
            ))
        })
}

/// The number of fields of a message type, as the highest known field number.
pub(super) fn known_fields(n: usize) -> Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|n| *n <= MAX_TAG)
        .ok_or_else(|| err(format!("{n} fields do not fit protobuf field numbers")))
}

/// `sint32`/`sint64` encoding: small magnitudes of either sign stay short.
pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub(super) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Reserves a one-byte length placeholder and returns where the payload starts.
pub(super) fn open_len(out: &mut BytesMut) -> usize {
    out.put_u8(0);
    out.len()
}

/// Writes the length of the payload that started at `start` into its
/// placeholder, shifting the payload if the length needs more than one byte.
pub(super) fn close_len(out: &mut BytesMut, start: usize) {
    let len = out.len() - start;
    if len < 0x80 {
        out[start - 1] = len as u8;
        return;
    }
    let n = encoded_len_varint(len as u64);
    let extra = n - 1;
    out.resize(out.len() + extra, 0);
    out.copy_within(start..start + len, start + extra);
    let mut header: &mut [u8] = &mut out[start - 1..start - 1 + n];
    encode_varint(len as u64, &mut header);
}

/// One field value as found on the wire.
#[derive(Clone, Copy, Debug)]
pub(super) enum Raw<'de> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(&'de [u8]),
}

impl Raw<'_> {
    /// The wire type's name, for error messages.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Raw::Varint(_) => "varint",
            Raw::Fixed64(_) => "fixed64",
            Raw::Fixed32(_) => "fixed32",
            Raw::Len(_) => "length-delimited",
        }
    }
}

/// A field number and one of its values.
pub(super) type Entry<'de> = (u32, Raw<'de>);

/// `found` is not the wire type `target` is written as.
pub(super) fn expected(what: &str, target: &str, found: &Raw<'_>) -> PbError {
    err(format!(
        "expected {what} for {target}, found {}",
        found.kind()
    ))
}

/// prost's message without its generic "failed to decode" prefix.
fn prost_msg(e: prost::DecodeError) -> String {
    let s = e.to_string();
    match s.strip_prefix("failed to decode Protobuf message: ") {
        Some(rest) => rest.to_owned(),
        None => s,
    }
}

/// Reads one non-group value of wire type `wire` for field `tag`.
#[inline(always)]
pub(super) fn read_value<'de>(buf: &mut &'de [u8], tag: u32, wire: WireType) -> Result<Raw<'de>> {
    let truncated = |what: &str| in_field(err(format!("truncated or invalid {what}")), tag);
    Ok(match wire {
        WireType::Varint => Raw::Varint(decode_varint(buf).map_err(|_| truncated("varint"))?),
        WireType::SixtyFourBit => {
            if buf.len() < 8 {
                return Err(truncated("fixed64"));
            }
            Raw::Fixed64(buf.get_u64_le())
        }
        WireType::ThirtyTwoBit => {
            if buf.len() < 4 {
                return Err(truncated("fixed32"));
            }
            Raw::Fixed32(buf.get_u32_le())
        }
        WireType::LengthDelimited => {
            let len = decode_varint(buf).map_err(|_| truncated("length prefix"))?;
            if len > buf.len() as u64 {
                return Err(in_field(
                    err(format!(
                        "length {len} exceeds the {} bytes left in the message",
                        buf.len()
                    )),
                    tag,
                ));
            }
            let (value, rest) = buf.split_at(len as usize);
            *buf = rest;
            Raw::Len(value)
        }
        WireType::StartGroup | WireType::EndGroup => {
            return Err(in_field(err("unexpected group marker"), tag))
        }
    })
}

/// Reads one field key: the field number and its wire type.
#[inline(always)]
pub(super) fn read_key(buf: &mut &[u8]) -> Result<(u32, WireType)> {
    decode_key(buf).map_err(|e| err(format!("invalid field key: {}", prost_msg(e))))
}
