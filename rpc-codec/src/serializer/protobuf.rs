//! Protocol Buffers wire format for plain serde types.
//!
//! brisk's typed API works with ordinary `#[derive(Serialize, Deserialize)]`
//! types. This serializer turns them into **real protobuf bytes**, so a peer
//! written against a `.proto` file (or a `#[derive(prost::Message)]` struct
//! with matching field numbers) can read and write the same payloads. There
//! is no `.proto` schema and no code generation: the schema is the Rust type,
//! and field numbers come from declaration order. The wire primitives (keys,
//! varints, wire types) are `prost::encoding`'s, not hand-rolled.
//!
//! # Mapping (part of brisk's wire spec)
//!
//! **Top level.** The encoded value is always one protobuf *message*:
//!
//! * a struct, tuple or tuple struct is that message, its fields numbered
//!   `1..=n` in declaration order. Request arguments travel as a tuple
//!   `(a, b, ...)`, so argument *i* is field *i*;
//! * `()` and unit structs are the empty message;
//! * a newtype struct is transparent (it is its inner value);
//! * any other value (scalar, string, bytes, `Option`, sequence, map, enum)
//!   is a message holding that value as field 1. So `encode(&5u64)`,
//!   `encode(&(5u64,))` and `encode(&Some(5u64))` give the same bytes.
//!
//! **Values in a message field** (a struct field, tuple element, map key or
//! value, or that top-level field 1):
//!
//! | serde type | protobuf |
//! |---|---|
//! | `bool`, `u8`..`u64` | varint (`bool`, `uint32`, `uint64`) |
//! | `i8`..`i64` | zigzag varint (`sint32`, `sint64`) |
//! | `f32` / `f64` | fixed32 `float` / fixed64 `double` |
//! | `char`, `String`, `&str` | length-delimited UTF-8 (`string`) |
//! | bytes (`serialize_bytes`: `serde_bytes`, `bytes::Bytes`) | length-delimited (`bytes`) |
//! | struct, tuple, tuple struct | length-delimited submessage, fields `1..=n` |
//! | `()`, unit struct | empty submessage |
//! | newtype struct | transparent |
//! | `None` / `Some(v)` | field absent / the field as `v` |
//! | sequence | repeated field, one key per element (unpacked) |
//! | map | repeated entry submessages `{1: key, 2: value}` (protobuf `map<K, V>`) |
//! | unit variant | varint of the variant index (protobuf `enum`) |
//! | newtype / tuple / struct variant | submessage with exactly one field, number `variant_index + 1` (a `oneof`), holding the payload: a newtype payload as that field's value, a tuple/struct payload as a submessage |
//!
//! Like proto3, a field equal to its default is omitted: `false`, `0`,
//! `+0.0` (bit pattern zero; `-0.0` is kept), `""`, empty bytes, `()`, unit
//! variant 0, `None`, an empty sequence or map. Decoding restores an absent
//! field as that default (absent scalar → 0/`""`/`false`, `char` → `'\0'`,
//! `Option` → `None`, sequence/map → empty, struct → all fields default,
//! enum → variant 0 with a default payload).
//!
//! **The wrapper rule.** Some places must hold *exactly one* protobuf value:
//! the inside of `Some(_)` (it must differ from `None` = absent), each
//! sequence element (one key = one element), and a newtype variant's payload
//! (the oneof field must be present to name the variant). In these places
//! scalars are never omitted, and a value that is itself an `Option`, a
//! sequence or a map — which could be absent or repeated — is *wrapped*: it
//! is written as a submessage whose field 1 holds it (as a message field,
//! following the rules above). So `Some(vec![])` is `{1: <nothing>}` = an
//! empty submessage, `vec![None, Some(3)]` is two submessages `{}` and
//! `{1: 3}`, `vec![vec![1], vec![]]` is `{1: 1}` and `{}`, and
//! `Some(Some(0))` is `{1: 0}`. The decoder applies the same rule from the
//! type it is asked for, so all of these round-trip. Map keys and values are
//! fields of the entry message and need no wrapper.
//!
//! **Enums and `.proto` files.** A unit-only enum is a protobuf `enum` whose
//! values are the variant indices. An enum with data is a field of message
//! type `message E { oneof v { ... } }` (in prost: a `message` field whose
//! struct holds a `#[prost(oneof)]`). In an enum that mixes both, unit
//! variants are still written as varints, which no `.proto` field type
//! describes; the decoder also accepts them as a oneof field holding an empty
//! message, and a variant written as `V(())` is always sent that way, so use
//! `V(())` for unit-like variants of a mixed enum shared with `.proto` peers.
//!
//! **Decoding.** Unknown field numbers (greater than the number of fields of
//! the target struct/tuple, or than the variant count of an enum) are
//! skipped, so fields may be appended to a type without breaking old peers;
//! groups in unknown fields are skipped too. Several occurrences of a
//! singular field: the last one wins for scalars and enums, and submessages
//! are merged, as protobuf specifies. Packed repeated numeric fields (what
//! proto3 writers such as prost emit for `repeated uint64` etc.) are accepted
//! for sequences of bool, integers and floats. The decoder never panics on
//! any input: malformed or truncated bytes, a wrong wire type, an integer out
//! of range for the target type, invalid UTF-8, a length larger than the
//! bytes left, or nesting deeper than 100 levels (submessages and newtype
//! structs) is a [`PbError`] naming
//! the field path (e.g. `at field 3[2].1: expected a varint for u64, found
//! length-delimited`). Nothing is allocated from an untrusted length.
//!
//! **Limits and caveats.** The format is not self-describing: types that
//! need `deserialize_any` (`#[serde(flatten)]`, untagged or internally
//! tagged enums, `serde_json::Value`) are not supported (`deserialize_any`
//! is best-effort only). `i128`/`u128` are not supported. Field numbers are
//! positional, so *append* fields to evolve a type; renaming is free,
//! `#[serde(alias)]` is harmless, `#[serde(skip)]` removes a field from the
//! numbering on both sides, `skip_serializing_if` keeps its number (it is
//! just absent), and `skip_serializing_if` on tuple-struct fields is not
//! supported. Structs are decoded positionally through `visit_seq` (as
//! bincode and postcard do), so a hand-written `Deserialize` for a struct
//! must accept a sequence; derived ones do. A `Vec<u8>` without
//! `serde_bytes` is a repeated varint, not `bytes` (and likewise `[u8; N]`
//! is a message of `N` varint fields). Signed integers are `sint32`/`sint64`, not `int32`.
//! The nesting limit applies to encoding too, so whatever encodes decodes.
//!
//! **Encoder trade-off.** Everything is written straight into the caller's
//! `BytesMut`. A submessage's length is not known until its content is
//! written, so one placeholder byte is reserved for it; when the length turns
//! out to need more than one byte (content of 128 bytes or more), the content
//! is shifted right in place. That avoids a sizing pass (which would
//! serialize every nested value once per nesting level) and temporary
//! buffers, at the cost of a `memmove` of each large submessage per level.

use std::fmt;
use std::ops::Range;

use bytes::{Buf, BufMut, BytesMut};
use prost::encoding::{
    decode_key, decode_varint, encode_key, encode_varint, encoded_len_varint, WireType, MAX_TAG,
};
use serde::de::value::U32Deserializer;
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use serde::ser::{self, Serialize};

/// Deepest nesting of submessages (and newtype structs) that is encoded or
/// decoded; deeper data is an error rather than a stack overflow.
const RECURSION_LIMIT: u32 = 100;

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

type Result<T, E = PbError> = std::result::Result<T, E>;

/// Appends `value`, encoded as one protobuf message, to `out`.
///
/// On error nothing is appended (`out` is truncated back to its old length).
pub fn encode<T: Serialize + ?Sized>(value: &T, out: &mut BytesMut) -> Result<(), PbError> {
    let start = out.len();
    let result = value.serialize(TopSer { out, depth: 0 });
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Decodes one protobuf message (the whole of `bytes`) into a `T`.
pub fn decode<T: de::DeserializeOwned>(bytes: &[u8]) -> Result<T, PbError> {
    T::deserialize(TopDe {
        buf: bytes,
        depth: 0,
    })
}

// ---------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------

fn err(msg: impl Into<String>) -> PbError {
    PbError(msg.into())
}

/// One level deeper; an error past [`RECURSION_LIMIT`].
fn enter(depth: u32) -> Result<u32> {
    let depth = depth + 1;
    if depth > RECURSION_LIMIT {
        Err(err(format!(
            "nesting exceeds the recursion limit of {RECURSION_LIMIT}"
        )))
    } else {
        Ok(depth)
    }
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

fn in_field(e: PbError, field: u32) -> PbError {
    with_segment(e, &field.to_string())
}

fn at_index(e: PbError, index: usize) -> PbError {
    with_segment(e, &format!("[{index}]"))
}

fn variant_tag(index: u32) -> Result<u32> {
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
fn known_fields(n: usize) -> Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|n| *n <= MAX_TAG)
        .ok_or_else(|| err(format!("{n} fields do not fit protobuf field numbers")))
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

// ---------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------

/// Reserves a one-byte length placeholder and returns where the payload starts.
fn open_len(out: &mut BytesMut) -> usize {
    out.put_u8(0);
    out.len()
}

/// Writes the length of the payload that started at `start` into its
/// placeholder, shifting the payload if the length needs more than one byte.
fn close_len(out: &mut BytesMut, start: usize) {
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

/// Serializes the top-level value: structs and tuples are the message itself,
/// unit is the empty message, anything else goes to field 1.
struct TopSer<'o> {
    out: &'o mut BytesMut,
    depth: u32,
}

impl<'o> TopSer<'o> {
    fn field1(self) -> FieldSer<'o> {
        FieldSer {
            out: self.out,
            field: 1,
            exact: false,
            depth: self.depth,
        }
    }
}

macro_rules! top_forward {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method(self, $($arg: $ty),*) -> Result<()> {
            self.field1().$method($($arg),*)
        }
    )*};
}

impl<'o> ser::Serializer for TopSer<'o> {
    type Ok = ();
    type Error = PbError;
    type SerializeSeq = SeqSer<'o>;
    type SerializeTuple = MsgSer<'o>;
    type SerializeTupleStruct = MsgSer<'o>;
    type SerializeTupleVariant = MsgSer<'o>;
    type SerializeMap = MapSer<'o>;
    type SerializeStruct = MsgSer<'o>;
    type SerializeStructVariant = MsgSer<'o>;

    fn is_human_readable(&self) -> bool {
        false
    }

    top_forward! {
        serialize_bool(v: bool);
        serialize_i8(v: i8);
        serialize_i16(v: i16);
        serialize_i32(v: i32);
        serialize_i64(v: i64);
        serialize_u8(v: u8);
        serialize_u16(v: u16);
        serialize_u32(v: u32);
        serialize_u64(v: u64);
        serialize_f32(v: f32);
        serialize_f64(v: f64);
        serialize_char(v: char);
        serialize_str(v: &str);
        serialize_bytes(v: &[u8]);
        serialize_none();
        serialize_unit_variant(name: &'static str, index: u32, variant: &'static str);
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        self.field1().serialize_some(value)
    }

    fn serialize_unit(self) -> Result<()> {
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        let depth = enter(self.depth)?;
        value.serialize(TopSer {
            out: self.out,
            depth,
        })
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<()> {
        self.field1()
            .serialize_newtype_variant(name, index, variant, value)
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<SeqSer<'o>> {
        self.field1().serialize_seq(len)
    }

    fn serialize_tuple(self, _len: usize) -> Result<MsgSer<'o>> {
        Ok(MsgSer::new(self.out, self.depth, [None, None]))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<MsgSer<'o>> {
        self.serialize_tuple(len)
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<MsgSer<'o>> {
        self.field1()
            .serialize_tuple_variant(name, index, variant, len)
    }

    fn serialize_map(self, len: Option<usize>) -> Result<MapSer<'o>> {
        self.field1().serialize_map(len)
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<MsgSer<'o>> {
        self.serialize_tuple(len)
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<MsgSer<'o>> {
        self.field1()
            .serialize_struct_variant(name, index, variant, len)
    }
}

/// Serializes one value into field `field` of the message being written.
///
/// `exact` is set where the value must be exactly one protobuf value (inside
/// `Some`, a sequence element, a newtype variant's payload): defaults are
/// then written rather than omitted, and options, sequences and maps are
/// wrapped in a submessage as field 1. `depth` is the nesting depth of the
/// message that holds the field.
struct FieldSer<'o> {
    out: &'o mut BytesMut,
    field: u32,
    exact: bool,
    depth: u32,
}

impl<'o> FieldSer<'o> {
    fn varint(self, v: u64) -> Result<()> {
        if v != 0 || self.exact {
            encode_key(self.field, WireType::Varint, self.out);
            encode_varint(v, self.out);
        }
        Ok(())
    }

    fn len_delimited(self, data: &[u8]) -> Result<()> {
        if !data.is_empty() || self.exact {
            encode_key(self.field, WireType::LengthDelimited, self.out);
            encode_varint(data.len() as u64, self.out);
            self.out.put_slice(data);
        }
        Ok(())
    }

    /// Writes this field's key and opens a submessage. Returns the payload
    /// start (for [`close_len`]) and the depth of the new submessage.
    fn open(&mut self) -> Result<(usize, u32)> {
        let depth = enter(self.depth)?;
        encode_key(self.field, WireType::LengthDelimited, self.out);
        Ok((open_len(self.out), depth))
    }

    /// A oneof submessage holding the variant's field, itself holding a
    /// submessage for the tuple/struct payload.
    fn open_variant(mut self, index: u32) -> Result<MsgSer<'o>> {
        let tag = variant_tag(index)?;
        let (outer, depth) = self.open()?;
        let depth = enter(depth)?;
        encode_key(tag, WireType::LengthDelimited, self.out);
        let inner = open_len(self.out);
        Ok(MsgSer::new(self.out, depth, [Some(inner), Some(outer)]))
    }
}

impl<'o> ser::Serializer for FieldSer<'o> {
    type Ok = ();
    type Error = PbError;
    type SerializeSeq = SeqSer<'o>;
    type SerializeTuple = MsgSer<'o>;
    type SerializeTupleStruct = MsgSer<'o>;
    type SerializeTupleVariant = MsgSer<'o>;
    type SerializeMap = MapSer<'o>;
    type SerializeStruct = MsgSer<'o>;
    type SerializeStructVariant = MsgSer<'o>;

    fn is_human_readable(&self) -> bool {
        false
    }

    fn serialize_bool(self, v: bool) -> Result<()> {
        self.varint(u64::from(v))
    }

    fn serialize_i8(self, v: i8) -> Result<()> {
        self.varint(zigzag(i64::from(v)))
    }

    fn serialize_i16(self, v: i16) -> Result<()> {
        self.varint(zigzag(i64::from(v)))
    }

    fn serialize_i32(self, v: i32) -> Result<()> {
        self.varint(zigzag(i64::from(v)))
    }

    fn serialize_i64(self, v: i64) -> Result<()> {
        self.varint(zigzag(v))
    }

    fn serialize_u8(self, v: u8) -> Result<()> {
        self.varint(u64::from(v))
    }

    fn serialize_u16(self, v: u16) -> Result<()> {
        self.varint(u64::from(v))
    }

    fn serialize_u32(self, v: u32) -> Result<()> {
        self.varint(u64::from(v))
    }

    fn serialize_u64(self, v: u64) -> Result<()> {
        self.varint(v)
    }

    fn serialize_f32(self, v: f32) -> Result<()> {
        if v.to_bits() != 0 || self.exact {
            encode_key(self.field, WireType::ThirtyTwoBit, self.out);
            self.out.put_f32_le(v);
        }
        Ok(())
    }

    fn serialize_f64(self, v: f64) -> Result<()> {
        if v.to_bits() != 0 || self.exact {
            encode_key(self.field, WireType::SixtyFourBit, self.out);
            self.out.put_f64_le(v);
        }
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<()> {
        let mut buf = [0u8; 4];
        let s = v.encode_utf8(&mut buf);
        self.len_delimited(s.as_bytes())
    }

    fn serialize_str(self, v: &str) -> Result<()> {
        self.len_delimited(v.as_bytes())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<()> {
        self.len_delimited(v)
    }

    fn serialize_none(mut self) -> Result<()> {
        if self.exact {
            // Wrapped: a submessage whose field 1 (the `None`) is absent.
            let (start, _) = self.open()?;
            close_len(self.out, start);
        }
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(mut self, value: &T) -> Result<()> {
        if self.exact {
            let (start, depth) = self.open()?;
            value.serialize(FieldSer {
                out: &mut *self.out,
                field: 1,
                exact: true,
                depth,
            })?;
            close_len(self.out, start);
            Ok(())
        } else {
            value.serialize(FieldSer {
                exact: true,
                ..self
            })
        }
    }

    fn serialize_unit(self) -> Result<()> {
        if self.exact {
            encode_key(self.field, WireType::LengthDelimited, self.out);
            self.out.put_u8(0);
        }
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        index: u32,
        _variant: &'static str,
    ) -> Result<()> {
        self.varint(u64::from(index))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        let depth = enter(self.depth)?;
        value.serialize(FieldSer { depth, ..self })
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        index: u32,
        _variant: &'static str,
        value: &T,
    ) -> Result<()> {
        let tag = variant_tag(index)?;
        let (start, depth) = self.open()?;
        value.serialize(FieldSer {
            out: &mut *self.out,
            field: tag,
            exact: true,
            depth,
        })?;
        close_len(self.out, start);
        Ok(())
    }

    fn serialize_seq(mut self, _len: Option<usize>) -> Result<SeqSer<'o>> {
        if self.exact {
            let (start, depth) = self.open()?;
            Ok(SeqSer {
                out: self.out,
                field: 1,
                depth,
                close: Some(start),
            })
        } else {
            Ok(SeqSer {
                out: self.out,
                field: self.field,
                depth: self.depth,
                close: None,
            })
        }
    }

    fn serialize_tuple(mut self, _len: usize) -> Result<MsgSer<'o>> {
        let (start, depth) = self.open()?;
        Ok(MsgSer::new(self.out, depth, [Some(start), None]))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<MsgSer<'o>> {
        self.serialize_tuple(len)
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<MsgSer<'o>> {
        self.open_variant(index)
    }

    fn serialize_map(mut self, _len: Option<usize>) -> Result<MapSer<'o>> {
        if self.exact {
            let (start, depth) = self.open()?;
            Ok(MapSer {
                out: self.out,
                field: 1,
                depth,
                close: Some(start),
                entry: None,
            })
        } else {
            Ok(MapSer {
                out: self.out,
                field: self.field,
                depth: self.depth,
                close: None,
                entry: None,
            })
        }
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<MsgSer<'o>> {
        self.serialize_tuple(len)
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<MsgSer<'o>> {
        self.open_variant(index)
    }
}

/// Writes the fields of a message (struct, tuple, variant payload) numbered
/// from 1, then closes the submessage(s) it was opened in, innermost first.
struct MsgSer<'o> {
    out: &'o mut BytesMut,
    next: u32,
    depth: u32,
    closes: [Option<usize>; 2],
}

impl<'o> MsgSer<'o> {
    fn new(out: &'o mut BytesMut, depth: u32, closes: [Option<usize>; 2]) -> Self {
        MsgSer {
            out,
            next: 1,
            depth,
            closes,
        }
    }

    fn bump(&mut self) -> Result<u32> {
        let field = self.next;
        if field > MAX_TAG {
            return Err(err("too many fields for protobuf field numbers"));
        }
        self.next = field + 1;
        Ok(field)
    }

    fn field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let field = self.bump()?;
        value.serialize(FieldSer {
            out: &mut *self.out,
            field,
            exact: false,
            depth: self.depth,
        })
    }

    fn finish(self) -> Result<()> {
        for start in self.closes.into_iter().flatten() {
            close_len(self.out, start);
        }
        Ok(())
    }
}

impl ser::SerializeTuple for MsgSer<'_> {
    type Ok = ();
    type Error = PbError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.field(value)
    }

    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for MsgSer<'_> {
    type Ok = ();
    type Error = PbError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.field(value)
    }

    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeTupleVariant for MsgSer<'_> {
    type Ok = ();
    type Error = PbError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.field(value)
    }

    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeStruct for MsgSer<'_> {
    type Ok = ();
    type Error = PbError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.field(value)
    }

    fn skip_field(&mut self, _key: &'static str) -> Result<()> {
        self.bump().map(drop)
    }

    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for MsgSer<'_> {
    type Ok = ();
    type Error = PbError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.field(value)
    }

    fn skip_field(&mut self, _key: &'static str) -> Result<()> {
        self.bump().map(drop)
    }

    fn end(self) -> Result<()> {
        self.finish()
    }
}

/// A repeated field: every element is one occurrence of `field`.
struct SeqSer<'o> {
    out: &'o mut BytesMut,
    field: u32,
    depth: u32,
    close: Option<usize>,
}

impl ser::SerializeSeq for SeqSer<'_> {
    type Ok = ();
    type Error = PbError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(FieldSer {
            out: &mut *self.out,
            field: self.field,
            exact: true,
            depth: self.depth,
        })
    }

    fn end(self) -> Result<()> {
        if let Some(start) = self.close {
            close_len(self.out, start);
        }
        Ok(())
    }
}

/// A map: every entry is one occurrence of `field`, a `{1: key, 2: value}`
/// submessage.
struct MapSer<'o> {
    out: &'o mut BytesMut,
    field: u32,
    depth: u32,
    close: Option<usize>,
    /// The open entry: payload start and its depth.
    entry: Option<(usize, u32)>,
}

impl ser::SerializeMap for MapSer<'_> {
    type Ok = ();
    type Error = PbError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        if self.entry.is_some() {
            return Err(err("map key serialized twice without a value"));
        }
        let depth = enter(self.depth)?;
        encode_key(self.field, WireType::LengthDelimited, self.out);
        let start = open_len(self.out);
        key.serialize(FieldSer {
            out: &mut *self.out,
            field: 1,
            exact: false,
            depth,
        })?;
        self.entry = Some((start, depth));
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let (start, depth) = self
            .entry
            .take()
            .ok_or_else(|| err("map value serialized without a key"))?;
        value.serialize(FieldSer {
            out: &mut *self.out,
            field: 2,
            exact: false,
            depth,
        })?;
        close_len(self.out, start);
        Ok(())
    }

    fn end(self) -> Result<()> {
        if self.entry.is_some() {
            return Err(err("map key serialized without a value"));
        }
        if let Some(start) = self.close {
            close_len(self.out, start);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------

/// One field value as found on the wire.
#[derive(Clone, Copy, Debug)]
enum Raw<'de> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(&'de [u8]),
}

impl Raw<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Raw::Varint(_) => "varint",
            Raw::Fixed64(_) => "fixed64",
            Raw::Fixed32(_) => "fixed32",
            Raw::Len(_) => "length-delimited",
        }
    }
}

/// A field number and one of its values.
type Entry<'de> = (u32, Raw<'de>);

fn expected(what: &str, target: &str, found: &Raw<'_>) -> PbError {
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
fn read_value<'de>(buf: &mut &'de [u8], tag: u32, wire: WireType) -> Result<Raw<'de>> {
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

#[inline(always)]
fn read_key(buf: &mut &[u8]) -> Result<(u32, WireType)> {
    decode_key(buf).map_err(|e| err(format!("invalid field key: {}", prost_msg(e))))
}

/// Skips a (deprecated) group up to its matching end marker.
fn skip_group(buf: &mut &[u8], tag: u32, depth: u32) -> Result<()> {
    let depth = enter(depth).map_err(|e| in_field(e, tag))?;
    loop {
        if buf.is_empty() {
            return Err(in_field(err("unterminated group"), tag));
        }
        let (inner, wire) = read_key(buf).map_err(|e| in_field(e, tag))?;
        match wire {
            WireType::EndGroup if inner == tag => return Ok(()),
            WireType::EndGroup => {
                return Err(in_field(
                    err(format!("group closed by the end marker of field {inner}")),
                    tag,
                ))
            }
            WireType::StartGroup => skip_group(buf, inner, depth)?,
            wire => {
                read_value(buf, inner, wire).map_err(|e| in_field(e, tag))?;
            }
        }
    }
}

/// Parses a whole message, appending the values of fields `1..=known` to
/// `out` in wire order and skipping (but validating) all other fields.
/// `depth` is the nesting depth of this message.
fn parse_into<'de>(
    mut buf: &'de [u8],
    known: u32,
    depth: u32,
    out: &mut Vec<Entry<'de>>,
) -> Result<()> {
    while !buf.is_empty() {
        let (tag, wire) = read_key(&mut buf)?;
        match wire {
            WireType::StartGroup => {
                skip_group(&mut buf, tag, depth)?;
                if tag <= known {
                    return Err(in_field(err("groups are not supported"), tag));
                }
            }
            WireType::EndGroup => {
                return Err(in_field(err("end-group marker without a group"), tag))
            }
            wire => {
                let raw = read_value(&mut buf, tag, wire)?;
                if tag <= known {
                    out.push((tag, raw));
                }
            }
        }
    }
    Ok(())
}

/// Groups entries by field number, keeping wire order within a field.
fn sort_entries(entries: &mut [Entry<'_>]) {
    if !entries.is_sorted_by_key(|e| e.0) {
        entries.sort_by_key(|e| e.0);
    }
}

/// Parses and merges the submessages in `occ` (protobuf merges repeated
/// occurrences of a message field).
fn parse_message<'de>(
    occ: &[Entry<'de>],
    known: u32,
    depth: u32,
    target: &str,
) -> Result<Vec<Entry<'de>>> {
    let mut entries = Vec::new();
    for (_, raw) in occ {
        match *raw {
            Raw::Len(bytes) => parse_into(bytes, known, depth, &mut entries)?,
            other => return Err(expected("a length-delimited submessage", target, &other)),
        }
    }
    sort_entries(&mut entries);
    Ok(entries)
}

fn utf8<'de>(bytes: &'de [u8], target: &str) -> Result<&'de str> {
    std::str::from_utf8(bytes).map_err(|e| err(format!("invalid UTF-8 in {target}: {e}")))
}

/// Deserializes the top-level message (mirror of [`TopSer`]).
struct TopDe<'de> {
    buf: &'de [u8],
    depth: u32,
}

impl<'de> TopDe<'de> {
    fn message(&self, known: usize) -> Result<Vec<Entry<'de>>> {
        let known = known_fields(known)?;
        let mut entries = Vec::new();
        parse_into(self.buf, known, self.depth, &mut entries)?;
        sort_entries(&mut entries);
        Ok(entries)
    }
}

macro_rules! top_de_forward {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value> {
            let entries = self.message(1)?;
            Slot::field(&entries, self.depth)
                .$method($($arg,)* visitor)
                .map_err(|e| in_field(e, 1))
        }
    )*};
}

impl<'de> de::Deserializer<'de> for TopDe<'de> {
    type Error = PbError;

    fn is_human_readable(&self) -> bool {
        false
    }

    top_de_forward! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_seq();
        deserialize_map();
        deserialize_identifier();
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        // Validate the message even though nothing in it is used.
        self.message(0)?;
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        let depth = enter(self.depth)?;
        visitor.visit_newtype_struct(TopDe {
            buf: self.buf,
            depth,
        })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value> {
        let entries = self.message(len)?;
        visitor.visit_seq(Fields::new(&entries, len, self.depth)?)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        // Positional, like a tuple: see `Fields`.
        let entries = self.message(fields.len())?;
        visitor.visit_seq(Fields::new(&entries, fields.len(), self.depth)?)
    }
}

/// All occurrences of one field (mirror of [`FieldSer`]).
///
/// `exact` marks a place that holds exactly one value (see the wrapper
/// rule). `depth` is the nesting depth of the message holding the field.
/// `packed` is set for sequence elements: a numeric element that finds a
/// length-delimited value reads it as a packed run, leaving the rest there.
struct Slot<'a, 'de> {
    occ: &'a [Entry<'de>],
    exact: bool,
    depth: u32,
    packed: Option<&'a mut Option<&'de [u8]>>,
}

impl<'a, 'de> Slot<'a, 'de> {
    fn field(occ: &'a [Entry<'de>], depth: u32) -> Self {
        Slot {
            occ,
            exact: false,
            depth,
            packed: None,
        }
    }

    fn last(&self) -> Option<Raw<'de>> {
        self.occ.last().map(|e| e.1)
    }

    /// The rest of a packed run after one element was read from it.
    fn set_packed(&mut self, rest: &'de [u8]) {
        if let Some(slot) = self.packed.as_mut() {
            **slot = if rest.is_empty() { None } else { Some(rest) };
        }
    }

    fn varint(&mut self, target: &str) -> Result<Option<u64>> {
        match self.last() {
            None => Ok(None),
            Some(Raw::Varint(v)) => Ok(Some(v)),
            Some(Raw::Len(mut run)) if self.packed.is_some() => {
                let v = decode_varint(&mut run)
                    .map_err(|_| err(format!("truncated varint in packed {target} values")))?;
                self.set_packed(run);
                Ok(Some(v))
            }
            Some(other) => Err(expected("a varint", target, &other)),
        }
    }

    fn fixed64(&mut self, target: &str) -> Result<Option<u64>> {
        match self.last() {
            None => Ok(None),
            Some(Raw::Fixed64(v)) => Ok(Some(v)),
            Some(Raw::Len(mut run)) if self.packed.is_some() => {
                if run.len() < 8 {
                    return Err(err(format!("truncated packed {target} values")));
                }
                let v = run.get_u64_le();
                self.set_packed(run);
                Ok(Some(v))
            }
            Some(other) => Err(expected("a fixed64", target, &other)),
        }
    }

    fn fixed32(&mut self, target: &str) -> Result<Option<u32>> {
        match self.last() {
            None => Ok(None),
            Some(Raw::Fixed32(v)) => Ok(Some(v)),
            Some(Raw::Len(mut run)) if self.packed.is_some() => {
                if run.len() < 4 {
                    return Err(err(format!("truncated packed {target} values")));
                }
                let v = run.get_u32_le();
                self.set_packed(run);
                Ok(Some(v))
            }
            Some(other) => Err(expected("a fixed32", target, &other)),
        }
    }

    fn bytes(&self, target: &str) -> Result<Option<&'de [u8]>> {
        match self.last() {
            None => Ok(None),
            Some(Raw::Len(b)) => Ok(Some(b)),
            Some(other) => Err(expected("a length-delimited value", target, &other)),
        }
    }

    /// The merged submessage(s) of this field, and their depth.
    fn message(&self, known: usize, target: &str) -> Result<(Vec<Entry<'de>>, u32)> {
        let known = known_fields(known)?;
        let depth = enter(self.depth)?;
        Ok((parse_message(self.occ, known, depth, target)?, depth))
    }

    /// Unwraps a wrapper submessage (see the wrapper rule) and hands its
    /// field 1 to `f`.
    fn wrapped<R>(self, target: &str, f: impl FnOnce(Slot<'_, 'de>) -> Result<R>) -> Result<R> {
        let (entries, depth) = self.message(1, target)?;
        f(Slot::field(&entries, depth)).map_err(|e| in_field(e, 1))
    }
}

fn out_of_range(v: impl fmt::Display, target: &str) -> PbError {
    err(format!("value {v} is out of range for {target}"))
}

macro_rules! de_unsigned {
    ($($method:ident => $visit:ident($ty:ty);)*) => {$(
        fn $method<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value> {
            let v = self.varint(stringify!($ty))?.unwrap_or(0);
            let v = <$ty>::try_from(v).map_err(|_| out_of_range(v, stringify!($ty)))?;
            visitor.$visit(v)
        }
    )*};
}

macro_rules! de_signed {
    ($($method:ident => $visit:ident($ty:ty);)*) => {$(
        fn $method<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value> {
            let v = unzigzag(self.varint(stringify!($ty))?.unwrap_or(0));
            let v = <$ty>::try_from(v).map_err(|_| out_of_range(v, stringify!($ty)))?;
            visitor.$visit(v)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Slot<'_, 'de> {
    type Error = PbError;

    fn is_human_readable(&self) -> bool {
        false
    }

    /// Best effort only: the wire format does not say what a value is.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.last() {
            None => visitor.visit_unit(),
            Some(Raw::Varint(v)) => visitor.visit_u64(v),
            Some(Raw::Fixed64(v)) => visitor.visit_f64(f64::from_bits(v)),
            Some(Raw::Fixed32(v)) => visitor.visit_f32(f32::from_bits(v)),
            Some(Raw::Len(b)) => visitor.visit_borrowed_bytes(b),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value> {
        visitor.visit_bool(self.varint("bool")?.unwrap_or(0) != 0)
    }

    de_unsigned! {
        deserialize_u8 => visit_u8(u8);
        deserialize_u16 => visit_u16(u16);
        deserialize_u32 => visit_u32(u32);
    }

    fn deserialize_u64<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value> {
        visitor.visit_u64(self.varint("u64")?.unwrap_or(0))
    }

    de_signed! {
        deserialize_i8 => visit_i8(i8);
        deserialize_i16 => visit_i16(i16);
        deserialize_i32 => visit_i32(i32);
    }

    fn deserialize_i64<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value> {
        visitor.visit_i64(unzigzag(self.varint("i64")?.unwrap_or(0)))
    }

    fn deserialize_f32<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value> {
        visitor.visit_f32(f32::from_bits(self.fixed32("f32")?.unwrap_or(0)))
    }

    fn deserialize_f64<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value> {
        visitor.visit_f64(f64::from_bits(self.fixed64("f64")?.unwrap_or(0)))
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let Some(bytes) = self.bytes("char")? else {
            return visitor.visit_char('\0');
        };
        let s = utf8(bytes, "char")?;
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => visitor.visit_char(c),
            _ => Err(err(format!(
                "expected exactly one character for char, found {} bytes",
                bytes.len()
            ))),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.bytes("string")? {
            None => visitor.visit_borrowed_str(""),
            Some(bytes) => visitor.visit_borrowed_str(utf8(bytes, "string")?),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_borrowed_bytes(self.bytes("bytes")?.unwrap_or(&[]))
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.exact {
            self.wrapped("a wrapped Option", |s| s.deserialize_option(visitor))
        } else if self.occ.is_empty() {
            visitor.visit_none()
        } else {
            visitor.visit_some(Slot {
                exact: true,
                ..self
            })
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if let Some(other) = self.occ.iter().find(|e| !matches!(e.1, Raw::Len(_))) {
            return Err(expected("an empty submessage", "()", &other.1));
        }
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        let depth = enter(self.depth)?;
        visitor.visit_newtype_struct(Slot { depth, ..self })
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.exact {
            self.wrapped("a wrapped sequence", |s| s.deserialize_seq(visitor))
        } else {
            visitor.visit_seq(Repeated {
                occ: self.occ,
                pos: 0,
                index: 0,
                packed: None,
                scratch: [(0, Raw::Varint(0))],
                depth: self.depth,
            })
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value> {
        let (entries, depth) = self.message(len, "a tuple")?;
        visitor.visit_seq(Fields::new(&entries, len, depth)?)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        let (entries, depth) = self.message(len, name)?;
        visitor.visit_seq(Fields::new(&entries, len, depth)?)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.exact {
            self.wrapped("a wrapped map", |s| s.deserialize_map(visitor))
        } else {
            visitor.visit_map(MapEntries {
                occ: self.occ,
                pos: 0,
                entry: Vec::new(),
                value_start: 0,
                depth: self.depth,
                entry_depth: self.depth,
            })
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        // Positional, like a tuple: see `Fields`.
        let (entries, depth) = self.message(fields.len(), name)?;
        visitor.visit_seq(Fields::new(&entries, fields.len(), depth)?)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self.last() {
            // Absent: proto3's default, variant 0.
            None => visitor.visit_enum(Variant {
                index: 0,
                payload: None,
                depth: self.depth,
            }),
            Some(Raw::Varint(v)) => {
                let index = u32::try_from(v)
                    .map_err(|_| err(format!("variant index {v} is out of range for {name}")))?;
                visitor.visit_enum(Variant {
                    index,
                    payload: None,
                    depth: self.depth,
                })
            }
            Some(Raw::Len(bytes)) => {
                let known = known_fields(variants.len())?;
                let depth = enter(self.depth)?;
                let mut entries = Vec::new();
                parse_into(bytes, known, depth, &mut entries)?;
                // A oneof: the last known field on the wire names the variant.
                let Some(&(tag, _)) = entries.last() else {
                    return Err(err(format!(
                        "oneof submessage for {name} holds none of its {known} variants \
                         (field numbers 1..={known})"
                    )));
                };
                sort_entries(&mut entries);
                let start = entries.partition_point(|e| e.0 < tag);
                let end = entries.partition_point(|e| e.0 <= tag);
                visitor.visit_enum(Variant {
                    index: tag - 1,
                    payload: Some((entries, start..end)),
                    depth,
                })
            }
            Some(other) => Err(expected("a varint or a oneof submessage", name, &other)),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_any(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }
}

/// The fields `1..=n` of a message, handed out in order as a sequence.
///
/// Structs are visited as a sequence too (as bincode and postcard do), not
/// as a map keyed by the names serde passes to `deserialize_struct`: that
/// list also holds every `#[serde(alias)]`, so its positions are not field
/// numbers. A derived `visit_seq` asks for exactly its (non-skipped) fields
/// in declaration order, which is the encoder's numbering. For a struct,
/// `n` (the length of that name list) is only an upper bound.
struct Fields<'a, 'de> {
    entries: &'a [Entry<'de>],
    cursor: usize,
    next: u32,
    n: u32,
    depth: u32,
}

impl<'a, 'de> Fields<'a, 'de> {
    fn new(entries: &'a [Entry<'de>], n: usize, depth: u32) -> Result<Self> {
        Ok(Fields {
            entries,
            cursor: 0,
            next: 1,
            n: known_fields(n)?,
            depth,
        })
    }
}

impl<'de> de::SeqAccess<'de> for Fields<'_, 'de> {
    type Error = PbError;

    fn next_element_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>> {
        if self.next > self.n {
            return Ok(None);
        }
        let tag = self.next;
        self.next += 1;
        // Entries are sorted by field number; take all occurrences of `tag`.
        let entries = self.entries;
        while self.cursor < entries.len() && entries[self.cursor].0 < tag {
            self.cursor += 1;
        }
        let start = self.cursor;
        while self.cursor < entries.len() && entries[self.cursor].0 == tag {
            self.cursor += 1;
        }
        seed.deserialize(Slot::field(&entries[start..self.cursor], self.depth))
            .map(Some)
            .map_err(|e| in_field(e, tag))
    }

    fn size_hint(&self) -> Option<usize> {
        Some((self.n + 1).saturating_sub(self.next) as usize)
    }
}

/// A repeated field: each occurrence is one element, except that a packed
/// run of numbers holds several.
struct Repeated<'a, 'de> {
    occ: &'a [Entry<'de>],
    pos: usize,
    index: usize,
    /// The unread rest of a packed run.
    packed: Option<&'de [u8]>,
    /// Holds the packed run while an element is read from it.
    scratch: [Entry<'de>; 1],
    depth: u32,
}

impl<'de> de::SeqAccess<'de> for Repeated<'_, 'de> {
    type Error = PbError;

    fn next_element_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>> {
        let index = self.index;
        let result = if let Some(run) = self.packed.take() {
            self.scratch[0].1 = Raw::Len(run);
            seed.deserialize(Slot {
                occ: &self.scratch,
                exact: true,
                depth: self.depth,
                packed: Some(&mut self.packed),
            })
        } else if self.pos < self.occ.len() {
            let occ = self.occ;
            let one = &occ[self.pos..=self.pos];
            self.pos += 1;
            seed.deserialize(Slot {
                occ: one,
                exact: true,
                depth: self.depth,
                packed: Some(&mut self.packed),
            })
        } else {
            return Ok(None);
        };
        self.index += 1;
        result.map(Some).map_err(|e| at_index(e, index))
    }

    fn size_hint(&self) -> Option<usize> {
        match self.packed {
            None => Some(self.occ.len() - self.pos),
            Some(_) => None,
        }
    }
}

/// A map field: each occurrence is a `{1: key, 2: value}` entry.
struct MapEntries<'a, 'de> {
    occ: &'a [Entry<'de>],
    pos: usize,
    /// The current entry's fields, sorted: keys first, then values.
    entry: Vec<Entry<'de>>,
    value_start: usize,
    depth: u32,
    entry_depth: u32,
}

impl<'de> de::MapAccess<'de> for MapEntries<'_, 'de> {
    type Error = PbError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let Some(&(_, raw)) = self.occ.get(self.pos) else {
            return Ok(None);
        };
        let index = self.pos;
        self.pos += 1;
        let depth = enter(self.depth).map_err(|e| at_index(e, index))?;
        self.entry_depth = depth;
        self.entry.clear();
        match raw {
            Raw::Len(bytes) => {
                parse_into(bytes, 2, depth, &mut self.entry).map_err(|e| at_index(e, index))?
            }
            other => {
                return Err(at_index(
                    expected("a length-delimited map entry", "a map", &other),
                    index,
                ))
            }
        }
        sort_entries(&mut self.entry);
        self.value_start = self.entry.partition_point(|e| e.0 < 2);
        seed.deserialize(Slot::field(&self.entry[..self.value_start], depth))
            .map(Some)
            .map_err(|e| at_index(in_field(e, 1), index))
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value> {
        let index = self.pos.saturating_sub(1);
        let values = self.entry.get(self.value_start..).unwrap_or(&[]);
        seed.deserialize(Slot::field(values, self.entry_depth))
            .map_err(|e| at_index(in_field(e, 2), index))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.occ.len() - self.pos)
    }
}

/// An enum value: the variant index and, for a oneof submessage, the
/// occurrences of the variant's field (`None`: no payload on the wire).
struct Variant<'de> {
    index: u32,
    payload: Option<(Vec<Entry<'de>>, Range<usize>)>,
    depth: u32,
}

impl<'de> Variant<'de> {
    fn tag(&self) -> u32 {
        self.index.saturating_add(1)
    }

    /// The payload field as a message field (tuple and struct payloads).
    fn payload_slot(&self) -> Slot<'_, 'de> {
        match &self.payload {
            Some((entries, range)) => {
                Slot::field(entries.get(range.clone()).unwrap_or(&[]), self.depth)
            }
            None => Slot::field(&[], self.depth),
        }
    }
}

impl<'de> de::EnumAccess<'de> for Variant<'de> {
    type Error = PbError;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self)> {
        let index: U32Deserializer<PbError> = self.index.into_deserializer();
        Ok((seed.deserialize(index)?, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'de> {
    type Error = PbError;

    fn unit_variant(self) -> Result<()> {
        Ok(())
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value> {
        let mut slot = self.payload_slot();
        // A payload on the wire is exactly one value (the wrapper rule).
        slot.exact = self.payload.is_some();
        seed.deserialize(slot).map_err(|e| in_field(e, self.tag()))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value> {
        de::Deserializer::deserialize_tuple(self.payload_slot(), len, visitor)
            .map_err(|e| in_field(e, self.tag()))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        de::Deserializer::deserialize_struct(self.payload_slot(), "", fields, visitor)
            .map_err(|e| in_field(e, self.tag()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use prost::Message as _;
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, HashMap};
    use std::fmt::Debug;

    fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(value, &mut out).unwrap();
        out.to_vec()
    }

    #[track_caller]
    fn round_trip<T>(value: &T) -> Vec<u8>
    where
        T: Serialize + de::DeserializeOwned + PartialEq + Debug,
    {
        let bytes = to_vec(value);
        let back: T =
            decode(&bytes).unwrap_or_else(|e| panic!("decoding {value:?} from {bytes:02x?}: {e}"));
        assert_eq!(&back, value, "bytes: {bytes:02x?}");
        bytes
    }

    // ---- the realistic record and its prost twin ----

    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
    struct Message {
        id: u64,
        from_uid: u64,
        to_uid: u64,
        content: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct PMessage {
        #[prost(uint64, tag = "1")]
        id: u64,
        #[prost(uint64, tag = "2")]
        from_uid: u64,
        #[prost(uint64, tag = "3")]
        to_uid: u64,
        #[prost(string, tag = "4")]
        content: String,
    }

    fn sample() -> Message {
        Message {
            id: 42,
            from_uid: 1_000_000_007,
            to_uid: 7,
            content: "hello, protobuf — ünïcode".into(),
        }
    }

    #[test]
    fn message_round_trip() {
        round_trip(&sample());
        round_trip(&Message {
            id: 0,
            from_uid: u64::MAX,
            to_uid: 0,
            content: String::new(),
        });
    }

    #[test]
    fn message_interop_with_prost_both_ways() {
        let m = sample();
        let ours = to_vec(&m);
        let p = PMessage::decode(ours.as_slice()).unwrap();
        assert_eq!(
            (p.id, p.from_uid, p.to_uid, p.content.as_str()),
            (m.id, m.from_uid, m.to_uid, m.content.as_str())
        );
        // Same field order and proto3 default omission: identical bytes.
        assert_eq!(ours, p.encode_to_vec());

        let p = PMessage {
            id: 9,
            from_uid: 0,
            to_uid: 3,
            content: "x".into(),
        };
        let back: Message = decode(&p.encode_to_vec()).unwrap();
        assert_eq!(
            back,
            Message {
                id: 9,
                from_uid: 0,
                to_uid: 3,
                content: "x".into()
            }
        );
        assert_eq!(to_vec(&back), p.encode_to_vec());
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Signed {
        a: i64,
        b: i32,
        c: i8,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct PSigned {
        #[prost(sint64, tag = "1")]
        a: i64,
        #[prost(sint32, tag = "2")]
        b: i32,
        #[prost(sint32, tag = "3")]
        c: i32,
    }

    #[test]
    fn signed_interop_with_prost_sint() {
        for (a, b, c) in [
            (-1i64, -2i32, -3i8),
            (i64::MIN, i32::MAX, i8::MIN),
            (5, 0, 127),
        ] {
            let ours = to_vec(&Signed { a, b, c });
            let p = PSigned::decode(ours.as_slice()).unwrap();
            assert_eq!((p.a, p.b, p.c), (a, b, i32::from(c)));
            assert_eq!(ours, p.encode_to_vec());
            let back: Signed = decode(&p.encode_to_vec()).unwrap();
            assert_eq!(back, Signed { a, b, c });
        }
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Rich {
        ids: Vec<u64>,
        scores: Vec<f64>,
        tags: Vec<String>,
        counts: HashMap<String, u64>,
        inner: Option<Inner>,
        maybe: Option<u32>,
        color: Color,
        blob: serde_bytes::ByteBuf,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq, Clone, Default)]
    struct Inner {
        x: i32,
        name: String,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq, Clone, Copy)]
    enum Color {
        Red,
        Green,
        Blue,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
    #[repr(i32)]
    enum PColor {
        Red = 0,
        Green = 1,
        Blue = 2,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct PInner {
        #[prost(sint32, tag = "1")]
        x: i32,
        #[prost(string, tag = "2")]
        name: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct PRich {
        #[prost(uint64, repeated, tag = "1")] // packed (proto3 default)
        ids: Vec<u64>,
        #[prost(double, repeated, tag = "2")]
        scores: Vec<f64>,
        #[prost(string, repeated, tag = "3")]
        tags: Vec<String>,
        #[prost(map = "string, uint64", tag = "4")]
        counts: HashMap<String, u64>,
        #[prost(message, optional, tag = "5")]
        inner: Option<PInner>,
        #[prost(uint32, optional, tag = "6")]
        maybe: Option<u32>,
        #[prost(enumeration = "PColor", tag = "7")]
        color: i32,
        #[prost(bytes = "vec", tag = "8")]
        blob: Vec<u8>,
    }

    #[test]
    fn rich_interop_with_prost_packed_maps_enums_optional() {
        let counts: HashMap<String, u64> = [("a".into(), 1), ("".into(), 0), ("zz".into(), 300)]
            .into_iter()
            .collect();
        let p = PRich {
            ids: vec![1, 0, 300, u64::MAX],
            scores: vec![0.5, -1.0, 0.0],
            tags: vec!["x".into(), String::new()],
            counts: counts.clone(),
            inner: Some(PInner {
                x: -5,
                name: "n".into(),
            }),
            maybe: Some(0),
            color: PColor::Blue as i32,
            blob: vec![0, 255, 128],
        };
        let wire = p.encode_to_vec();
        let ours: Rich = decode(&wire).unwrap();
        let expected = Rich {
            ids: vec![1, 0, 300, u64::MAX],
            scores: vec![0.5, -1.0, 0.0],
            tags: vec!["x".into(), String::new()],
            counts,
            inner: Some(Inner {
                x: -5,
                name: "n".into(),
            }),
            maybe: Some(0),
            color: Color::Blue,
            blob: serde_bytes::ByteBuf::from(vec![0, 255, 128]),
        };
        assert_eq!(ours, expected);
        // And back: prost accepts our unpacked repeated fields.
        assert_eq!(PRich::decode(to_vec(&expected).as_slice()).unwrap(), p);

        // Defaults on both sides.
        let empty = PRich::default();
        let ours: Rich = decode(&empty.encode_to_vec()).unwrap();
        assert_eq!(ours.color, Color::Red);
        assert_eq!(ours.maybe, None);
        assert!(ours.ids.is_empty() && ours.counts.is_empty() && ours.inner.is_none());
        assert_eq!(PRich::decode(to_vec(&ours).as_slice()).unwrap(), empty);
    }

    // ---- enums as oneof ----

    #[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
    enum Event {
        Ping,
        Text(String),
        Move(i32, i32),
        Login { user: String, admin: bool },
        Nothing(()),
        Count(u64),
        List(Vec<u32>),
        Opt(Option<u8>),
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    enum PEventKind {
        #[prost(message, tag = "1")]
        Ping(PEmpty),
        #[prost(string, tag = "2")]
        Text(String),
        #[prost(uint64, tag = "6")]
        Count(u64),
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct PEmpty {}

    #[derive(Clone, PartialEq, prost::Message)]
    struct PEvent {
        #[prost(oneof = "PEventKind", tags = "1, 2, 6")]
        kind: Option<PEventKind>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct PHolder {
        #[prost(message, optional, tag = "1")]
        event: Option<PEvent>,
    }

    #[test]
    fn enums_of_every_kind_round_trip() {
        let all = vec![
            Event::Ping,
            Event::Text("hi".into()),
            Event::Text(String::new()),
            Event::Move(-1, 0),
            Event::Login {
                user: "root".into(),
                admin: true,
            },
            Event::Login {
                user: String::new(),
                admin: false,
            },
            Event::Nothing(()),
            Event::Count(0),
            Event::List(vec![]),
            Event::List(vec![0, 1]),
            Event::Opt(None),
            Event::Opt(Some(0)),
        ];
        for e in &all {
            round_trip(e);
            round_trip(&Some(e.clone()));
            round_trip(&(e.clone(), 7u8));
        }
        round_trip(&all);
        let map: BTreeMap<u32, Event> = all
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, e)| (i as u32, e))
            .collect();
        round_trip(&map);
        round_trip(&vec![Color::Red, Color::Green, Color::Red]);
        round_trip(&Color::Red);
        assert_eq!(to_vec(&Color::Red), Vec::<u8>::new()); // proto3 enum default
        assert_eq!(to_vec(&Color::Blue), vec![0x08, 2]);
        // Newtype variant: oneof submessage {variant_index + 1: payload}.
        assert_eq!(to_vec(&Event::Count(0)), vec![0x0a, 2, 0x30, 0]);
    }

    #[test]
    fn enum_interop_with_prost_oneof() {
        for (ours, theirs) in [
            (Event::Text("yo".into()), PEventKind::Text("yo".into())),
            (Event::Count(0), PEventKind::Count(0)),
            (Event::Count(99), PEventKind::Count(99)),
        ] {
            let p = PHolder {
                event: Some(PEvent { kind: Some(theirs) }),
            };
            assert_eq!(to_vec(&ours), p.encode_to_vec());
            assert_eq!(decode::<Event>(&p.encode_to_vec()).unwrap(), ours);
        }
        // A unit variant sent as a oneof field holding an empty message.
        let p = PHolder {
            event: Some(PEvent {
                kind: Some(PEventKind::Ping(PEmpty {})),
            }),
        };
        assert_eq!(decode::<Event>(&p.encode_to_vec()).unwrap(), Event::Ping);
        // `V(())` is always sent in that shape: {1: {5: {}}} (variant index 4).
        assert_eq!(to_vec(&Event::Nothing(())), vec![0x0a, 2, 0x2a, 0]);
    }

    // ---- top-level shapes ----

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Unit;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct UserId(u64);

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Pair(u32, String);

    #[test]
    fn top_level_shapes() {
        assert!(round_trip(&()).is_empty());
        assert!(round_trip(&Unit).is_empty());
        assert_eq!(decode::<()>(&to_vec(&sample())).unwrap(), ());
        assert_eq!(round_trip(&"hi".to_string()), vec![0x0a, 2, b'h', b'i']);
        assert!(round_trip(&String::new()).is_empty());
        assert_eq!(round_trip(&5u64), vec![0x08, 5]);
        assert_eq!(to_vec(&(5u64,)), vec![0x08, 5]);
        assert_eq!(to_vec(&UserId(5)), vec![0x08, 5]);
        round_trip(&UserId(5));
        round_trip(&Pair(3, "x".into()));
        assert!(round_trip(&0u64).is_empty());
        assert!(round_trip(&false).is_empty());
        assert_eq!(round_trip(&true), vec![0x08, 1]);
        round_trip(&'é');
        round_trip(&'\0');
        assert_eq!(round_trip(&Some(0u64)), vec![0x08, 0]);
        assert!(round_trip(&None::<u64>).is_empty());
        round_trip(&vec![1u32, 2, 3]);
        round_trip(&Vec::<String>::new());
        round_trip(&[1u8, 2, 3]);
        round_trip(&Some(vec![0u8]));
    }

    #[test]
    fn tuple_arguments_are_fields_in_order() {
        let args = (7u64, "name".to_string(), true, -3i32, Some(1.5f32));
        let bytes = round_trip(&args);
        assert_eq!(
            bytes,
            vec![
                0x08, 7, // 1: 7
                0x12, 4, b'n', b'a', b'm', b'e', // 2: "name"
                0x18, 1, // 3: true
                0x20, 5, // 4: zigzag(-3)
                0x2d, 0, 0, 0xc0, 0x3f // 5: fixed32 1.5
            ]
        );
        round_trip(&(sample(), vec![sample(), sample()]));
        round_trip(&(0u8, 0i64, String::new(), None::<String>, Vec::<u8>::new()));
    }

    #[test]
    fn bytes_via_serde_bytes() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Blob {
            #[serde(with = "serde_bytes")]
            data: Vec<u8>,
            plain: Vec<u8>,
        }
        let b = Blob {
            data: (0..=255).collect(),
            plain: vec![0, 200],
        };
        let bytes = round_trip(&b);
        assert_eq!(&bytes[..3], &[0x0a, 0x80, 0x02]);
        round_trip(&serde_bytes::ByteBuf::from(vec![1, 2, 3]));
        round_trip(&serde_bytes::ByteBuf::new());
        round_trip(&Blob {
            data: vec![],
            plain: vec![],
        });
        round_trip(&vec![
            serde_bytes::ByteBuf::new(),
            serde_bytes::ByteBuf::from(vec![9]),
        ]);
    }

    #[test]
    fn options() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Opts {
            a: Option<u32>,
            b: Option<String>,
            c: Option<Inner>,
            d: Option<Vec<u32>>,
            e: Option<Option<bool>>,
            f: Option<HashMap<u8, u8>>,
            g: Option<()>,
        }
        for v in [
            Opts {
                a: None,
                b: None,
                c: None,
                d: None,
                e: None,
                f: None,
                g: None,
            },
            Opts {
                a: Some(0),
                b: Some(String::new()),
                c: Some(Inner::default()),
                d: Some(vec![]),
                e: Some(None),
                f: Some(HashMap::new()),
                g: Some(()),
            },
            Opts {
                a: Some(1),
                b: Some("b".into()),
                c: Some(Inner {
                    x: 1,
                    name: "c".into(),
                }),
                d: Some(vec![0, 1]),
                e: Some(Some(false)),
                f: Some([(0, 0)].into_iter().collect()),
                g: None,
            },
        ] {
            round_trip(&v);
        }
        for v in [None, Some(None), Some(Some(None)), Some(Some(Some(0u8)))] {
            round_trip(&v);
        }
    }

    #[test]
    fn nested_containers_need_wrappers() {
        round_trip(&vec![None, Some(0u32), None, Some(5)]);
        round_trip(&vec![vec![], vec![0u64], vec![], vec![1, 2]]);
        round_trip(&vec![vec![vec![Some(vec![0u8])], vec![]], vec![]]);
        round_trip(&vec![
            Some(vec![]),
            None,
            Some(vec![None, Some(String::new())]),
        ]);
        round_trip(&vec![
            HashMap::<String, Vec<u8>>::new(),
            [("k".into(), vec![])].into_iter().collect(),
        ]);
        round_trip(&vec![(), (), ()]);
        round_trip(&vec![Unit, Unit]);
        round_trip(&vec![Inner::default(), Inner::default()]);
        round_trip(&vec![0.0f64, -0.0, f64::INFINITY]);
        let m: BTreeMap<Option<u8>, Vec<Option<u8>>> = [
            (None, vec![]),
            (Some(0), vec![None]),
            (Some(1), vec![Some(0)]),
        ]
        .into_iter()
        .collect();
        round_trip(&m);
        round_trip(&Some(m));
    }

    #[test]
    fn nested_structs_and_vec_of_structs() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Thread {
            title: String,
            first: Message,
            replies: Vec<Message>,
            by_id: BTreeMap<u64, Message>,
            meta: (u8, Inner),
        }
        let t = Thread {
            title: "t".into(),
            first: sample(),
            replies: vec![
                sample(),
                Message {
                    id: 0,
                    from_uid: 0,
                    to_uid: 0,
                    content: String::new(),
                },
            ],
            by_id: [(1, sample()), (0, sample())].into_iter().collect(),
            meta: (0, Inner::default()),
        };
        round_trip(&t);
    }

    #[test]
    fn hashmap_string_u64() {
        let m: HashMap<String, u64> = [("a".into(), 1), ("bb".into(), 0), (String::new(), 7)]
            .into_iter()
            .collect();
        round_trip(&m);
        round_trip(&HashMap::<String, u64>::new());
        #[derive(Clone, PartialEq, prost::Message)]
        struct PMap {
            #[prost(map = "string, uint64", tag = "1")]
            m: HashMap<String, u64>,
        }
        let p = PMap { m: m.clone() };
        assert_eq!(
            decode::<HashMap<String, u64>>(&p.encode_to_vec()).unwrap(),
            m
        );
        assert_eq!(PMap::decode(to_vec(&m).as_slice()).unwrap(), p);
    }

    #[test]
    fn negative_ints_and_floats() {
        round_trip(&(i8::MIN, i16::MIN, i32::MIN, i64::MIN));
        round_trip(&(i8::MAX, i16::MAX, i32::MAX, i64::MAX));
        round_trip(&(-1i8, -1i16, -1i32, -1i64));
        round_trip(&(u8::MAX, u16::MAX, u32::MAX, u64::MAX));
        assert_eq!(to_vec(&-1i64), vec![0x08, 1]);
        assert_eq!(to_vec(&1i64), vec![0x08, 2]);
        round_trip(&(f32::MIN_POSITIVE, f32::MAX, -0.0f32, f32::NEG_INFINITY));
        round_trip(&(f64::EPSILON, f64::MIN, -0.0f64, 1e300));
        let bytes = to_vec(&(-0.0f64, f64::NAN));
        let (z, n): (f64, f64) = decode(&bytes).unwrap();
        assert!(z == 0.0 && z.is_sign_negative() && n.is_nan());
    }

    #[test]
    fn large_submessages_get_multi_byte_lengths() {
        for len in [126, 127, 128, 129, 16_383, 16_384, 70_000] {
            let inner = Inner {
                x: 1,
                name: "x".repeat(len),
            };
            let outer = (vec![inner.clone(), inner], Some(Some("tail".to_string())));
            round_trip(&outer);
        }
    }

    #[test]
    fn encode_appends_and_truncates_on_error() {
        let mut out = BytesMut::from(&b"head"[..]);
        encode(&5u64, &mut out).unwrap();
        assert_eq!(&out[..], b"head\x08\x05");

        struct Failing;
        impl Serialize for Failing {
            fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use ser::SerializeStruct;
                let mut st = s.serialize_struct("Failing", 2)?;
                st.serialize_field("a", &7u32)?;
                Err(ser::Error::custom("boom"))
            }
        }
        let e = encode(&(1u8, Failing), &mut out).unwrap_err();
        assert_eq!(e, PbError("boom".into()));
        assert_eq!(&out[..], b"head\x08\x05");
        assert!(encode(&1u128, &mut out).is_err());
        assert_eq!(&out[..], b"head\x08\x05");
    }

    // ---- decoding rules ----

    #[test]
    fn unknown_fields_are_skipped() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct V2 {
            id: u64,
            from_uid: u64,
            to_uid: u64,
            content: String,
            extra: Vec<Inner>,
            flag: bool,
        }
        let v2 = V2 {
            id: 1,
            from_uid: 2,
            to_uid: 3,
            content: "c".into(),
            extra: vec![Inner::default()],
            flag: true,
        };
        let old: Message = decode(&to_vec(&v2)).unwrap();
        assert_eq!(old.content, "c");
        let new: V2 = decode(&to_vec(&old)).unwrap();
        assert!(new.extra.is_empty() && !new.flag);

        // Unknown fields of every wire type, including a group.
        let mut bytes = to_vec(&sample());
        bytes.extend_from_slice(&[
            0x28, 0x96, 0x01, // 5: varint
            0x31, 1, 2, 3, 4, 5, 6, 7, 8, // 6: fixed64
            0x3d, 1, 2, 3, 4, // 7: fixed32
            0x42, 2, 0xff, 0xff, // 8: bytes
            0x4b, 0x08, 1, 0x4c, // 9: group { 1: 1 }
        ]);
        assert_eq!(decode::<Message>(&bytes).unwrap(), sample());
    }

    #[test]
    fn last_scalar_wins_and_messages_merge() {
        let bytes = [0x08, 1, 0x08, 2, 0x22, 1, b'a', 0x22, 1, b'b'];
        let m: Message = decode(&bytes).unwrap();
        assert_eq!((m.id, m.content.as_str()), (2, "b"));

        #[derive(Deserialize, Debug, PartialEq)]
        struct Outer {
            inner: Inner,
            list: Vec<u8>,
        }
        // inner = {1: zz(3)} then {2: "n"}: merged; list repeated then packed.
        let bytes = [
            0x0a, 2, 0x08, 6, 0x0a, 3, 0x12, 1, b'n', 0x10, 1, 0x12, 2, 2, 3,
        ];
        let o: Outer = decode(&bytes).unwrap();
        assert_eq!(
            o,
            Outer {
                inner: Inner {
                    x: 3,
                    name: "n".into()
                },
                list: vec![1, 2, 3]
            }
        );
    }

    #[test]
    fn errors_name_the_field_and_the_problem() {
        // Field 4 (content) as a varint.
        let e = decode::<Message>(&[0x20, 1]).unwrap_err();
        assert_eq!(
            e.0,
            "at field 4: expected a length-delimited value for string, found varint"
        );
        // Truncated string.
        let e = decode::<Message>(&[0x22, 5, b'a']).unwrap_err();
        assert!(e.0.contains("field 4") && e.0.contains("exceeds"), "{e}");
        // Nested path with an index.
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Outer {
            list: Vec<Inner>,
        }
        let e = decode::<Outer>(&[0x0a, 0, 0x0a, 2, 0x10, 0x05]).unwrap_err();
        assert!(
            e.0.starts_with("at field 1[1].2: expected a length-delimited"),
            "{e}"
        );
        // Out of range.
        let e = decode::<(u8,)>(&[0x08, 0x80, 0x02]).unwrap_err();
        assert_eq!(e.0, "at field 1: value 256 is out of range for u8");
        // Invalid UTF-8.
        let e = decode::<String>(&[0x0a, 1, 0xff]).unwrap_err();
        assert!(e.0.contains("invalid UTF-8"), "{e}");
        // Bad key / wire type / tag 0 / truncated varint.
        for bad in [
            &[0x0f][..],
            &[0x00, 1],
            &[0x08],
            &[0x08, 0x80],
            &[0x09, 1, 2],
        ] {
            assert!(decode::<Message>(bad).is_err(), "{bad:?}");
        }
        // Unknown enum variant, empty oneof.
        assert!(decode::<Color>(&[0x08, 7]).is_err());
        assert!(decode::<Event>(&[0x0a, 0]).unwrap_err().0.contains("oneof"));
        // A known field holding a group.
        assert!(decode::<Message>(&[0x0b, 0x0c])
            .unwrap_err()
            .0
            .contains("groups"));
        // Garbage for the unit type is still validated.
        assert!(decode::<()>(&[0xff]).is_err());
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Node {
        value: u32,
        next: Option<Box<Node>>,
    }

    fn chain(len: usize) -> Node {
        let mut node = Node {
            value: 0,
            next: None,
        };
        for i in 1..len {
            node = Node {
                value: i as u32,
                next: Some(Box::new(node)),
            };
        }
        node
    }

    fn drop_chain(mut node: Node) {
        while let Some(next) = node.next.take() {
            node = *next;
        }
    }

    #[test]
    fn recursion_limit_is_the_same_for_encode_and_decode() {
        let mut last_ok = 0;
        for len in 90..110 {
            let node = chain(len);
            let mut out = BytesMut::new();
            match encode(&node, &mut out) {
                Ok(()) => {
                    let back: Node = decode(&out).unwrap();
                    assert!(back == node);
                    drop_chain(back);
                    last_ok = len;
                }
                Err(e) => assert!(e.0.contains("recursion limit"), "{e}"),
            }
            drop_chain(node);
        }
        assert_eq!(last_ok, RECURSION_LIMIT as usize + 1);
    }

    /// `levels` length-delimited submessages nested in field `tag`.
    fn nested(tag: u32, levels: usize) -> Vec<u8> {
        let mut msg = BytesMut::new();
        for _ in 0..levels {
            let mut outer = BytesMut::new();
            encode_key(tag, WireType::LengthDelimited, &mut outer);
            encode_varint(msg.len() as u64, &mut outer);
            outer.extend_from_slice(&msg);
            msg = outer;
        }
        msg.to_vec()
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Tree(Vec<Tree>);

    #[test]
    fn deep_input_is_an_error_not_a_stack_overflow() {
        // Far past the limit: an error, never a stack overflow.
        for levels in [RECURSION_LIMIT as usize + 5, 5_000] {
            let e = decode::<Node>(&nested(2, levels)).unwrap_err();
            assert!(e.0.contains("recursion limit"), "{e}");
            // Newtype around a sequence: every level is a wrapper message.
            let e = decode::<Tree>(&nested(1, levels)).unwrap_err();
            assert!(e.0.contains("recursion limit"), "{e}");
        }
        // Within the limit it decodes.
        let tree: Tree = decode(&nested(1, 40)).unwrap();
        let mut depth = 0;
        let mut t = &tree;
        while let Some(child) = t.0.first() {
            depth += 1;
            t = child;
        }
        assert!(depth > 10, "{depth}");
        round_trip(&tree);
        // Deeply nested groups in an unknown field.
        let mut groups = vec![0x7b; 5_000];
        groups.extend(vec![0x7c; 5_000]);
        let e = decode::<Node>(&groups).unwrap_err();
        assert!(e.0.contains("recursion limit"), "{e}");
        // Shallow groups in an unknown field are skipped.
        assert_eq!(decode::<Node>(&[0x7b, 0x7b, 0x7c, 0x7c]).unwrap(), chain(1));
    }

    #[test]
    fn serde_attributes() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Attrs {
            #[serde(rename = "renamed")]
            a: u32,
            #[serde(skip)]
            skipped: u32,
            #[serde(skip_serializing_if = "Option::is_none", default)]
            b: Option<u32>,
            c: u32,
        }
        let v = Attrs {
            a: 1,
            skipped: 0,
            b: None,
            c: 3,
        };
        assert_eq!(round_trip(&v), vec![0x08, 1, 0x18, 3]);
        round_trip(&Attrs { b: Some(2), ..v });
    }

    #[test]
    fn aliases_do_not_shift_field_numbers() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Aliased {
            #[serde(alias = "old_a", alias = "older_a")]
            a: u32,
            b: String,
            #[serde(alias = "old_c")]
            c: Vec<u8>,
        }
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        enum AliasedEnum {
            #[serde(alias = "Z")]
            A(u8),
            B {
                x: Aliased,
            },
        }
        let v = Aliased {
            a: 1,
            b: "b".into(),
            c: vec![3],
        };
        assert_eq!(round_trip(&v), vec![0x08, 1, 0x12, 1, b'b', 0x18, 3]);
        round_trip(&AliasedEnum::A(4));
        round_trip(&vec![AliasedEnum::B { x: v }, AliasedEnum::A(0)]);
    }

    // ---- property tests ----

    #[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
    struct Arb {
        a: u64,
        b: i32,
        c: f64,
        d: String,
        #[serde(with = "serde_bytes")]
        e: Vec<u8>,
        f: Option<Vec<u16>>,
        g: Vec<Option<String>>,
        h: Vec<Vec<i16>>,
        i: Option<Option<bool>>,
        j: BTreeMap<String, Vec<u64>>,
        k: Vec<Event>,
        l: Option<Box<Arb>>,
        m: (char, i8, f32),
        n: Vec<Inner>,
    }

    fn arb_event() -> impl Strategy<Value = Event> {
        prop_oneof![
            Just(Event::Ping),
            ".{0,8}".prop_map(Event::Text),
            (any::<i32>(), any::<i32>()).prop_map(|(a, b)| Event::Move(a, b)),
            (".{0,4}", any::<bool>()).prop_map(|(user, admin)| Event::Login { user, admin }),
            Just(Event::Nothing(())),
            any::<u64>().prop_map(Event::Count),
            prop::collection::vec(any::<u32>(), 0..4).prop_map(Event::List),
            any::<Option<u8>>().prop_map(Event::Opt),
        ]
    }

    fn arb_inner() -> impl Strategy<Value = Inner> {
        (any::<i32>(), ".{0,6}").prop_map(|(x, name)| Inner { x, name })
    }

    fn arb_leaf() -> impl Strategy<Value = Arb> {
        let part1 = (
            any::<u64>(),
            any::<i32>(),
            any::<f64>().prop_filter("NaN != NaN", |f| !f.is_nan()),
            ".{0,12}",
            prop::collection::vec(any::<u8>(), 0..20),
            proptest::option::of(prop::collection::vec(any::<u16>(), 0..4)),
            prop::collection::vec(proptest::option::of(".{0,3}"), 0..4),
        );
        let part2 = (
            prop::collection::vec(prop::collection::vec(any::<i16>(), 0..3), 0..3),
            any::<Option<Option<bool>>>(),
            prop::collection::btree_map(".{0,3}", prop::collection::vec(any::<u64>(), 0..3), 0..3),
            prop::collection::vec(arb_event(), 0..4),
            (
                any::<char>(),
                any::<i8>(),
                any::<f32>().prop_filter("NaN != NaN", |f| !f.is_nan()),
            ),
            prop::collection::vec(arb_inner(), 0..3),
        );
        (part1, part2).prop_map(|((a, b, c, d, e, f, g), (h, i, j, k, m, n))| Arb {
            a,
            b,
            c,
            d,
            e,
            f,
            g,
            h,
            i,
            j,
            k,
            l: None,
            m,
            n,
        })
    }

    fn arb() -> impl Strategy<Value = Arb> {
        arb_leaf().prop_recursive(4, 8, 1, |inner| {
            (arb_leaf(), proptest::option::of(inner)).prop_map(|(mut leaf, child)| {
                leaf.l = child.map(Box::new);
                leaf
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn prop_round_trip(v in arb()) {
            let bytes = to_vec(&v);
            let back: Arb = decode(&bytes).map_err(|e| TestCaseError::fail(e.0))?;
            prop_assert_eq!(back, v);
        }

        #[test]
        fn prop_round_trip_tuple_args(v in (any::<u64>(), ".{0,8}", any::<Option<i64>>(), prop::collection::vec(arb_event(), 0..3))) {
            let bytes = to_vec(&v);
            let back: (u64, String, Option<i64>, Vec<Event>) = decode(&bytes).map_err(|e| TestCaseError::fail(e.0))?;
            prop_assert_eq!(back, v);
        }

        #[test]
        fn prop_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode::<Arb>(&bytes);
            let _ = decode::<Message>(&bytes);
            let _ = decode::<Vec<Event>>(&bytes);
            let _ = decode::<(Option<Vec<Option<u8>>>, BTreeMap<u8, Event>)>(&bytes);
        }

        #[test]
        fn prop_mutated_encodings_never_panic(
            v in arb(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = to_vec(&v);
            if !bytes.is_empty() {
                for (at, byte) in edits {
                    let i = at.index(bytes.len());
                    bytes[i] = byte;
                }
                let _ = decode::<Arb>(&bytes);
                let end = cut.index(bytes.len());
                let _ = decode::<Arb>(&bytes[..end]);
            }
        }
    }
}
