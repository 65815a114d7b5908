//! Realistic request argument types shared by the `request_*` fuzz targets: the
//! argument tuples of the test and benchmark services, and a struct that uses every
//! serde shape the serializers map (strings, bytes, options, sequences, maps,
//! enums, nested structs, floats).

use std::collections::BTreeMap;

use rpc_codec::{BodyCodec, SerializerKind};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
pub enum Kind {
    Plain,
    Urgent,
    Tagged(String),
    Scored { score: f32 },
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Inner {
    pub key: String,
    pub value: Option<i32>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Message {
    pub id: i64,
    pub title: String,
    pub body: Option<String>,
    pub tags: Vec<String>,
    pub attrs: BTreeMap<String, u64>,
    pub kind: Kind,
    pub parts: Vec<Inner>,
    pub ratio: f64,
    pub flag: bool,
    pub ch: char,
    pub blob: Vec<u8>,
}

/// Decodes `data` as each argument shape with `ser`; a value that decodes is
/// encoded again. Errors are expected; a panic (or abort) is the bug.
pub fn decode_all(ser: SerializerKind, data: &[u8]) {
    fn one<T: serde::de::DeserializeOwned + Serialize>(ser: SerializerKind, data: &[u8]) {
        if let Ok(v) = ser.decode::<T>(data) {
            let mut out = bytes::BytesMut::new();
            let _ = ser.encode(&v, &mut out);
        }
    }
    one::<(i64, i64)>(ser, data); // Calc.add
    one::<(Vec<u8>,)>(ser, data); // echo
    one::<(String,)>(ser, data); // Hello.greet / Calc.fail
    one::<(u64,)>(ser, data); // sleep_ms, wait_gate
    one::<()>(ser, data); // do_nothing
    one::<Message>(ser, data); // a result / struct argument
    one::<(i64, Message, Option<Vec<Kind>>)>(ser, data);
    one::<BTreeMap<String, Vec<Inner>>>(ser, data);
}
