//! [`Refusals`]: telling a connection the server will not serve why, then
//! closing it — without holding up the accept loop.
//!
//! A refused connection gets one response frame with request id
//! [`CONNECTION_REQUEST_ID`] whose status and body carry the error
//! (`TooManyConnections`), so the client fails its calls with that error
//! instead of a `ConnectionClosed` that looks like a crash. Then the write side
//! is shut down and the input read and discarded until the client closes too
//! (a lingering close: closing a socket with unread input makes the kernel
//! send a reset, which can destroy the frame before the client reads it).
//! Over TLS the handshake comes first, so the frame can be read at all.
//!
//! # Invariants
//!
//! - Each refusal runs in its own task, bounded in time by [`REFUSAL_TIMEOUT`]
//!   (handshake, write and linger together) and ended at once when the server
//!   is forced down.
//! - At most [`MAX_REFUSALS_IN_PROGRESS`] run at a time; beyond that a refused
//!   socket is just dropped, so a flood of connections cannot make the server
//!   hold more sockets than the limits allow plus this bound.
//! - Nothing read from a refused connection is acted on.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rpc_codec::{OutFrame, CONNECTION_REQUEST_ID};
use rpc_core::RpcError;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Semaphore;
use tracing::debug;

use crate::stop::StopState;

/// The longest one refusal may take, TLS handshake and linger included.
pub const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);

/// Refusals running at once; further refused sockets are dropped unanswered.
pub const MAX_REFUSALS_IN_PROGRESS: usize = 64;

/// Input a lingering refusal reads (and discards) before it gives up waiting
/// for the client to close.
const MAX_LINGER_BYTES: usize = 256 * 1024;

/// Where the accept loop sends connections it refuses.
pub(crate) struct Refusals {
    permits: Arc<Semaphore>,
    #[cfg(feature = "tls")]
    tls: Option<rpc_transport::tls::TlsAcceptor>,
}

impl Refusals {
    /// Refusals; with `tls`, refused connections are answered over TLS.
    pub fn new(#[cfg(feature = "tls")] tls: Option<rpc_transport::tls::TlsAcceptor>) -> Refusals {
        Refusals {
            permits: Arc::new(Semaphore::new(MAX_REFUSALS_IN_PROGRESS)),
            #[cfg(feature = "tls")]
            tls,
        }
    }

    /// Answers `stream` with `error` and closes it, in a task of its own
    /// (or drops it at once when too many refusals are in progress); the task
    /// ends at once when `stop` reaches [`Forced`](crate::stop::StopLevel::Forced).
    pub fn refuse<S>(&self, stream: S, peer: Arc<str>, error: RpcError, stop: &StopState)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            debug!(%peer, "too many refusals in progress: connection dropped unanswered");
            return;
        };
        let forced = stop.forced_owned();
        #[cfg(feature = "tls")]
        let tls = self.tls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let answer = async {
                #[cfg(feature = "tls")]
                if let Some(acceptor) = tls {
                    let tls_stream = acceptor
                        .accept(stream, &peer)
                        .await
                        .map_err(|e| e.to_string())?;
                    return answer_and_close(tls_stream, &error).await;
                }
                answer_and_close(stream, &error).await
            };
            tokio::select! {
                r = tokio::time::timeout(REFUSAL_TIMEOUT, answer) => match r {
                    Ok(Ok(())) => debug!(%peer, %error, "connection refused"),
                    Ok(Err(e)) => debug!(%peer, error = %e, "refusal not delivered"),
                    Err(_) => debug!(%peer, "refusal timed out"),
                },
                _ = forced => {}
            }
        });
    }
}

/// Writes the connection-level error frame, shuts the write side down and
/// lingers until the peer closes (at most [`MAX_LINGER_BYTES`] read).
pub(crate) async fn answer_and_close<S>(mut io: S, error: &RpcError) -> Result<(), String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut frame = BytesMut::new();
    // A connection-level frame names no serializer; its body is UTF-8.
    OutFrame::error(CONNECTION_REQUEST_ID, 0, error)
        .encode(&mut frame, usize::MAX)
        .map_err(|e| e.to_string())?;
    io.write_all(&frame)
        .await
        .map_err(|e| format!("write failed: {e}"))?;
    io.shutdown()
        .await
        .map_err(|e| format!("shutdown failed: {e}"))?;
    let mut sink = [0u8; 4096];
    let mut read = 0;
    while read < MAX_LINGER_BYTES {
        match io.read(&mut sink).await {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpc_codec::{Code, FrameCodec};
    use tokio_util::codec::Decoder;

    #[tokio::test]
    async fn a_refusal_is_one_connection_level_frame_then_end_of_stream() {
        let (server, mut client) = tokio::io::duplex(4096);
        let error = RpcError::TooManyConnections {
            limit: "max_connections_per_ip".into(),
            max: 3,
            evicted: false,
        };
        let refusing = tokio::spawn({
            let error = error.clone();
            async move { answer_and_close(server, &error).await }
        });
        // The client had already sent something: it is read and ignored.
        client
            .write_all(b"a request the server never runs")
            .await
            .unwrap();
        let mut received = Vec::new();
        client.read_to_end(&mut received).await.unwrap();
        drop(client);
        refusing.await.unwrap().unwrap();
        let mut buf = BytesMut::from(&received[..]);
        let frame = FrameCodec::default().decode(&mut buf).unwrap().unwrap();
        assert!(buf.is_empty(), "exactly one frame");
        assert_eq!(frame.header.request_id, CONNECTION_REQUEST_ID);
        assert_eq!(frame.code(), Code::TooManyConnections);
        assert_eq!(
            frame
                .error_status()
                .expect("an error status")
                .into_error("", ""),
            error
        );
    }
}
