//! The start-up lines a server process prints on stdout and the parent reads: `LISTENING
//! <ip:port>` once it accepts connections, then — only when it serves HTTP/JSON —
//! `LISTENING_HTTP <ip:port>` on the very next line.
//!
//! The writing side is [`serve`](super::serve); this module owns the line format and the reading
//! side, which blocks on the child's stdout and hands every other line (the effective
//! configuration) to the caller, so the parent can echo it.

use std::io::BufRead;
use std::net::SocketAddr;

use brisk::transport::addr::ListenAddr;

use super::error::BenchError;

/// The line the server prints once it accepts connections is this prefix followed by the bound
/// address, e.g. `LISTENING 127.0.0.1:40123`.
pub const LISTENING_PREFIX: &str = "LISTENING ";

/// When the server also serves HTTP/JSON, the line right after the `LISTENING` line is this
/// prefix followed by the bound HTTP address, e.g. `LISTENING_HTTP 127.0.0.1:40124`.
pub const LISTENING_HTTP_PREFIX: &str = "LISTENING_HTTP ";

/// The address in a `LISTENING <ip:port>` (or `LISTENING unix:<path>`) line, or `None` for
/// any other line.
pub fn parse_listening_line(line: &str) -> Option<ListenAddr> {
    line.trim_end()
        .strip_prefix(LISTENING_PREFIX)?
        .trim()
        .parse()
        .ok()
}

/// The address in a `LISTENING_HTTP <ip:port>` line, or `None` for any other line.
pub fn parse_listening_http_line(line: &str) -> Option<SocketAddr> {
    line.trim_end()
        .strip_prefix(LISTENING_HTTP_PREFIX)?
        .trim()
        .parse()
        .ok()
}

/// The addresses a server process announced on stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListeningAddrs {
    /// The binary protocol's address (the `LISTENING` line): TCP or a Unix socket.
    pub addr: ListenAddr,
    /// The HTTP/JSON address (the `LISTENING_HTTP` line), when there was one.
    pub http_addr: Option<SocketAddr>,
}

/// [`wait_for_listening`], and with `expect_http` also the `LISTENING_HTTP` line the server
/// prints right after `LISTENING` when it serves HTTP (pass `true` when the child was started
/// with `--http-addr`). Only the one line after `LISTENING` is examined: if it is not
/// `LISTENING_HTTP` it goes to `on_line` and `http_addr` is `None`. Without `expect_http` this
/// never reads past `LISTENING` (a server without HTTP prints nothing more until it stops).
pub fn wait_for_listening_all(
    reader: &mut impl BufRead,
    expect_http: bool,
    mut on_line: impl FnMut(&str),
) -> Result<ListeningAddrs, BenchError> {
    let addr = wait_for_listening(reader, &mut on_line)?;
    if !expect_http {
        return Ok(ListeningAddrs {
            addr,
            http_addr: None,
        });
    }
    let mut line = String::new();
    let n = reader
        .read_line(&mut line)
        .map_err(|source| BenchError::Io {
            context: "reading the benchmark server's output".into(),
            source,
        })?;
    if n == 0 {
        return Err(BenchError::ChildExited {
            last_output: vec![format!("{LISTENING_PREFIX}{addr}")],
        });
    }
    let http_addr = parse_listening_http_line(&line);
    if http_addr.is_none() {
        on_line(line.trim_end());
    }
    Ok(ListeningAddrs { addr, http_addr })
}

/// Reads a server process's stdout until its `LISTENING` line and returns the address. Every
/// other line is handed to `on_line` (e.g. to echo the effective configuration). Blocks; the
/// caller should keep draining (or drop) the reader afterwards. If the output ends first (the
/// child failed; its error is on its stderr) the error is [`BenchError::ChildExited`].
pub fn wait_for_listening(
    reader: &mut impl BufRead,
    mut on_line: impl FnMut(&str),
) -> Result<ListenAddr, BenchError> {
    let mut last = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|source| BenchError::Io {
                context: "reading the benchmark server's output".into(),
                source,
            })?;
        if n == 0 {
            return Err(BenchError::ChildExited { last_output: last });
        }
        if let Some(addr) = parse_listening_line(&line) {
            return Ok(addr);
        }
        let text = line.trim_end();
        on_line(text);
        if last.len() == 5 {
            last.remove(0);
        }
        last.push(text.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_lines() {
        assert_eq!(
            parse_listening_line("LISTENING 127.0.0.1:9080\n"),
            Some("127.0.0.1:9080".parse().unwrap())
        );
        assert_eq!(
            parse_listening_line("LISTENING unix:/tmp/b.sock\n"),
            Some(ListenAddr::Unix("/tmp/b.sock".into()))
        );
        assert_eq!(parse_listening_line("  address 127.0.0.1:9080"), None);
        let mut out = std::io::Cursor::new(b"a\nb\nLISTENING [::1]:5\nafter\n".to_vec());
        let mut seen = Vec::new();
        let addr = wait_for_listening(&mut out, |l| seen.push(l.to_owned())).unwrap();
        assert_eq!(addr, "[::1]:5".parse().unwrap());
        assert_eq!(seen, ["a", "b"]);
        let err =
            wait_for_listening(&mut std::io::Cursor::new(b"oops\n".to_vec()), |_| {}).unwrap_err();
        assert!(err.to_string().contains("oops"), "{err}");
    }

    #[test]
    fn listening_http_lines() {
        assert_eq!(
            parse_listening_http_line("LISTENING_HTTP 127.0.0.1:9081\n"),
            Some("127.0.0.1:9081".parse().unwrap())
        );
        // Neither parser takes the other's line.
        assert_eq!(parse_listening_line("LISTENING_HTTP 127.0.0.1:9081"), None);
        assert_eq!(parse_listening_http_line("LISTENING 127.0.0.1:9080"), None);

        let text = b"cfg\nLISTENING 127.0.0.1:1\nLISTENING_HTTP 127.0.0.1:2\nlater\n";
        let mut seen = Vec::new();
        let got = wait_for_listening_all(&mut std::io::Cursor::new(text.to_vec()), true, |l| {
            seen.push(l.to_owned())
        })
        .unwrap();
        assert_eq!(got.addr, "127.0.0.1:1".parse().unwrap());
        assert_eq!(got.http_addr, Some("127.0.0.1:2".parse().unwrap()));
        assert_eq!(seen, ["cfg"]);

        // Not expected: stops at LISTENING.
        let mut reader = std::io::Cursor::new(text.to_vec());
        let got = wait_for_listening_all(&mut reader, false, |_| {}).unwrap();
        assert_eq!(got.http_addr, None);
        let mut rest = String::new();
        reader.read_line(&mut rest).unwrap();
        assert_eq!(rest, "LISTENING_HTTP 127.0.0.1:2\n");

        // Expected but another line follows: echoed, no HTTP address.
        let mut seen = Vec::new();
        let got = wait_for_listening_all(
            &mut std::io::Cursor::new(b"LISTENING 127.0.0.1:1\nother\n".to_vec()),
            true,
            |l| seen.push(l.to_owned()),
        )
        .unwrap();
        assert_eq!(got.http_addr, None);
        assert_eq!(seen, ["other"]);
    }
}
