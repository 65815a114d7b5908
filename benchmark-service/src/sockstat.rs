//! How many TCP data segments the server and the client sent over a port, read with `ss -ti`
//! from outside both processes: the suite's "writes per call" figure, the same for every player.
//!
//! Why segments and not syscalls: the frameworks write through different calls (`send`,
//! `sendmsg`, `writev`), `/proc/<pid>/io` counts only some of them, and syscall tracing needs
//! privileges this machine's containers do not grant. On loopback with `TCP_NODELAY` (every
//! player sets it) each write of less than the MSS leaves as exactly one data segment, so
//! `data_segs_out` (pure ACKs excluded) counts the writes of a framework that writes small
//! frames, and shows coalescing (several answers per write) directly. Writes larger than the
//! MSS (32–64 KiB on loopback) count several segments each.
//!
//! The same lines give `bytes_sent`, what each side put on the wire (TCP payload, headers
//! excluded): the suite's bytes per call, which shows what body compression saves.
//!
//! Counts are per socket and cumulative; a socket that closes between two readings takes its
//! count with it, so the figure is meaningful for persistent connections only.

use std::process::Command;

/// Data segments and bytes sent so far on the established sockets of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentCounts {
    /// Segments sent by the sockets whose local port is the port (the server's side).
    pub server: u64,
    /// Segments sent by the sockets whose peer port is the port (the clients' side).
    pub client: u64,
    /// Bytes sent by the server's side (`bytes_sent`).
    pub server_bytes: u64,
    /// Bytes sent by the clients' side.
    pub client_bytes: u64,
}

/// Reads the counts for `port` with `ss -tinH`; `None` when `ss` is missing or fails.
pub fn data_segments(port: u16) -> Option<SegmentCounts> {
    let filter = format!("( sport = :{port} or dport = :{port} )");
    let out = Command::new("ss")
        .args(["-tinH", "state", "established", &filter])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(parse_ss(&String::from_utf8_lossy(&out.stdout), port))
}

/// Sums `data_segs_out` and `bytes_sent` of `ss -tinH` output: a line per socket (`Recv-Q
/// Send-Q local peer`), then an indented line of its TCP info.
fn parse_ss(text: &str, port: u16) -> SegmentCounts {
    let port_of = |addr: &str| {
        addr.rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
    };
    let mut counts = SegmentCounts::default();
    let mut side: Option<bool> = None;
    for line in text.lines() {
        if !line.starts_with(char::is_whitespace) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            side = match (
                fields.get(2).and_then(|a| port_of(a)),
                fields.get(3).and_then(|a| port_of(a)),
            ) {
                (Some(local), _) if local == port => Some(true),
                (_, Some(peer)) if peer == port => Some(false),
                _ => None,
            };
            continue;
        }
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(name))
                .and_then(|v| v.parse::<u64>().ok())
        };
        let (segs, bytes) = (field("data_segs_out:"), field("bytes_sent:"));
        match side.take() {
            Some(true) => {
                counts.server += segs.unwrap_or(0);
                counts.server_bytes += bytes.unwrap_or(0);
            }
            Some(false) => {
                counts.client += segs.unwrap_or(0);
                counts.client_bytes += bytes.unwrap_or(0);
            }
            None => {}
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_each_side_of_the_port() {
        let text = "0 0 127.0.0.1:54000 127.0.0.1:45999\n\t bbr bytes_sent:70 segs_out:9 data_segs_out:5 data_segs_in:5\n\
                    0 0 127.0.0.1:45999 127.0.0.1:54000\n\t bbr bytes_sent:30 bytes_acked:31 segs_out:6 data_segs_out:4\n\
                    0 0 127.0.0.1:45999 127.0.0.1:54002\n\t bbr data_segs_out:10\n\
                    0 0 [::1]:7 [::1]:8\n\t bytes_sent:5 data_segs_out:99\n";
        assert_eq!(
            parse_ss(text, 45999),
            SegmentCounts {
                server: 14,
                client: 5,
                server_bytes: 30,
                client_bytes: 70,
            }
        );
        assert_eq!(
            parse_ss("garbage\n\tdata_segs_out:x\n", 1),
            SegmentCounts::default()
        );
    }

    #[test]
    fn counts_real_sockets_when_ss_is_installed() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        client.set_nodelay(true).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.set_nodelay(true).unwrap();
        let Some(before) = data_segments(port) else {
            return; // no `ss` here
        };
        let mut buf = [0u8; 4];
        for _ in 0..5 {
            client.write_all(b"ping").unwrap();
            server.read_exact(&mut buf).unwrap();
            server.write_all(b"pong").unwrap();
            client.read_exact(&mut buf).unwrap();
        }
        let after = data_segments(port).unwrap();
        assert_eq!(after.server - before.server, 5);
        assert_eq!(after.client - before.client, 5);
        // `bytes_sent` is in kernels from 4.19 on; an older one leaves it out of `ss`.
        if after.client_bytes > 0 {
            assert_eq!(after.server_bytes - before.server_bytes, 20);
            assert_eq!(after.client_bytes - before.client_bytes, 20);
        }
    }
}
