//! [`Compression`] and [`CompressionConfig`]: the setting that says which
//! algorithm compresses a call's bodies and from what size. The work itself
//! (and which algorithms a build has) is rpc-codec's `compression` module.

use serde::{Deserialize, Serialize};

use crate::named_enum;

named_enum! {
    /// An algorithm for a frame's body. The discriminant is its code in the
    /// frame's flags byte.
    #[derive(Default)]
    pub enum Compression: "compression" {
        /// Bodies go as they are.
        #[default]
        None = 0 => "none" | "off",
        /// gzip (RFC 1952; cargo feature `gzip`).
        Gzip = 1 => "gzip",
        /// Zstandard (cargo feature `zstd`): at its fast levels both quicker
        /// and smaller than gzip.
        Zstd = 2 => "zstd",
    }
}

/// When a sender compresses a body.
///
/// On a client (`[compression]` in its config) every request body of at
/// least `min_size` bytes is compressed with `algorithm`, and every request
/// asks for its answer in it. A server answers in kind (see its own
/// `compression` settings) or uncompressed; a body that does not shrink is
/// sent as it is.
///
/// ```toml
/// [compression]
/// algorithm = "zstd"   # none (default), gzip, zstd
/// min_size = 1024      # bytes; smaller bodies go as they are
/// level = 1            # the algorithm's level (default: its fast level, 1)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompressionConfig {
    /// The algorithm; `none` turns compression off.
    pub algorithm: Compression,
    /// Bodies smaller than this many bytes go uncompressed (1024): below a
    /// kilobyte the work costs more than the bytes it saves.
    pub min_size: usize,
    /// The algorithm's level: zstd 1..=22 (and negative levels, faster
    /// still), gzip 0..=9. Default 1, the fast end of both: an RPC body is
    /// sent once, so speed beats the last percent of size.
    pub level: i32,
}

impl CompressionConfig {
    /// The default level of both algorithms.
    pub const DEFAULT_LEVEL: i32 = 1;
    /// The default smallest body that is compressed.
    pub const DEFAULT_MIN_SIZE: usize = 1024;

    /// `algorithm` from the default size on, at the default level.
    pub fn new(algorithm: Compression) -> Self {
        CompressionConfig {
            algorithm,
            ..CompressionConfig::default()
        }
    }
}

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig {
            algorithm: Compression::None,
            min_size: Self::DEFAULT_MIN_SIZE,
            level: Self::DEFAULT_LEVEL,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes() {
        assert_eq!("ZSTD".parse::<Compression>().unwrap(), Compression::Zstd);
        assert_eq!("off".parse::<Compression>().unwrap(), Compression::None);
        assert_eq!(Compression::Gzip as u8, 1);
        assert_eq!(Compression::Zstd as u8, 2);
        let err = "lz4".parse::<Compression>().unwrap_err().to_string();
        assert!(err.contains("none, gzip, zstd"), "{err}");
    }
}
