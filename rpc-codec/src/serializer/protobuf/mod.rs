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
//!
//! # Layout
//!
//! Data flows one way, from the wire primitives up to the two entry points
//! [`encode`] and [`decode`] here:
//!
//! * `error` — [`PbError`] and the field path it names;
//! * `wire` — prost's keys, varints and wire types, zigzag, length
//!   placeholders, raw field values and the nesting limit;
//! * `encoder` (the top-level message) over `field_encoder` (a value in a
//!   field, and the messages, repeated fields and maps made of fields);
//! * `parse` (a message's bytes as sorted field entries) and `slot` (one
//!   field's entries read as a wire value) under `field_decoder` (a field as
//!   any serde type) under `decoder` (the top-level message).

mod decoder;
mod encoder;
mod error;
mod field_decoder;
mod field_encoder;
mod parse;
mod slot;
mod wire;

#[cfg(test)]
mod tests;

use bytes::BytesMut;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use error::PbError;

use decoder::TopDe;
use encoder::TopSer;

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
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, PbError> {
    T::deserialize(TopDe {
        buf: bytes,
        depth: 0,
    })
}
