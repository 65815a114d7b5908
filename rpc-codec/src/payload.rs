//! [`Payload`]: bytes in a service signature that decode without a copy.
//!
//! serde hands a deserializer's bytes to a visitor as a borrowed slice of the
//! input; `bytes::Bytes` then copies them into a new allocation. Decoding through
//! [`BodyCodec::decode_bytes`](crate::BodyCodec::decode_bytes) records the frame
//! body (itself a `Bytes` slice of the connection's read buffer) for the duration
//! of the call, and a `Payload` whose borrowed slice lies inside that body
//! becomes a `Bytes::slice_ref` of it: a reference count, no copy. Where a
//! serializer cannot lend its input (JSON writes bytes as numbers), the bytes
//! are copied as usual — the result is the same.

use std::cell::Cell;
use std::fmt;
use std::ops::Deref;

use bytes::Bytes;
use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

thread_local! {
    /// The frame body being decoded on this thread, if any (null otherwise).
    /// A plain pointer, not a cloned `Bytes`: setting and restoring it is a
    /// store each, where a clone would be two atomic reference-count updates.
    static CURRENT_BODY: Cell<*const Bytes> = const { Cell::new(std::ptr::null()) };
}

/// Sets the body that borrowed slices may come from while `f` runs.
pub(crate) fn with_body<R>(body: &Bytes, f: impl FnOnce() -> R) -> R {
    /// Puts the previous pointer back when `f` returns or unwinds, so the
    /// pointer is never left set beyond the borrow of `body`.
    struct Restore(*const Bytes);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT_BODY.with(|c| c.set(self.0));
        }
    }
    let previous = CURRENT_BODY.with(|c| c.replace(body as *const Bytes));
    let _restore = Restore(previous);
    f()
}

fn share_or_copy(v: &[u8]) -> Bytes {
    let body = CURRENT_BODY.with(|c| c.get());
    if !body.is_null() {
        // SAFETY: the pointer is only non-null inside `with_body`, which holds
        // the `&Bytes` it points to borrowed for the whole time it is set, and
        // it is only read on the thread that set it.
        let body = unsafe { &*body };
        let start = body.as_ptr() as usize;
        let p = v.as_ptr() as usize;
        if p >= start && p + v.len() <= start + body.len() {
            return body.slice_ref(v);
        }
    }
    Bytes::copy_from_slice(v)
}

/// Binary data that decodes as a slice of the received frame (no copy) with
/// msgpack, and serializes as bytes (msgpack `bin`, protobuf `bytes`).
///
/// ```
/// use rpc_codec::Payload;
///
/// let p = Payload::from(vec![1u8, 2, 3]);
/// assert_eq!(&p[..], &[1, 2, 3]);
/// let bytes: bytes::Bytes = p.into();
/// assert_eq!(bytes.len(), 3);
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Payload(pub Bytes);

impl Payload {
    /// The bytes.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload({} bytes)", self.0.len())
    }
}

impl Deref for Payload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Bytes> for Payload {
    fn from(b: Bytes) -> Self {
        Payload(b)
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Self {
        Payload(Bytes::from(v))
    }
}

impl From<Payload> for Bytes {
    fn from(p: Payload) -> Bytes {
        p.0
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_bytes(PayloadVisitor)
    }
}

struct PayloadVisitor;

impl<'de> Visitor<'de> for PayloadVisitor {
    type Value = Payload;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("bytes")
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Payload, E> {
        Ok(Payload(share_or_copy(v)))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Payload, E> {
        Ok(Payload(Bytes::copy_from_slice(v)))
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Payload, E> {
        Ok(Payload(Bytes::from(v)))
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Payload, E> {
        Ok(Payload(share_or_copy(v.as_bytes())))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Payload, E> {
        Ok(Payload(Bytes::copy_from_slice(v.as_bytes())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Payload, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(Payload(Bytes::from(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BodyCodec;
    use bytes::BytesMut;
    use rpc_core::SerializerKind;

    fn encode(s: SerializerKind, v: &impl Serialize) -> Bytes {
        let mut b = BytesMut::new();
        s.encode(v, &mut b).unwrap();
        b.freeze()
    }

    #[test]
    fn msgpack_payloads_are_slices_of_the_body() {
        let data: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
        let body = encode(
            SerializerKind::MsgPack,
            &(7u64, Payload::from(data.clone())),
        );
        let (n, p): (u64, Payload) = SerializerKind::MsgPack.decode_bytes(&body).unwrap();
        assert_eq!(n, 7);
        assert_eq!(&p[..], &data[..]);
        let (start, end) = (body.as_ptr() as usize, body.as_ptr() as usize + body.len());
        let at = p.as_ptr() as usize;
        assert!(
            at >= start && at + p.len() <= end,
            "no copy: the payload points into the body"
        );
    }

    #[test]
    fn every_serializer_round_trips_payloads() {
        for s in crate::serializer::built_in() {
            let body = encode(s, &(Payload::from(vec![1u8, 2, 255]),));
            let (p,): (Payload,) = s.decode_bytes(&body).unwrap();
            assert_eq!(&p[..], &[1, 2, 255], "{s}");
            // Plain decode (no body recorded) copies and still works.
            let (q,): (Payload,) = s.decode(&body).unwrap();
            assert_eq!(p, q, "{s}");
        }
    }

    #[test]
    fn the_recorded_body_does_not_leak_past_the_call() {
        let body = encode(SerializerKind::MsgPack, &(Payload::from(vec![9u8; 10]),));
        let _: (Payload,) = SerializerKind::MsgPack.decode_bytes(&body).unwrap();
        CURRENT_BODY.with(|c| assert!(c.get().is_null()));
    }
}
