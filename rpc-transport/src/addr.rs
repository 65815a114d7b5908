//! Addresses: `host:port` for TCP, `unix:/path/to.sock` for a Unix domain
//! socket — the one place either side reads which one an address names.
//!
//! Both sides keep addresses as strings (configs, registries and balancers
//! pass them around as they are written); [`Address::parse`] only looks at
//! the prefix, so it never fails: what follows is checked by the connect or
//! the bind that uses it, which report it with the address as written.
//!
//! A Unix socket carries the same frames as TCP; it has no peer address (a
//! handler's `cx.peer()` is `None` on one) and no Nagle algorithm to turn
//! off. [`bind_unix`] refuses a path that exists rather than removing it:
//! the file may be another live server's socket, and taking it over would
//! cut that server off silently.

use std::fmt;
use std::path::{Path, PathBuf};

use rpc_core::{Cause, RpcError};
use tokio::net::UnixListener;

/// The prefix of a Unix socket address.
pub const UNIX_PREFIX: &str = "unix:";

/// What an address names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Address<'a> {
    /// A TCP `host:port`, as written.
    Tcp(&'a str),
    /// The path of a Unix domain socket.
    Unix(&'a Path),
}

impl<'a> Address<'a> {
    /// Reads `addr`: `unix:<path>` is a Unix socket, anything else TCP.
    ///
    /// ```
    /// use std::path::Path;
    /// use rpc_transport::addr::Address;
    ///
    /// assert_eq!(Address::parse("unix:/run/calc.sock"), Address::Unix(Path::new("/run/calc.sock")));
    /// assert_eq!(Address::parse("127.0.0.1:9000"), Address::Tcp("127.0.0.1:9000"));
    /// ```
    pub fn parse(addr: &'a str) -> Address<'a> {
        match addr.strip_prefix(UNIX_PREFIX) {
            Some(path) => Address::Unix(Path::new(path)),
            None => Address::Tcp(addr),
        }
    }
}

/// Where a server listens, as clients should be given it: its `Display` is
/// an address a client connects to (`127.0.0.1:9000`, `unix:/run/calc.sock`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// A TCP listener's bound address.
    Tcp(std::net::SocketAddr),
    /// A Unix socket's path.
    Unix(PathBuf),
}

impl ListenAddr {
    /// The TCP address, when it is one.
    pub fn tcp(&self) -> Option<std::net::SocketAddr> {
        match self {
            ListenAddr::Tcp(addr) => Some(*addr),
            ListenAddr::Unix(_) => None,
        }
    }
}

impl std::str::FromStr for ListenAddr {
    type Err = std::net::AddrParseError;

    /// Reads what [`Display`](fmt::Display) wrote: `unix:<path>`, or an
    /// `ip:port`.
    fn from_str(s: &str) -> Result<ListenAddr, Self::Err> {
        match Address::parse(s) {
            Address::Unix(path) => Ok(ListenAddr::Unix(path.to_owned())),
            Address::Tcp(addr) => addr.parse().map(ListenAddr::Tcp),
        }
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => write!(f, "{addr}"),
            ListenAddr::Unix(path) => write!(f, "{UNIX_PREFIX}{}", path.display()),
        }
    }
}

/// Binds a Unix socket at `path`. A path that exists already (a live
/// server's socket, or one left by a crash) or that cannot be created (its
/// directory missing or not writable) is a clear error naming it.
pub fn bind_unix(path: &Path) -> Result<UnixListener, RpcError> {
    let shown = path.display();
    if path.as_os_str().is_empty() {
        return Err(RpcError::config(
            "addr",
            "`unix:` needs a socket path after it, e.g. unix:/run/brisk.sock",
        ));
    }
    // sun_path holds 108 bytes with its terminating NUL on Linux.
    if path.as_os_str().len() > 107 {
        return Err(RpcError::config(
            "addr",
            format!(
                "the socket path {shown} is {} bytes long; Unix sockets take at most 107: \
                 choose a shorter one",
                path.as_os_str().len()
            ),
        ));
    }
    if path.symlink_metadata().is_ok() {
        return Err(RpcError::config(
            "addr",
            format!(
                "the socket path {shown} exists already: another server may be using it; \
                 remove it if it is left over, or choose another path"
            ),
        ));
    }
    UnixListener::bind(path).map_err(|e| RpcError::Io {
        context: format!("binding the server to the Unix socket {shown}"),
        reason: format!("{e} (does its directory exist, and may this process write there?)"),
        source: Some(Cause::new(e)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_prefix_decides() {
        assert_eq!(Address::parse("unix:"), Address::Unix(Path::new("")));
        assert_eq!(
            Address::parse("unix:rel.sock"),
            Address::Unix(Path::new("rel.sock"))
        );
        assert_eq!(Address::parse("localhost:1"), Address::Tcp("localhost:1"));
        assert_eq!(Address::parse("[::1]:1"), Address::Tcp("[::1]:1"));
    }

    #[test]
    fn a_listen_addr_prints_as_a_client_address() {
        let unix = ListenAddr::Unix("/tmp/x.sock".into());
        assert_eq!(unix.to_string(), "unix:/tmp/x.sock");
        assert_eq!(
            Address::parse(&unix.to_string()),
            Address::Unix(Path::new("/tmp/x.sock"))
        );
        let tcp = ListenAddr::Tcp("127.0.0.1:9".parse().unwrap());
        assert_eq!(tcp.to_string(), "127.0.0.1:9");
        assert_eq!(tcp.tcp(), Some("127.0.0.1:9".parse().unwrap()));
        assert_eq!(unix.tcp(), None);
        for addr in [&unix, &tcp] {
            assert_eq!(&addr.to_string().parse::<ListenAddr>().unwrap(), addr);
        }
        assert!(
            "localhost:9".parse::<ListenAddr>().is_err(),
            "a name is not an address"
        );
    }

    #[tokio::test]
    async fn a_path_that_exists_or_cannot_be_created_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("brisk-addr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let taken = dir.join("taken.sock");
        std::fs::write(&taken, b"").unwrap();
        let err = bind_unix(&taken).unwrap_err();
        assert!(err.to_string().contains("exists already"), "{err}");
        assert!(err.to_string().contains("taken.sock"), "{err}");
        let err = bind_unix(&dir.join("no/such/dir/x.sock")).unwrap_err();
        assert!(
            err.to_string().contains("does its directory exist"),
            "{err}"
        );
        let long = dir.join("x".repeat(120));
        let err = bind_unix(&long).unwrap_err();
        assert!(err.to_string().contains("at most 107"), "{err}");
        let err = bind_unix(Path::new("")).unwrap_err();
        assert!(err.to_string().contains("needs a socket path"), "{err}");
        let fresh = dir.join("fresh.sock");
        let _listener = bind_unix(&fresh).expect("a new path binds");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
