//! Splitting a message's bytes into the entries of its known fields.
//!
//! The decoder does not stream: a message is first parsed into a list of
//! `(field number, raw value)` entries, sorted by field number (stable, so
//! wire order is kept within a field), and the Rust type then takes the
//! occurrences of each field it knows. That is what makes the protobuf rules
//! cheap to follow: the last occurrence of a scalar wins, repeated
//! occurrences of a submessage merge, and fields may arrive in any order.
//!
//! Only fields `1..=known` are kept. All others are skipped but still
//! validated (truncated or malformed unknown fields are errors), as are
//! groups, which are accepted only in unknown fields. Entries borrow from the
//! input; nothing is allocated from an untrusted length.

use super::error::{err, in_field, Result};
use super::wire::{enter, expected, read_key, read_value, Entry, Raw, WireType};

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
pub(super) fn parse_into<'de>(
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
pub(super) fn sort_entries(entries: &mut [Entry<'_>]) {
    if !entries.is_sorted_by_key(|e| e.0) {
        entries.sort_by_key(|e| e.0);
    }
}

/// Parses and merges the submessages in `occ` (protobuf merges repeated
/// occurrences of a message field).
pub(super) fn parse_message<'de>(
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
