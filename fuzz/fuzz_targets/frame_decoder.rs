//! Fuzzes the frame decoder: any bytes, fed in arbitrary chunks, must decode to
//! frames or a clean error — never a panic, never an allocation beyond the limit.
//!
//! Run: `cargo install cargo-fuzz && cd fuzz && cargo fuzz run --sanitizer none frame_decoder -- -max_total_time=60`
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use rpc_codec::FrameCodec;
use tokio_util::codec::Decoder;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let cut = (split as usize).min(rest.len());
    let mut codec = FrameCodec::new(64 * 1024);
    let mut buf = BytesMut::new();
    for chunk in [&rest[..cut], &rest[cut..]] {
        buf.extend_from_slice(chunk);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(frame)) => {
                    let _ = frame.meta.service();
                    let _ = frame.code();
                    // An error response's body is decoded as a status (status_body).
                    let _ = frame.error_status();
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});
