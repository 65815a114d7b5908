//! Writing one value into a field of the message being encoded, and the
//! compound values (messages, repeated fields, maps) that hold such fields.
//!
//! [`FieldSer`] is the serde `Serializer` for a value at a known field
//! number. [`MsgSer`], [`SeqSer`] and [`MapSer`] are the compound
//! serializers it returns (serde's `SerializeStruct`, `SerializeSeq`,
//! `SerializeMap` and kin), each handing its members back to a `FieldSer`.
//! The two recurse into each other, which is why they share this module.
//!
//! Invariants kept here:
//!
//! * proto3 default omission: a field equal to its default is not written,
//!   except where `exact` is set (inside `Some`, a sequence element, a
//!   newtype variant's payload), which must hold exactly one value and so
//!   also wraps options, sequences and maps in a submessage (the wrapper rule
//!   in [the module docs](super));
//! * every submessage opened (a one-byte length placeholder, `open_len`) is
//!   closed by its compound's `end`, innermost first, before anything else
//!   is written to the buffer;
//! * every level of nesting passes through [`enter`], so the encoder refuses
//!   exactly what the decoder would.

use bytes::{BufMut, BytesMut};
use serde::ser::{self, Serialize};

use super::error::{err, PbError, Result};
use super::wire::{
    close_len, encode_key, encode_varint, enter, open_len, variant_tag, zigzag, WireType, MAX_TAG,
};

/// Serializes one value into field `field` of the message being written.
///
/// `exact` is set where the value must be exactly one protobuf value (inside
/// `Some`, a sequence element, a newtype variant's payload): defaults are
/// then written rather than omitted, and options, sequences and maps are
/// wrapped in a submessage as field 1. `depth` is the nesting depth of the
/// message that holds the field.
pub(super) struct FieldSer<'o> {
    pub(super) out: &'o mut BytesMut,
    pub(super) field: u32,
    pub(super) exact: bool,
    pub(super) depth: u32,
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
pub(super) struct MsgSer<'o> {
    out: &'o mut BytesMut,
    next: u32,
    depth: u32,
    closes: [Option<usize>; 2],
}

impl<'o> MsgSer<'o> {
    pub(super) fn new(out: &'o mut BytesMut, depth: u32, closes: [Option<usize>; 2]) -> Self {
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
pub(super) struct SeqSer<'o> {
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
pub(super) struct MapSer<'o> {
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
