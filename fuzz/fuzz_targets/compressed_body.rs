//! Fuzzes opening compressed bodies: arbitrary flags and bytes through
//! `rpc_codec::compression::open_body` must give a body of at most the limit
//! or a clean `Compression` error — never a panic, never more memory than the
//! limit. The first byte is the frame's flags (so every algorithm code, and
//! the unknown one, is reached); the rest is the body.
//!
//! Run: `cd fuzz && cargo fuzz run --sanitizer none compressed_body -- -max_total_time=30`
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rpc_codec::compression::open_body;

const LIMIT: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    match open_body(flags, Bytes::copy_from_slice(body), LIMIT) {
        Ok(opened) => assert!(opened.len() <= LIMIT.max(body.len())),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
