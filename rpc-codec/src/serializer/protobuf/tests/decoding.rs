//! The decoder's rules: unknown fields are skipped, the last scalar wins and
//! submessages merge, errors name the field path, nesting is limited the same
//! way on both sides (and deep input is an error, not a stack overflow), and
//! serde attributes do not shift field numbers.

use bytes::BytesMut;
use serde::{Deserialize, Serialize};

use super::{round_trip, sample, to_vec, Color, Event, Inner, Message};
use crate::serializer::protobuf::wire::{encode_key, encode_varint, WireType, RECURSION_LIMIT};
use crate::serializer::protobuf::{decode, encode};

#[test]
fn unknown_fields_are_skipped() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct V2 {
        id: u64,
        from_uid: u64,
        to_uid: u64,
        content: String,
        extra: Vec<Inner>,
        flag: bool,
    }
    let v2 = V2 {
        id: 1,
        from_uid: 2,
        to_uid: 3,
        content: "c".into(),
        extra: vec![Inner::default()],
        flag: true,
    };
    let old: Message = decode(&to_vec(&v2)).unwrap();
    assert_eq!(old.content, "c");
    let new: V2 = decode(&to_vec(&old)).unwrap();
    assert!(new.extra.is_empty() && !new.flag);

    // Unknown fields of every wire type, including a group.
    let mut bytes = to_vec(&sample());
    bytes.extend_from_slice(&[
        0x28, 0x96, 0x01, // 5: varint
        0x31, 1, 2, 3, 4, 5, 6, 7, 8, // 6: fixed64
        0x3d, 1, 2, 3, 4, // 7: fixed32
        0x42, 2, 0xff, 0xff, // 8: bytes
        0x4b, 0x08, 1, 0x4c, // 9: group { 1: 1 }
    ]);
    assert_eq!(decode::<Message>(&bytes).unwrap(), sample());
}

#[test]
fn last_scalar_wins_and_messages_merge() {
    let bytes = [0x08, 1, 0x08, 2, 0x22, 1, b'a', 0x22, 1, b'b'];
    let m: Message = decode(&bytes).unwrap();
    assert_eq!((m.id, m.content.as_str()), (2, "b"));

    #[derive(Deserialize, Debug, PartialEq)]
    struct Outer {
        inner: Inner,
        list: Vec<u8>,
    }
    // inner = {1: zz(3)} then {2: "n"}: merged; list repeated then packed.
    let bytes = [
        0x0a, 2, 0x08, 6, 0x0a, 3, 0x12, 1, b'n', 0x10, 1, 0x12, 2, 2, 3,
    ];
    let o: Outer = decode(&bytes).unwrap();
    assert_eq!(
        o,
        Outer {
            inner: Inner {
                x: 3,
                name: "n".into()
            },
            list: vec![1, 2, 3]
        }
    );
}

#[test]
fn errors_name_the_field_and_the_problem() {
    // Field 4 (content) as a varint.
    let e = decode::<Message>(&[0x20, 1]).unwrap_err();
    assert_eq!(
        e.0,
        "at field 4: expected a length-delimited value for string, found varint"
    );
    // Truncated string.
    let e = decode::<Message>(&[0x22, 5, b'a']).unwrap_err();
    assert!(e.0.contains("field 4") && e.0.contains("exceeds"), "{e}");
    // Nested path with an index.
    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Outer {
        list: Vec<Inner>,
    }
    let e = decode::<Outer>(&[0x0a, 0, 0x0a, 2, 0x10, 0x05]).unwrap_err();
    assert!(
        e.0.starts_with("at field 1[1].2: expected a length-delimited"),
        "{e}"
    );
    // Out of range.
    let e = decode::<(u8,)>(&[0x08, 0x80, 0x02]).unwrap_err();
    assert_eq!(e.0, "at field 1: value 256 is out of range for u8");
    // Invalid UTF-8.
    let e = decode::<String>(&[0x0a, 1, 0xff]).unwrap_err();
    assert!(e.0.contains("invalid UTF-8"), "{e}");
    // Bad key / wire type / tag 0 / truncated varint.
    for bad in [
        &[0x0f][..],
        &[0x00, 1],
        &[0x08],
        &[0x08, 0x80],
        &[0x09, 1, 2],
    ] {
        assert!(decode::<Message>(bad).is_err(), "{bad:?}");
    }
    // Unknown enum variant, empty oneof.
    assert!(decode::<Color>(&[0x08, 7]).is_err());
    assert!(decode::<Event>(&[0x0a, 0]).unwrap_err().0.contains("oneof"));
    // A known field holding a group.
    assert!(decode::<Message>(&[0x0b, 0x0c])
        .unwrap_err()
        .0
        .contains("groups"));
    // Garbage for the unit type is still validated.
    assert!(decode::<()>(&[0xff]).is_err());
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Node {
    value: u32,
    next: Option<Box<Node>>,
}

fn chain(len: usize) -> Node {
    let mut node = Node {
        value: 0,
        next: None,
    };
    for i in 1..len {
        node = Node {
            value: i as u32,
            next: Some(Box::new(node)),
        };
    }
    node
}

fn drop_chain(mut node: Node) {
    while let Some(next) = node.next.take() {
        node = *next;
    }
}

#[test]
fn recursion_limit_is_the_same_for_encode_and_decode() {
    let mut last_ok = 0;
    for len in 90..110 {
        let node = chain(len);
        let mut out = BytesMut::new();
        match encode(&node, &mut out) {
            Ok(()) => {
                let back: Node = decode(&out).unwrap();
                assert!(back == node);
                drop_chain(back);
                last_ok = len;
            }
            Err(e) => assert!(e.0.contains("recursion limit"), "{e}"),
        }
        drop_chain(node);
    }
    assert_eq!(last_ok, RECURSION_LIMIT as usize + 1);
}

/// `levels` length-delimited submessages nested in field `tag`.
fn nested(tag: u32, levels: usize) -> Vec<u8> {
    let mut msg = BytesMut::new();
    for _ in 0..levels {
        let mut outer = BytesMut::new();
        encode_key(tag, WireType::LengthDelimited, &mut outer);
        encode_varint(msg.len() as u64, &mut outer);
        outer.extend_from_slice(&msg);
        msg = outer;
    }
    msg.to_vec()
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Tree(Vec<Tree>);

#[test]
fn deep_input_is_an_error_not_a_stack_overflow() {
    // Far past the limit: an error, never a stack overflow.
    for levels in [RECURSION_LIMIT as usize + 5, 5_000] {
        let e = decode::<Node>(&nested(2, levels)).unwrap_err();
        assert!(e.0.contains("recursion limit"), "{e}");
        // Newtype around a sequence: every level is a wrapper message.
        let e = decode::<Tree>(&nested(1, levels)).unwrap_err();
        assert!(e.0.contains("recursion limit"), "{e}");
    }
    // Within the limit it decodes.
    let tree: Tree = decode(&nested(1, 40)).unwrap();
    let mut depth = 0;
    let mut t = &tree;
    while let Some(child) = t.0.first() {
        depth += 1;
        t = child;
    }
    assert!(depth > 10, "{depth}");
    round_trip(&tree);
    // Deeply nested groups in an unknown field.
    let mut groups = vec![0x7b; 5_000];
    groups.extend(vec![0x7c; 5_000]);
    let e = decode::<Node>(&groups).unwrap_err();
    assert!(e.0.contains("recursion limit"), "{e}");
    // Shallow groups in an unknown field are skipped.
    assert_eq!(decode::<Node>(&[0x7b, 0x7b, 0x7c, 0x7c]).unwrap(), chain(1));
}

#[test]
fn serde_attributes() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Attrs {
        #[serde(rename = "renamed")]
        a: u32,
        #[serde(skip)]
        skipped: u32,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        b: Option<u32>,
        c: u32,
    }
    let v = Attrs {
        a: 1,
        skipped: 0,
        b: None,
        c: 3,
    };
    assert_eq!(round_trip(&v), vec![0x08, 1, 0x18, 3]);
    round_trip(&Attrs { b: Some(2), ..v });
}

#[test]
fn aliases_do_not_shift_field_numbers() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Aliased {
        #[serde(alias = "old_a", alias = "older_a")]
        a: u32,
        b: String,
        #[serde(alias = "old_c")]
        c: Vec<u8>,
    }
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    enum AliasedEnum {
        #[serde(alias = "Z")]
        A(u8),
        B {
            x: Aliased,
        },
    }
    let v = Aliased {
        a: 1,
        b: "b".into(),
        c: vec![3],
    };
    assert_eq!(round_trip(&v), vec![0x08, 1, 0x12, 1, b'b', 0x18, 3]);
    round_trip(&AliasedEnum::A(4));
    round_trip(&vec![AliasedEnum::B { x: v }, AliasedEnum::A(0)]);
}
