//! What a server accepts connections on: a TCP listener, or a Unix domain
//! socket (`addr = "unix:/path/to.sock"`), and the connections they give.
//!
//! # Invariants
//!
//! - The server removes its Unix socket file when its listener goes (the
//!   accept loop ends: shutdown, or the handle dropped), and only the file it
//!   created: binding refuses a path that exists (see rpc-transport's
//!   `addr::bind_unix`), and a file put at the path since (another server's,
//!   after someone removed ours) is left alone.
//! - A Unix connection has no peer address: its handler's `cx.peer()` is
//!   `None`, and `max_connections_per_ip` does not count it
//!   (`max_connections` does). Its log lines name the server's socket.
//!
//! Everything after the accept is the same for both: the halves of either
//! stream go to the same connection loop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rpc_core::RpcError;
use rpc_transport::addr::{bind_unix, Address, ListenAddr};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// A bound listener.
pub(crate) enum Listener {
    /// TCP: bound by the server, or given by the caller.
    Tcp(TcpListener),
    /// A Unix socket the server created.
    Unix(UnixSocket),
}

/// A Unix socket listener that removes its file when dropped.
pub(crate) struct UnixSocket {
    listener: UnixListener,
    path: PathBuf,
    /// The bound file, made absolute (the process may change directory) with
    /// its device and inode: the file removed at the end must be this one,
    /// not one another server bound at the same path since.
    bound: Option<(PathBuf, u64, u64)>,
    /// The socket as a client address, for log lines.
    label: Arc<str>,
}

impl UnixSocket {
    fn new(listener: UnixListener, path: &Path, label: &str) -> UnixSocket {
        use std::os::unix::fs::MetadataExt;
        let bound = std::path::absolute(path).ok().and_then(|abs| {
            let meta = std::fs::symlink_metadata(&abs).ok()?;
            Some((abs, meta.dev(), meta.ino()))
        });
        UnixSocket {
            listener,
            path: path.to_owned(),
            bound,
            label: label.into(),
        }
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        let Some((abs, dev, ino)) = &self.bound else {
            return;
        };
        let ours = std::fs::symlink_metadata(abs).is_ok_and(|m| m.dev() == *dev && m.ino() == *ino);
        if !ours {
            tracing::debug!(path = %abs.display(), "socket file replaced since bound: left alone");
            return;
        }
        if let Err(e) = std::fs::remove_file(abs) {
            tracing::debug!(path = %abs.display(), error = %e, "socket file not removed");
        }
    }
}

/// An accepted connection.
pub(crate) enum Accepted {
    /// A TCP connection and its peer's address.
    Tcp(TcpStream, SocketAddr),
    /// A Unix socket connection; `label` names the server's socket.
    Unix(UnixStream, Arc<str>),
}

/// Who is on the other end of a connection, as a call's context and the
/// logs see it.
#[derive(Clone)]
pub(crate) struct Peer {
    /// Its address (TCP only).
    pub addr: Option<SocketAddr>,
    /// How log lines name it.
    pub label: Arc<str>,
}

impl Accepted {
    /// The peer of this connection.
    pub fn peer(&self) -> Peer {
        match self {
            Accepted::Tcp(_, addr) => Peer {
                addr: Some(*addr),
                label: addr.to_string().into(),
            },
            Accepted::Unix(_, label) => Peer {
                addr: None,
                label: label.clone(),
            },
        }
    }
}

/// Connections the kernel completes and queues for the accept loop before it
/// drops new ones. `TcpListener::bind` asks for 128 (std's value; a Unix
/// listener gets the system's maximum from mio already); a burst of
/// connects larger than that — a client opening its 1000 connections while
/// the runtime's threads are busy — then loses SYNs, and each lost one waits
/// for the client's retransmission, a second later, past a 500 ms connect
/// timeout. Linux caps the value at `net.core.somaxconn` (4096 by default).
const ACCEPT_BACKLOG: u32 = 1024;

/// Binds a TCP listener to `host_port` (each address it resolves to in turn,
/// as `TcpListener::bind` does) with [`ACCEPT_BACKLOG`].
pub(crate) async fn bind_tcp(host_port: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(host_port).await? {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        // As `TcpListener::bind` does on Unix: a restarted server may bind
        // while its old connections linger in TIME_WAIT.
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        match socket
            .bind(addr)
            .and_then(|()| socket.listen(ACCEPT_BACKLOG))
        {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{host_port} resolves to no address"),
        )
    }))
}

impl Listener {
    /// Binds `addr`: a Unix socket for `unix:/path`, TCP otherwise.
    pub async fn bind(addr: &str) -> Result<Listener, RpcError> {
        match Address::parse(addr) {
            Address::Unix(path) => Ok(Listener::Unix(UnixSocket::new(
                bind_unix(path)?,
                path,
                addr,
            ))),
            Address::Tcp(host_port) => {
                bind_tcp(host_port)
                    .await
                    .map(Listener::Tcp)
                    .map_err(|e| RpcError::Io {
                        context: format!("binding the server to {addr}"),
                        reason: format!("{e} (is another process using the port?)"),
                        source: Some(rpc_core::Cause::new(e)),
                    })
            }
        }
    }

    /// Where it listens.
    pub fn local_addr(&self) -> Result<ListenAddr, RpcError> {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map(ListenAddr::Tcp)
                .map_err(|e| RpcError::io("reading the bound address", e)),
            Listener::Unix(u) => Ok(ListenAddr::Unix(u.path.clone())),
        }
    }

    /// The next connection.
    pub async fn accept(&self) -> std::io::Result<Accepted> {
        match self {
            Listener::Tcp(l) => l.accept().await.map(|(s, peer)| Accepted::Tcp(s, peer)),
            Listener::Unix(u) => u
                .listener
                .accept()
                .await
                .map(|(s, _)| Accepted::Unix(s, u.label.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A burst of connects beyond std's backlog of 128, with nobody
    /// accepting yet, completes at once: none waits for a SYN retransmission.
    #[tokio::test]
    async fn a_burst_of_connects_fits_in_the_accept_queue() {
        let listener = bind_tcp("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connects = (0..300)
            .map(|_| tokio::time::timeout(Duration::from_millis(700), TcpStream::connect(addr)));
        let streams = futures::future::join_all(connects).await;
        let connected = streams.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
        assert_eq!(connected, 300, "connects that waited past 700 ms or failed");
        drop(listener);
    }

    /// The same for a Unix socket, whose listener mio (like std) binds
    /// with the system's maximum (`listen(fd, -1)`: `net.core.somaxconn`
    /// on Linux).
    #[tokio::test]
    async fn a_burst_of_unix_connects_fits_in_the_accept_queue() {
        let dir = std::env::temp_dir().join(format!("brisk-backlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("burst.sock");
        let _ = std::fs::remove_file(&path);
        let listener = Listener::bind(&format!("unix:{}", path.display()))
            .await
            .unwrap();
        let connects = (0..300)
            .map(|_| tokio::time::timeout(Duration::from_millis(700), UnixStream::connect(&path)));
        let streams = futures::future::join_all(connects).await;
        let connected = streams.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
        assert_eq!(connected, 300, "connects that waited past 700 ms or failed");
        drop(listener);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn an_address_that_resolves_to_nothing_or_is_taken_is_an_error() {
        let taken = bind_tcp("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let err = match Listener::bind(&addr).await {
            Err(e) => e.to_string(),
            Ok(_) => panic!("bound a port in use"),
        };
        assert!(err.contains("another process"), "{err}");
    }
}
