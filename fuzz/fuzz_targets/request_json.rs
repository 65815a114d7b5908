//! Fuzzes request bodies decoded with the json serializer: arbitrary bytes decoded
//! as realistic argument tuples and structs through `rpc_codec::BodyCodec` must
//! give a value or a clean error — never a panic.
//!
//! Run: `cd fuzz && cargo fuzz run --sanitizer none request_json -- -max_total_time=30`
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpc_codec::SerializerKind;

#[path = "request_types.rs"]
mod request_types;

fuzz_target!(|data: &[u8]| {
    request_types::decode_all(SerializerKind::Json, data);
});
