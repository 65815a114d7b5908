//! One field of a decoded message: all its occurrences, and reading them as
//! one typed wire value.
//!
//! A [`Slot`] is what the decoder hands to a value's `Deserialize`: the
//! entries of one field number, in wire order. The readers here apply
//! protobuf's rules for a singular field: an absent field is `None` (the
//! caller substitutes the proto3 default), the last occurrence of a scalar
//! wins, and the occurrences of a submessage are merged. A slot that is a
//! sequence element may also meet a packed run of numbers: it reads one
//! element off the front and leaves the rest for the next element.
//!
//! Its serde `Deserializer` implementation lives in the field decoder; this
//! module only turns raw entries into scalars, byte slices and submessage
//! entries, so it depends on nothing above the wire format.

use bytes::Buf;

use super::error::{err, in_field, Result};
use super::parse::parse_message;
use super::wire::{decode_varint, enter, expected, known_fields, Entry, Raw};

/// All occurrences of one field (mirror of the encoder's `FieldSer`).
///
/// `exact` marks a place that holds exactly one value (see the wrapper
/// rule). `depth` is the nesting depth of the message holding the field.
/// `packed` is set for sequence elements: a numeric element that finds a
/// length-delimited value reads it as a packed run, leaving the rest there.
pub(super) struct Slot<'a, 'de> {
    pub(super) occ: &'a [Entry<'de>],
    pub(super) exact: bool,
    pub(super) depth: u32,
    pub(super) packed: Option<&'a mut Option<&'de [u8]>>,
}

impl<'a, 'de> Slot<'a, 'de> {
    pub(super) fn field(occ: &'a [Entry<'de>], depth: u32) -> Self {
        Slot {
            occ,
            exact: false,
            depth,
            packed: None,
        }
    }

    pub(super) fn last(&self) -> Option<Raw<'de>> {
        self.occ.last().map(|e| e.1)
    }

    /// The rest of a packed run after one element was read from it.
    fn set_packed(&mut self, rest: &'de [u8]) {
        if let Some(slot) = self.packed.as_mut() {
            **slot = if rest.is_empty() { None } else { Some(rest) };
        }
    }

    pub(super) fn varint(&mut self, target: &str) -> Result<Option<u64>> {
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

    pub(super) fn fixed64(&mut self, target: &str) -> Result<Option<u64>> {
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

    pub(super) fn fixed32(&mut self, target: &str) -> Result<Option<u32>> {
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

    pub(super) fn bytes(&self, target: &str) -> Result<Option<&'de [u8]>> {
        match self.last() {
            None => Ok(None),
            Some(Raw::Len(b)) => Ok(Some(b)),
            Some(other) => Err(expected("a length-delimited value", target, &other)),
        }
    }

    /// The merged submessage(s) of this field, and their depth.
    pub(super) fn message(&self, known: usize, target: &str) -> Result<(Vec<Entry<'de>>, u32)> {
        let known = known_fields(known)?;
        let depth = enter(self.depth)?;
        Ok((parse_message(self.occ, known, depth, target)?, depth))
    }

    /// Unwraps a wrapper submessage (see the wrapper rule) and hands its
    /// field 1 to `f`.
    pub(super) fn wrapped<R>(
        self,
        target: &str,
        f: impl FnOnce(Slot<'_, 'de>) -> Result<R>,
    ) -> Result<R> {
        let (entries, depth) = self.message(1, target)?;
        f(Slot::field(&entries, depth)).map_err(|e| in_field(e, 1))
    }
}
