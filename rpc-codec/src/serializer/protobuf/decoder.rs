//! The top level of a decoding: the whole input is one message.
//!
//! Mirrors the encoder's top level. A struct, tuple or tuple struct reads the
//! message's fields positionally, `()` and unit structs accept any valid
//! message (it is still parsed, so garbage is an error), a newtype struct is
//! transparent, and any other type is read from field 1. Unknown fields are
//! skipped here as at every level, so a peer may append fields to a type.

use serde::de::{self, Visitor};

use super::error::{in_field, PbError, Result};
use super::field_decoder::Fields;
use super::parse::{parse_into, sort_entries};
use super::slot::Slot;
use super::wire::{enter, known_fields, Entry};

/// Deserializes the top-level message (mirror of the encoder's `TopSer`).
pub(super) struct TopDe<'de> {
    pub(super) buf: &'de [u8],
    /// Nesting depth of this message (0 at the top).
    pub(super) depth: u32,
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
