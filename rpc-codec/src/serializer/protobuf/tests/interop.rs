//! Interoperability with prost: our bytes decode as the matching
//! `#[derive(prost::Message)]` type and its bytes decode as ours, and where
//! both follow proto3's default omission the bytes are identical.

use std::collections::HashMap;

use prost::Message as _;
use serde::{Deserialize, Serialize};

use super::{round_trip, sample, to_vec, Color, Event, Inner, Message};
use crate::serializer::protobuf::decode;

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
