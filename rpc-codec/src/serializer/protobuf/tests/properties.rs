//! Property tests: arbitrary values round-trip, and arbitrary or mutated
//! bytes give a value or an error, never a panic.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::{to_vec, Event, Inner, Message};
use crate::serializer::protobuf::decode;

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Arb {
    a: u64,
    b: i32,
    c: f64,
    d: String,
    #[serde(with = "serde_bytes")]
    e: Vec<u8>,
    f: Option<Vec<u16>>,
    g: Vec<Option<String>>,
    h: Vec<Vec<i16>>,
    i: Option<Option<bool>>,
    j: BTreeMap<String, Vec<u64>>,
    k: Vec<Event>,
    l: Option<Box<Arb>>,
    m: (char, i8, f32),
    n: Vec<Inner>,
}

fn arb_event() -> impl Strategy<Value = Event> {
    prop_oneof![
        Just(Event::Ping),
        ".{0,8}".prop_map(Event::Text),
        (any::<i32>(), any::<i32>()).prop_map(|(a, b)| Event::Move(a, b)),
        (".{0,4}", any::<bool>()).prop_map(|(user, admin)| Event::Login { user, admin }),
        Just(Event::Nothing(())),
        any::<u64>().prop_map(Event::Count),
        prop::collection::vec(any::<u32>(), 0..4).prop_map(Event::List),
        any::<Option<u8>>().prop_map(Event::Opt),
    ]
}

fn arb_inner() -> impl Strategy<Value = Inner> {
    (any::<i32>(), ".{0,6}").prop_map(|(x, name)| Inner { x, name })
}

fn arb_leaf() -> impl Strategy<Value = Arb> {
    let part1 = (
        any::<u64>(),
        any::<i32>(),
        any::<f64>().prop_filter("NaN != NaN", |f| !f.is_nan()),
        ".{0,12}",
        prop::collection::vec(any::<u8>(), 0..20),
        proptest::option::of(prop::collection::vec(any::<u16>(), 0..4)),
        prop::collection::vec(proptest::option::of(".{0,3}"), 0..4),
    );
    let part2 = (
        prop::collection::vec(prop::collection::vec(any::<i16>(), 0..3), 0..3),
        any::<Option<Option<bool>>>(),
        prop::collection::btree_map(".{0,3}", prop::collection::vec(any::<u64>(), 0..3), 0..3),
        prop::collection::vec(arb_event(), 0..4),
        (
            any::<char>(),
            any::<i8>(),
            any::<f32>().prop_filter("NaN != NaN", |f| !f.is_nan()),
        ),
        prop::collection::vec(arb_inner(), 0..3),
    );
    (part1, part2).prop_map(|((a, b, c, d, e, f, g), (h, i, j, k, m, n))| Arb {
        a,
        b,
        c,
        d,
        e,
        f,
        g,
        h,
        i,
        j,
        k,
        l: None,
        m,
        n,
    })
}

fn arb() -> impl Strategy<Value = Arb> {
    arb_leaf().prop_recursive(4, 8, 1, |inner| {
        (arb_leaf(), proptest::option::of(inner)).prop_map(|(mut leaf, child)| {
            leaf.l = child.map(Box::new);
            leaf
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn prop_round_trip(v in arb()) {
        let bytes = to_vec(&v);
        let back: Arb = decode(&bytes).map_err(|e| TestCaseError::fail(e.0))?;
        prop_assert_eq!(back, v);
    }

    #[test]
    fn prop_round_trip_tuple_args(v in (any::<u64>(), ".{0,8}", any::<Option<i64>>(), prop::collection::vec(arb_event(), 0..3))) {
        let bytes = to_vec(&v);
        let back: (u64, String, Option<i64>, Vec<Event>) = decode(&bytes).map_err(|e| TestCaseError::fail(e.0))?;
        prop_assert_eq!(back, v);
    }

    #[test]
    fn prop_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode::<Arb>(&bytes);
        let _ = decode::<Message>(&bytes);
        let _ = decode::<Vec<Event>>(&bytes);
        let _ = decode::<(Option<Vec<Option<u8>>>, BTreeMap<u8, Event>)>(&bytes);
    }

    #[test]
    fn prop_mutated_encodings_never_panic(
        v in arb(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = to_vec(&v);
        if !bytes.is_empty() {
            for (at, byte) in edits {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            let _ = decode::<Arb>(&bytes);
            let end = cut.index(bytes.len());
            let _ = decode::<Arb>(&bytes[..end]);
        }
    }
}
