//! Compressed bodies: the bits of a frame's flags byte that say how its body
//! is compressed and which algorithm its sender takes for the answer, and the
//! compression itself — gzip through `flate2` (feature `gzip`) and Zstandard
//! through `zstd` (feature `zstd`).
//!
//! # Flags byte
//!
//! ```text
//!  bits 0-1  the body's algorithm: 0 none, 1 gzip, 2 zstd (3: an error)
//!  bits 2-3  requests only: the algorithm the caller takes its answer in
//!  bits 4-7  reserved, 0
//! ```
//!
//! # Invariants
//!
//! - Only the body of a request or of a successful answer is ever
//!   compressed; meta sections, error statuses, pings, cancels and stream
//!   frames never are, so a peer that does not compress reads them unchanged.
//! - A body is sent compressed only when that made it smaller.
//! - Opening a body never yields more than the frame limit: decompression
//!   stops one byte past it, so a small "zip bomb" costs at most
//!   `max_frame_size` of memory, like an uncompressed frame.
//! - A body that cannot be opened fails its call alone
//!   ([`RpcError::Compression`]); the connection and its other calls go on.

use bytes::Bytes;
use rpc_core::{Compression, CompressionConfig, RpcError};

/// Bits 0-1 of the flags byte: the body's algorithm.
pub const BODY_MASK: u8 = 0b0000_0011;
/// Where the algorithm a caller takes its answer in starts (bits 2-3).
const ACCEPT_SHIFT: u8 = 2;

/// zstd's levels (negative ones are faster still); gzip takes 0..=9.
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = -(1 << 17)..=22;

/// Bits 2-3 of the flags byte: the algorithm a caller takes its answer in.
pub const ACCEPT_MASK: u8 = BODY_MASK << ACCEPT_SHIFT;

/// The flags byte of a frame whose body is compressed with `body` and whose
/// sender takes its answer in `accept`.
#[inline]
pub fn flags(body: Compression, accept: Compression) -> u8 {
    body as u8 | (accept as u8) << ACCEPT_SHIFT
}

/// The algorithm the body of a frame with these flags is compressed with.
pub fn body_compression(flags: u8) -> Result<Compression, RpcError> {
    match flags & BODY_MASK {
        0 => Ok(Compression::None),
        1 => Ok(Compression::Gzip),
        2 => Ok(Compression::Zstd),
        other => Err(RpcError::Compression {
            algorithm: "unknown",
            reason: format!(
                "the frame's flags name compression {other}, which no brisk version has"
            ),
            source: None,
        }),
    }
}

/// The algorithm a request with these flags takes its answer in, if this
/// build has it ([`Compression::None`] otherwise: the answer goes plain).
#[inline]
pub fn accepted(flags: u8) -> Compression {
    if flags & ACCEPT_MASK == 0 {
        return Compression::None;
    }
    match body_compression(flags >> ACCEPT_SHIFT) {
        Ok(c) if is_available(c) => c,
        _ => Compression::None,
    }
}

/// Whether this build can compress and decompress with `algorithm`.
pub fn is_available(algorithm: Compression) -> bool {
    match algorithm {
        Compression::None => true,
        Compression::Gzip => cfg!(feature = "gzip"),
        Compression::Zstd => cfg!(feature = "zstd"),
    }
}

/// Whether a frame with these flags has a compressed body (or claims to).
#[inline]
pub fn is_compressed(flags: u8) -> bool {
    flags & BODY_MASK != 0
}

/// The body of a frame with these flags, decompressed when it was
/// compressed (a plain body is returned as it is, without a copy), and at
/// most `max` bytes.
#[inline]
pub fn open_body(flags: u8, body: Bytes, max: usize) -> Result<Bytes, RpcError> {
    if !is_compressed(flags) {
        return Ok(body);
    }
    open_compressed(flags, &body, max)
}

/// [`open_body`]'s rare case, out of the hot path.
#[cold]
#[inline(never)]
fn open_compressed(flags: u8, body: &[u8], max: usize) -> Result<Bytes, RpcError> {
    decompress(body_compression(flags)?, body, max)
}

/// `body` decompressed with `algorithm`; more than `max` bytes is an error.
pub fn decompress(algorithm: Compression, body: &[u8], max: usize) -> Result<Bytes, RpcError> {
    let fail = |reason: String, source: Option<std::io::Error>| RpcError::Compression {
        algorithm: algorithm.name(),
        reason,
        source: source.map(rpc_core::Cause::new),
    };
    let mut out = Vec::with_capacity(body.len().saturating_mul(4).min(max));
    let read = match algorithm {
        Compression::None => {
            out.extend_from_slice(body);
            Ok(body.len())
        }
        #[cfg(feature = "gzip")]
        Compression::Gzip => read_limited(flate2::read::MultiGzDecoder::new(body), max, &mut out),
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd_cx::decompress(body, max, &mut out),
        #[allow(unreachable_patterns)]
        other => return Err(fail(missing_feature(other), None)),
    };
    match read {
        Ok(n) if n > max => Err(fail(
            format!("more than the frame limit of {max} bytes once decompressed (max_frame_size)"),
            None,
        )),
        Ok(_) => Ok(Bytes::from(out)),
        Err(e) => Err(fail(format!("corrupt compressed data: {e}"), Some(e))),
    }
}

/// Reads `reader` to its end into `out`, but not more than one byte past
/// `max` (which tells "exactly max" from "more").
#[cfg(any(feature = "gzip", feature = "zstd"))]
fn read_limited(
    reader: impl std::io::Read,
    max: usize,
    out: &mut Vec<u8>,
) -> std::io::Result<usize> {
    use std::io::Read;
    reader.take(max as u64 + 1).read_to_end(out)
}

/// Zstandard with a context per thread: making a compression context costs
/// more than compressing a kilobyte with it (~10 µs), so each thread keeps
/// one compressor (for the last level it used) and one decompressor.
#[cfg(feature = "zstd")]
mod zstd_cx {
    use std::cell::RefCell;

    thread_local! {
        static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
            const { RefCell::new(None) };
        static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { RefCell::new(None) };
    }

    pub(super) fn compress(body: &[u8], level: i32) -> Option<Vec<u8>> {
        COMPRESSOR.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.as_ref().map(|(l, _)| *l) != Some(level) {
                *cell = Some((level, zstd::bulk::Compressor::new(level).ok()?));
            }
            cell.as_mut()?.1.compress(body).ok()
        })
    }

    /// Into `out`, at most `max` bytes (or one more, which the caller refuses).
    /// A body whose frame header states its size (brisk's do) is opened in
    /// one pass with the thread's context into exactly that room; anything
    /// else (no size stated, several frames, corrupt) takes the streaming
    /// decoder, stopped past `max`.
    pub(super) fn decompress(body: &[u8], max: usize, out: &mut Vec<u8>) -> std::io::Result<usize> {
        if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(body) {
            if size <= max as u64 {
                out.reserve(size as usize);
                let done = DECOMPRESSOR.with(|cell| {
                    let mut cell = cell.borrow_mut();
                    if cell.is_none() {
                        *cell = Some(zstd::bulk::Decompressor::new()?);
                    }
                    match cell.as_mut() {
                        Some(d) => d.decompress_to_buffer(body, out),
                        None => Err(std::io::Error::other("no zstd context")),
                    }
                });
                if let Ok(n) = done {
                    return Ok(n);
                }
                out.clear();
            }
        }
        super::read_limited(zstd::stream::read::Decoder::with_buffer(body)?, max, out)
    }
}

fn missing_feature(algorithm: Compression) -> String {
    format!("this build of brisk has no {algorithm} (cargo feature `{algorithm}`)")
}

/// How a sender compresses its bodies: an algorithm this build has, from
/// which size, at which level. Small and `Copy`: a server keeps one in each
/// call's answer address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyCompressor {
    algorithm: Compression,
    min_size: u32,
    level: i32,
}

impl BodyCompressor {
    /// The compressor `config` asks for; `None` when it turns compression
    /// off. An algorithm missing from this build, or a level it does not
    /// have, is a config error naming `key`.
    pub fn from_config(config: &CompressionConfig, key: &str) -> Result<Option<Self>, RpcError> {
        if config.algorithm == Compression::None {
            return Ok(None);
        }
        let compressor = BodyCompressor::new(config.algorithm, config.min_size, config.level);
        compressor.check(key)?;
        Ok(Some(compressor))
    }

    /// A compressor with these settings, unchecked (a gzip level beyond 0..=9
    /// is taken as the nearest one). For answers in the algorithm a caller
    /// asked for; [`from_config`](Self::from_config) checks a user's choice.
    pub fn new(algorithm: Compression, min_size: usize, level: i32) -> Self {
        BodyCompressor {
            algorithm,
            min_size: u32::try_from(min_size).unwrap_or(u32::MAX),
            level,
        }
    }

    /// Checks that this build has the algorithm and the level; errors name `key`.
    pub fn check(&self, key: &str) -> Result<(), RpcError> {
        if !is_available(self.algorithm) {
            return Err(RpcError::config(
                format!("{key}.algorithm"),
                missing_feature(self.algorithm),
            ));
        }
        let (low, high) = match self.algorithm {
            Compression::Gzip => (0, 9),
            _ => (*ZSTD_LEVELS.start(), *ZSTD_LEVELS.end()),
        };
        if !(low..=high).contains(&self.level) {
            return Err(RpcError::config(
                format!("{key}.level"),
                format!(
                    "{} takes levels {low}..={high}, not {}",
                    self.algorithm, self.level
                ),
            ));
        }
        Ok(())
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Compression {
        self.algorithm
    }

    /// `body` compressed, with the algorithm it is compressed in — or as it
    /// is, with [`Compression::None`], when it is under the size threshold or
    /// did not shrink.
    pub fn compress(&self, body: Bytes) -> (Bytes, Compression) {
        if body.len() < self.min_size as usize || self.algorithm == Compression::None {
            return (body, Compression::None);
        }
        match compress(self.algorithm, &body, self.level) {
            Some(packed) if packed.len() < body.len() => (Bytes::from(packed), self.algorithm),
            _ => (body, Compression::None),
        }
    }
}

/// `body` compressed with `algorithm` at `level`; `None` when this build
/// lacks it (never, for a checked [`BodyCompressor`]) or it failed.
fn compress(algorithm: Compression, body: &[u8], level: i32) -> Option<Vec<u8>> {
    match algorithm {
        #[cfg(feature = "gzip")]
        Compression::Gzip => {
            use std::io::Write;
            let level = flate2::Compression::new(level.clamp(0, 9) as u32);
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 2), level);
            encoder.write_all(body).ok()?;
            encoder.finish().ok()
        }
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd_cx::compress(body, level),
        _ => {
            let _ = (body, level);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize) -> Bytes {
        let s = "the quick brown fox jumps over the lazy dog ".repeat(n / 44 + 1);
        Bytes::from(s[..n].to_owned())
    }

    fn available() -> Vec<Compression> {
        [Compression::Gzip, Compression::Zstd]
            .into_iter()
            .filter(|c| is_available(*c))
            .collect()
    }

    fn compressor(algorithm: Compression) -> BodyCompressor {
        BodyCompressor::from_config(&CompressionConfig::new(algorithm), "compression")
            .unwrap()
            .unwrap()
    }

    #[test]
    fn flags_carry_the_body_and_the_accepted_algorithm() {
        let f = flags(Compression::Zstd, Compression::Gzip);
        assert_eq!(body_compression(f).unwrap(), Compression::Zstd);
        let accepted_gzip = if is_available(Compression::Gzip) {
            Compression::Gzip
        } else {
            Compression::None
        };
        assert_eq!(accepted(f), accepted_gzip);
        assert_eq!(flags(Compression::None, Compression::None), 0);
        let err = body_compression(3).unwrap_err();
        assert!(matches!(err, RpcError::Compression { .. }), "{err}");
    }

    #[test]
    fn compressible_bodies_shrink_and_come_back() {
        for algorithm in available() {
            let c = compressor(algorithm);
            let body = text(64 * 1024);
            let (packed, used) = c.compress(body.clone());
            assert_eq!(used, algorithm);
            assert!(
                packed.len() < body.len() / 4,
                "{algorithm}: {}",
                packed.len()
            );
            let back = open_body(flags(used, Compression::None), packed, 1 << 20).unwrap();
            assert_eq!(back, body);
        }
    }

    #[test]
    fn small_or_incompressible_bodies_go_as_they_are() {
        for algorithm in available() {
            let c = compressor(algorithm);
            let small = text(100);
            assert_eq!(c.compress(small.clone()), (small, Compression::None));
            // Bytes that do not repeat do not shrink.
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            let random: Vec<u8> = (0..4096)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let random = Bytes::from(random);
            assert_eq!(c.compress(random.clone()), (random, Compression::None));
        }
    }

    #[test]
    fn contexts_are_reused_across_bodies_and_levels() {
        if !is_available(Compression::Zstd) {
            return;
        }
        for (i, level) in [1, 1, 3, -5, 3].into_iter().enumerate() {
            let c = BodyCompressor::new(Compression::Zstd, 0, level);
            let body = text(5000 + i * 977);
            let (packed, used) = c.compress(body.clone());
            assert_eq!(used, Compression::Zstd);
            assert_eq!(
                decompress(used, &packed, 1 << 20).unwrap(),
                body,
                "level {level}"
            );
        }
        // Two frames back to back (another sender's): the streaming path opens both.
        let (a, _) = compressor(Compression::Zstd).compress(text(3000));
        let (b, _) = compressor(Compression::Zstd).compress(text(2000));
        let both = [a.as_ref(), b.as_ref()].concat();
        let opened = decompress(Compression::Zstd, &both, 1 << 20).unwrap();
        assert_eq!(opened.len(), 5000);
    }

    #[test]
    fn a_plain_body_is_not_copied() {
        let body = text(2000);
        let opened = open_body(0, body.clone(), 10).unwrap();
        assert_eq!(opened.as_ptr(), body.as_ptr());
    }

    #[test]
    fn corrupt_data_is_a_compression_error() {
        for algorithm in available() {
            let (mut packed, _) = compressor(algorithm).compress(text(8192));
            let mut bytes = packed.to_vec();
            let mid = bytes.len() / 2;
            bytes[mid] ^= 0xFF;
            bytes.truncate(bytes.len() - 3);
            packed = Bytes::from(bytes);
            let err = open_body(flags(algorithm, Compression::None), packed, 1 << 20).unwrap_err();
            assert!(matches!(err, RpcError::Compression { .. }), "{err}");
            assert_eq!(err.code(), rpc_core::Code::BadRequest);
            assert!(err.to_string().starts_with(algorithm.name()), "{err}");
            // Not compressed at all.
            let err = decompress(algorithm, b"plain text, not compressed", 1 << 20).unwrap_err();
            assert!(err.to_string().contains("corrupt"), "{err}");
        }
    }

    #[test]
    fn more_than_the_frame_limit_once_opened_is_refused() {
        for algorithm in available() {
            // A megabyte of zeros packs into a few hundred bytes.
            let zeros = Bytes::from(vec![0u8; 1 << 20]);
            let (packed, used) = compressor(algorithm).compress(zeros);
            assert_eq!(used, algorithm);
            assert!(packed.len() < 8 * 1024);
            let err = decompress(algorithm, &packed, 64 * 1024).unwrap_err();
            assert!(err.to_string().contains("frame limit"), "{err}");
            // Exactly at the limit is fine.
            assert_eq!(
                decompress(algorithm, &packed, 1 << 20).unwrap().len(),
                1 << 20
            );
        }
    }

    #[test]
    fn config_errors_name_the_key() {
        let mut config = CompressionConfig::new(Compression::Gzip);
        config.level = 12;
        if is_available(Compression::Gzip) {
            let err = BodyCompressor::from_config(&config, "compression").unwrap_err();
            assert!(err.to_string().contains("compression.level"), "{err}");
        }
        config.algorithm = Compression::None;
        assert_eq!(
            BodyCompressor::from_config(&config, "compression").unwrap(),
            None
        );
    }
}
