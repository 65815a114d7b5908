//! Tests of the protobuf serializer, by the rule they check.
//!
//! This module holds the helpers and the fixture types several groups share;
//! each submodule is one group: interoperability with prost, the shapes the
//! encoder writes, the decoder's rules and limits, and property tests over
//! arbitrary values and arbitrary bytes.

mod decoding;
mod interop;
mod properties;
mod shapes;

use std::fmt::Debug;

use bytes::BytesMut;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{decode, encode};

/// `value` encoded, as a `Vec`.
fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(value, &mut out).unwrap();
    out.to_vec()
}

/// Encodes and decodes `value`, asserts it came back equal, and returns its bytes.
#[track_caller]
fn round_trip<T>(value: &T) -> Vec<u8>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let bytes = to_vec(value);
    let back: T =
        decode(&bytes).unwrap_or_else(|e| panic!("decoding {value:?} from {bytes:02x?}: {e}"));
    assert_eq!(&back, value, "bytes: {bytes:02x?}");
    bytes
}

/// The realistic record (a chat message); `interop` has its prost twin.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Message {
    id: u64,
    from_uid: u64,
    to_uid: u64,
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
