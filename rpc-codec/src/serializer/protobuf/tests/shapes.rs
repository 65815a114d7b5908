//! The shapes the encoder writes: top-level values, tuple arguments, bytes,
//! options and the wrapper rule, enums, nested containers, integers and
//! floats at their limits, multi-byte lengths, and what an error leaves in
//! the output buffer.

use std::collections::{BTreeMap, HashMap};

use bytes::BytesMut;
use prost::Message as _;
use serde::{ser, Deserialize, Serialize};

use super::{round_trip, sample, to_vec, Color, Event, Inner, Message};
use crate::serializer::protobuf::{decode, encode, PbError};

#[test]
fn enums_of_every_kind_round_trip() {
    let all = vec![
        Event::Ping,
        Event::Text("hi".into()),
        Event::Text(String::new()),
        Event::Move(-1, 0),
        Event::Login {
            user: "root".into(),
            admin: true,
        },
        Event::Login {
            user: String::new(),
            admin: false,
        },
        Event::Nothing(()),
        Event::Count(0),
        Event::List(vec![]),
        Event::List(vec![0, 1]),
        Event::Opt(None),
        Event::Opt(Some(0)),
    ];
    for e in &all {
        round_trip(e);
        round_trip(&Some(e.clone()));
        round_trip(&(e.clone(), 7u8));
    }
    round_trip(&all);
    let map: BTreeMap<u32, Event> = all
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, e)| (i as u32, e))
        .collect();
    round_trip(&map);
    round_trip(&vec![Color::Red, Color::Green, Color::Red]);
    round_trip(&Color::Red);
    assert_eq!(to_vec(&Color::Red), Vec::<u8>::new()); // proto3 enum default
    assert_eq!(to_vec(&Color::Blue), vec![0x08, 2]);
    // Newtype variant: oneof submessage {variant_index + 1: payload}.
    assert_eq!(to_vec(&Event::Count(0)), vec![0x0a, 2, 0x30, 0]);
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Unit;

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct UserId(u64);

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Pair(u32, String);

#[test]
fn top_level_shapes() {
    assert!(round_trip(&()).is_empty());
    assert!(round_trip(&Unit).is_empty());
    assert_eq!(decode::<()>(&to_vec(&sample())).unwrap(), ());
    assert_eq!(round_trip(&"hi".to_string()), vec![0x0a, 2, b'h', b'i']);
    assert!(round_trip(&String::new()).is_empty());
    assert_eq!(round_trip(&5u64), vec![0x08, 5]);
    assert_eq!(to_vec(&(5u64,)), vec![0x08, 5]);
    assert_eq!(to_vec(&UserId(5)), vec![0x08, 5]);
    round_trip(&UserId(5));
    round_trip(&Pair(3, "x".into()));
    assert!(round_trip(&0u64).is_empty());
    assert!(round_trip(&false).is_empty());
    assert_eq!(round_trip(&true), vec![0x08, 1]);
    round_trip(&'é');
    round_trip(&'\0');
    assert_eq!(round_trip(&Some(0u64)), vec![0x08, 0]);
    assert!(round_trip(&None::<u64>).is_empty());
    round_trip(&vec![1u32, 2, 3]);
    round_trip(&Vec::<String>::new());
    round_trip(&[1u8, 2, 3]);
    round_trip(&Some(vec![0u8]));
}

#[test]
fn tuple_arguments_are_fields_in_order() {
    let args = (7u64, "name".to_string(), true, -3i32, Some(1.5f32));
    let bytes = round_trip(&args);
    assert_eq!(
        bytes,
        vec![
            0x08, 7, // 1: 7
            0x12, 4, b'n', b'a', b'm', b'e', // 2: "name"
            0x18, 1, // 3: true
            0x20, 5, // 4: zigzag(-3)
            0x2d, 0, 0, 0xc0, 0x3f // 5: fixed32 1.5
        ]
    );
    round_trip(&(sample(), vec![sample(), sample()]));
    round_trip(&(0u8, 0i64, String::new(), None::<String>, Vec::<u8>::new()));
}

#[test]
fn bytes_via_serde_bytes() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Blob {
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
        plain: Vec<u8>,
    }
    let b = Blob {
        data: (0..=255).collect(),
        plain: vec![0, 200],
    };
    let bytes = round_trip(&b);
    assert_eq!(&bytes[..3], &[0x0a, 0x80, 0x02]);
    round_trip(&serde_bytes::ByteBuf::from(vec![1, 2, 3]));
    round_trip(&serde_bytes::ByteBuf::new());
    round_trip(&Blob {
        data: vec![],
        plain: vec![],
    });
    round_trip(&vec![
        serde_bytes::ByteBuf::new(),
        serde_bytes::ByteBuf::from(vec![9]),
    ]);
}

#[test]
fn options() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Opts {
        a: Option<u32>,
        b: Option<String>,
        c: Option<Inner>,
        d: Option<Vec<u32>>,
        e: Option<Option<bool>>,
        f: Option<HashMap<u8, u8>>,
        g: Option<()>,
    }
    for v in [
        Opts {
            a: None,
            b: None,
            c: None,
            d: None,
            e: None,
            f: None,
            g: None,
        },
        Opts {
            a: Some(0),
            b: Some(String::new()),
            c: Some(Inner::default()),
            d: Some(vec![]),
            e: Some(None),
            f: Some(HashMap::new()),
            g: Some(()),
        },
        Opts {
            a: Some(1),
            b: Some("b".into()),
            c: Some(Inner {
                x: 1,
                name: "c".into(),
            }),
            d: Some(vec![0, 1]),
            e: Some(Some(false)),
            f: Some([(0, 0)].into_iter().collect()),
            g: None,
        },
    ] {
        round_trip(&v);
    }
    for v in [None, Some(None), Some(Some(None)), Some(Some(Some(0u8)))] {
        round_trip(&v);
    }
}

#[test]
fn nested_containers_need_wrappers() {
    round_trip(&vec![None, Some(0u32), None, Some(5)]);
    round_trip(&vec![vec![], vec![0u64], vec![], vec![1, 2]]);
    round_trip(&vec![vec![vec![Some(vec![0u8])], vec![]], vec![]]);
    round_trip(&vec![
        Some(vec![]),
        None,
        Some(vec![None, Some(String::new())]),
    ]);
    round_trip(&vec![
        HashMap::<String, Vec<u8>>::new(),
        [("k".into(), vec![])].into_iter().collect(),
    ]);
    round_trip(&vec![(), (), ()]);
    round_trip(&vec![Unit, Unit]);
    round_trip(&vec![Inner::default(), Inner::default()]);
    round_trip(&vec![0.0f64, -0.0, f64::INFINITY]);
    let m: BTreeMap<Option<u8>, Vec<Option<u8>>> = [
        (None, vec![]),
        (Some(0), vec![None]),
        (Some(1), vec![Some(0)]),
    ]
    .into_iter()
    .collect();
    round_trip(&m);
    round_trip(&Some(m));
}

#[test]
fn nested_structs_and_vec_of_structs() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Thread {
        title: String,
        first: Message,
        replies: Vec<Message>,
        by_id: BTreeMap<u64, Message>,
        meta: (u8, Inner),
    }
    let t = Thread {
        title: "t".into(),
        first: sample(),
        replies: vec![
            sample(),
            Message {
                id: 0,
                from_uid: 0,
                to_uid: 0,
                content: String::new(),
            },
        ],
        by_id: [(1, sample()), (0, sample())].into_iter().collect(),
        meta: (0, Inner::default()),
    };
    round_trip(&t);
}

#[test]
fn hashmap_string_u64() {
    let m: HashMap<String, u64> = [("a".into(), 1), ("bb".into(), 0), (String::new(), 7)]
        .into_iter()
        .collect();
    round_trip(&m);
    round_trip(&HashMap::<String, u64>::new());
    #[derive(Clone, PartialEq, prost::Message)]
    struct PMap {
        #[prost(map = "string, uint64", tag = "1")]
        m: HashMap<String, u64>,
    }
    let p = PMap { m: m.clone() };
    assert_eq!(
        decode::<HashMap<String, u64>>(&p.encode_to_vec()).unwrap(),
        m
    );
    assert_eq!(PMap::decode(to_vec(&m).as_slice()).unwrap(), p);
}

#[test]
fn negative_ints_and_floats() {
    round_trip(&(i8::MIN, i16::MIN, i32::MIN, i64::MIN));
    round_trip(&(i8::MAX, i16::MAX, i32::MAX, i64::MAX));
    round_trip(&(-1i8, -1i16, -1i32, -1i64));
    round_trip(&(u8::MAX, u16::MAX, u32::MAX, u64::MAX));
    assert_eq!(to_vec(&-1i64), vec![0x08, 1]);
    assert_eq!(to_vec(&1i64), vec![0x08, 2]);
    round_trip(&(f32::MIN_POSITIVE, f32::MAX, -0.0f32, f32::NEG_INFINITY));
    round_trip(&(f64::EPSILON, f64::MIN, -0.0f64, 1e300));
    let bytes = to_vec(&(-0.0f64, f64::NAN));
    let (z, n): (f64, f64) = decode(&bytes).unwrap();
    assert!(z == 0.0 && z.is_sign_negative() && n.is_nan());
}

#[test]
fn large_submessages_get_multi_byte_lengths() {
    for len in [126, 127, 128, 129, 16_383, 16_384, 70_000] {
        let inner = Inner {
            x: 1,
            name: "x".repeat(len),
        };
        let outer = (vec![inner.clone(), inner], Some(Some("tail".to_string())));
        round_trip(&outer);
    }
}

#[test]
fn encode_appends_and_truncates_on_error() {
    let mut out = BytesMut::from(&b"head"[..]);
    encode(&5u64, &mut out).unwrap();
    assert_eq!(&out[..], b"head\x08\x05");

    struct Failing;
    impl Serialize for Failing {
        fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use ser::SerializeStruct;
            let mut st = s.serialize_struct("Failing", 2)?;
            st.serialize_field("a", &7u32)?;
            Err(ser::Error::custom("boom"))
        }
    }
    let e = encode(&(1u8, Failing), &mut out).unwrap_err();
    assert_eq!(e, PbError("boom".into()));
    assert_eq!(&out[..], b"head\x08\x05");
    assert!(encode(&1u128, &mut out).is_err());
    assert_eq!(&out[..], b"head\x08\x05");
}
