//! A TLS connection's way in: the handshake, bounded by a timeout and
//! given up at a forced stop or an eviction, then the same serving loop as
//! a plain connection's ([`serve_halves`]) over the session's halves.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tracing::{debug, warn};

use super::serve_halves;
use crate::admission::Ticket;
use crate::ctx::ServerCtx;
use crate::listener::{Accepted, Peer};

/// How long a client gets to complete the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves a TLS connection, over TCP or Unix: handshake (bounded by a
/// timeout; a failure closes only this connection), then the same loop over
/// `tokio::io::split` halves. A connection evicted during its handshake is
/// dropped (it cannot be told why before the handshake).
pub(crate) async fn serve_tls_connection(
    accepted: Accepted,
    ctx: Arc<ServerCtx>,
    acceptor: rpc_transport::tls::TlsAcceptor,
    ticket: Ticket,
) {
    let peer = accepted.peer();
    match accepted {
        Accepted::Tcp(stream, _) => {
            if let Err(e) = stream.set_nodelay(ctx.config.transport.nodelay) {
                debug!(peer = %peer.label, error = %e, "could not set TCP_NODELAY");
            }
            serve_over_tls(stream, peer, ctx, acceptor, ticket).await
        }
        Accepted::Unix(stream, _) => serve_over_tls(stream, peer, ctx, acceptor, ticket).await,
    }
}

async fn serve_over_tls<S>(
    stream: S,
    peer: Peer,
    ctx: Arc<ServerCtx>,
    acceptor: rpc_transport::tls::TlsAcceptor,
    ticket: Ticket,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let label = peer.label.clone();
    let handshake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream, &label));
    let tls_stream = tokio::select! {
        r = handshake => match r {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                warn!(peer = %label, error = %e, "closing connection");
                return;
            }
            Err(_) => {
                warn!(peer = %label, timeout = ?TLS_HANDSHAKE_TIMEOUT, "TLS handshake timed out: connection closed");
                return;
            }
        },
        _ = ctx.stop.forced() => return,
        _ = ticket.eviction().fired() => {
            warn!(peer = %label, "evicted during its TLS handshake: connection closed");
            return;
        }
    };
    let (read_half, write_half) = tokio::io::split(tls_stream);
    serve_halves(read_half, write_half, peer, ctx, ticket).await
}
