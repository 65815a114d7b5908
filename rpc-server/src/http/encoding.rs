//! `Content-Encoding` and `Accept-Encoding` on the HTTP/JSON protocol: a
//! request body in gzip or zstd is opened before its JSON is read, and an
//! answer is compressed in what the client accepts (zstd before gzip), under
//! the same `compression` settings as binary answers.
//!
//! Only `identity`, `gzip` (also `x-gzip`) and `zstd` are known; a body in
//! another encoding is refused with a 400 that names the ones served. A
//! `q=0` in `Accept-Encoding` refuses that encoding, as RFC 9110 says.

use bytes::Bytes;
use hyper::header::{HeaderMap, ACCEPT_ENCODING, CONTENT_ENCODING};
use rpc_codec::compression::{self, BodyCompressor};
use rpc_core::{Compression, RpcError};

use crate::config::AnswerCompression;

/// The request body opened from its `Content-Encoding` (at most `max` bytes
/// once opened).
pub(super) fn open_request(
    headers: &HeaderMap,
    body: Bytes,
    max: usize,
) -> Result<Bytes, RpcError> {
    let Some(value) = headers.get(CONTENT_ENCODING) else {
        return Ok(body);
    };
    let name = value.to_str().unwrap_or("").trim().to_ascii_lowercase();
    let algorithm = match name.as_str() {
        "" | "identity" => return Ok(body),
        "gzip" | "x-gzip" => Compression::Gzip,
        "zstd" => Compression::Zstd,
        _ => {
            return Err(RpcError::Compression {
                algorithm: "request",
                reason: format!("Content-Encoding `{name}` is not served (identity, gzip, zstd)"),
                source: None,
            })
        }
    };
    compression::decompress(algorithm, &body, max)
}

/// How to compress the answer to a request with these headers: in the best
/// encoding it accepts that this build has, when the server answers
/// compressed.
pub(super) fn for_answer(
    headers: &HeaderMap,
    settings: &AnswerCompression,
) -> Option<BodyCompressor> {
    if !settings.answers {
        return None;
    }
    let accepted = headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(accepted_coding)
        .filter(|c| compression::is_available(*c))
        // zstd, when offered, before gzip.
        .max_by_key(|c| *c as u8)?;
    Some(BodyCompressor::new(
        accepted,
        settings.min_size,
        settings.level,
    ))
}

/// One `Accept-Encoding` element (`gzip`, `zstd;q=0.5`): the algorithm it
/// accepts, unless its weight is 0.
fn accepted_coding(element: &str) -> Option<Compression> {
    let mut parts = element.split(';');
    let name = parts.next()?.trim().to_ascii_lowercase();
    let refused = parts.any(|p| {
        p.trim()
            .strip_prefix("q=")
            .and_then(|q| q.trim().parse::<f32>().ok())
            .is_some_and(|q| q <= 0.0)
    });
    if refused {
        return None;
    }
    match name.as_str() {
        "gzip" | "x-gzip" => Some(Compression::Gzip),
        "zstd" => Some(Compression::Zstd),
        _ => None,
    }
}

/// The `Content-Encoding` value of an answer in `algorithm`.
pub(super) fn header_value(algorithm: Compression) -> Option<&'static str> {
    match algorithm {
        Compression::None => None,
        Compression::Gzip => Some("gzip"),
        Compression::Zstd => Some("zstd"),
    }
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    fn headers(name: hyper::header::HeaderName, value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn accept_encoding_picks_zstd_then_gzip_and_honours_q_zero() {
        let settings = AnswerCompression::default();
        let pick = |v| for_answer(&headers(ACCEPT_ENCODING, v), &settings).map(|c| c.algorithm());
        let zstd = compression::is_available(Compression::Zstd);
        let gzip = compression::is_available(Compression::Gzip);
        if zstd {
            assert_eq!(pick("gzip, deflate, br, zstd"), Some(Compression::Zstd));
        }
        if gzip {
            assert_eq!(pick("gzip"), Some(Compression::Gzip));
            assert_eq!(pick("zstd;q=0, GZIP;q=0.8"), Some(Compression::Gzip));
        }
        assert_eq!(pick("br, deflate"), None);
        assert_eq!(pick("gzip;q=0"), None);
        let off = AnswerCompression {
            answers: false,
            ..settings
        };
        assert!(for_answer(&headers(ACCEPT_ENCODING, "gzip"), &off).is_none());
        assert!(for_answer(&HeaderMap::new(), &settings).is_none());
    }

    #[test]
    fn content_encoding_opens_known_codings_and_names_the_rest() {
        let body = Bytes::from_static(b"[1, 2]");
        let plain = open_request(&headers(CONTENT_ENCODING, "identity"), body.clone(), 100);
        assert_eq!(plain.unwrap(), body);
        let err = open_request(&headers(CONTENT_ENCODING, "br"), body.clone(), 100).unwrap_err();
        assert!(err.to_string().contains("identity, gzip, zstd"), "{err}");
        let err = open_request(&headers(CONTENT_ENCODING, "gzip"), body, 100).unwrap_err();
        assert!(matches!(err, RpcError::Compression { .. }), "{err}");
    }
}
