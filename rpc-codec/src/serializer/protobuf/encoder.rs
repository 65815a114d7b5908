//! The top level of an encoding: which values are the message itself.
//!
//! The encoded value is always one protobuf message. A struct, tuple or tuple
//! struct *is* that message (its fields numbered from 1), `()` and unit
//! structs are the empty message, and a newtype struct is transparent; every
//! other value is written as field 1 of the message by the field encoder.
//! That keeps `encode(&5u64)`, `encode(&(5u64,))` and `encode(&Some(5u64))`
//! the same bytes, and a call's argument tuple a message whose field *i* is
//! argument *i*. Nothing here writes bytes of its own: the top level only
//! decides where a value goes, which is why it holds no length placeholder.

use bytes::BytesMut;
use serde::ser::{self, Serialize};

use super::error::{PbError, Result};
use super::field_encoder::{FieldSer, MapSer, MsgSer, SeqSer};
use super::wire::enter;

/// Serializes the top-level value: structs and tuples are the message itself,
/// unit is the empty message, anything else goes to field 1.
pub(super) struct TopSer<'o> {
    pub(super) out: &'o mut BytesMut,
    /// Nesting depth of the message being written (0 at the top).
    pub(super) depth: u32,
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
