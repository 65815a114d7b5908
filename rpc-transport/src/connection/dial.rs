//! Dialing a client [`Connection`]: an address (`host:port` or
//! `unix:/path`) to a connected stream within the connect timeout, under
//! TLS when the client is configured for it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rpc_core::RpcError;
#[cfg(feature = "tls")]
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
#[cfg(feature = "tls")]
use tracing::debug;

use super::Connection;
use crate::addr::Address;
use crate::ClientTransport;

/// Opens a connection to `addr` (`host:port`, or `unix:/path` for a Unix
/// domain socket; see [`addr`](crate::addr)) within `client.connect_timeout`.
pub async fn connect(addr: &str, client: &ClientTransport) -> Result<Arc<Connection>, RpcError> {
    match Address::parse(addr) {
        Address::Tcp(host_port) => {
            let stream =
                within_connect_timeout(addr, client, TcpStream::connect(host_port)).await?;
            #[cfg(feature = "tls")]
            if let Some(tls) = &client.tls {
                if let Err(e) = stream.set_nodelay(client.shared.nodelay) {
                    debug!(%addr, error = %e, "could not set TCP_NODELAY");
                }
                return over_tls(stream, addr, tls, client).await;
            }
            Connection::from_stream(stream, client)
        }
        Address::Unix(path) => {
            let stream = within_connect_timeout(addr, client, connect_unix(path)).await?;
            #[cfg(feature = "tls")]
            if let Some(tls) = &client.tls {
                return over_tls(stream, addr, tls, client).await;
            }
            let (read_half, write_half) = stream.into_split();
            Ok(Connection::from_halves(
                read_half,
                write_half,
                addr.into(),
                client,
            ))
        }
    }
}

/// Connects to the Unix socket at `path`. A full accept queue fails a Unix
/// connect at once (`EAGAIN`) where TCP would wait for room, so that is
/// tried again after a short pause; the connect timeout bounds the tries.
async fn connect_unix(path: &std::path::Path) -> std::io::Result<UnixStream> {
    let mut pause = Duration::from_millis(1);
    loop {
        match UnixStream::connect(path).await {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

/// Awaits `connecting` within `client.connect_timeout`; a failure names `addr`.
async fn within_connect_timeout<S>(
    addr: &str,
    client: &ClientTransport,
    connecting: impl Future<Output = std::io::Result<S>>,
) -> Result<S, RpcError> {
    match tokio::time::timeout(client.connect_timeout, connecting).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(RpcError::Connect {
            addr: addr.to_owned(),
            reason: e.to_string(),
            source: Some(rpc_core::Cause::new(e)),
        }),
        Err(_) => Err(RpcError::ConnectTimeout {
            addr: addr.to_owned(),
            timeout: client.connect_timeout,
        }),
    }
}

/// The TLS handshake on a connected `stream`, then the connection over it.
#[cfg(feature = "tls")]
async fn over_tls<S>(
    stream: S,
    addr: &str,
    tls: &crate::tls::TlsConnector,
    client: &ClientTransport,
) -> Result<Arc<Connection>, RpcError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // One deadline for the handshake too: a peer that never answers it
    // (a plain TCP server, say) fails the connect instead of hanging it.
    let handshake = tokio::time::timeout(client.connect_timeout, tls.connect(stream, addr));
    let tls_stream = match handshake.await {
        Ok(r) => r?,
        Err(_) => {
            let reason = format!(
                "TLS handshake with {addr} failed: no answer within {:?} (is it a TLS server?)",
                client.connect_timeout
            );
            return Err(RpcError::Connect {
                addr: addr.to_owned(),
                reason,
                source: None,
            });
        }
    };
    let (read_half, write_half) = tokio::io::split(tls_stream);
    Ok(Connection::from_halves(
        read_half,
        write_half,
        addr.into(),
        client,
    ))
}
