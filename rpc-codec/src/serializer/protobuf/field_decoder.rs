//! Decoding one field into any serde type, and the accessors for the
//! compound values (messages, repeated fields, maps, enums) built of fields.
//!
//! This is serde's `Deserializer` for a [`Slot`], plus the `SeqAccess`,
//! `MapAccess` and `EnumAccess` types it hands to visitors; they recurse into
//! each other through `Slot`, which is why they share this module. Each
//! mirrors a rule of the encoder (see the mapping in [the module docs](super)):
//!
//! * an absent field decodes as its proto3 default;
//! * a place that holds exactly one value (`Some`, a sequence element, a
//!   newtype variant's payload) unwraps options, sequences and maps from
//!   their wrapper submessage, as the encoder wrapped them;
//! * struct and tuple fields are handed out positionally by [`Fields`],
//!   repeated fields by element (packed runs included), maps by entry, and
//!   an enum as a varint (unit variant) or a oneof submessage;
//! * every nested message passes through `enter`, and every error that
//!   passes back up gains its field number or element index.
//!
//! Nothing here allocates from a length read off the wire: entries borrow
//! from the input, and the only growth is one entry per occurrence of a known field.

use std::ops::Range;

use serde::de::value::U32Deserializer;
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use super::error::{at_index, err, in_field, out_of_range, PbError, Result};
use super::parse::{parse_into, sort_entries};
use super::slot::Slot;
use super::wire::{enter, expected, known_fields, unzigzag, Entry, Raw};

/// `bytes` as a `str`, or an error naming `target`.
fn utf8<'de>(bytes: &'de [u8], target: &str) -> Result<&'de str> {
    std::str::from_utf8(bytes).map_err(|e| err(format!("invalid UTF-8 in {target}: {e}")))
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
pub(super) struct Fields<'a, 'de> {
    entries: &'a [Entry<'de>],
    cursor: usize,
    next: u32,
    n: u32,
    depth: u32,
}

impl<'a, 'de> Fields<'a, 'de> {
    pub(super) fn new(entries: &'a [Entry<'de>], n: usize, depth: u32) -> Result<Self> {
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
