//! brisk: direct dispatch (or `pool` with the transfer queue for `brisk-pool`),
//! `fixed` connections = C, msgpack, async write mode.

use std::net::SocketAddr;
use std::sync::mpsc;

use brisk::{
    async_trait, Client, ConnectType, Dispatch, Payload, QueueKind, RpcError, SerializerKind,
    Server, ServerConfig, WriteMode,
};
use bytes::Bytes;
use tokio::sync::oneshot;

use crate::load::Caller;

brisk::service! {
    /// The echo every implementation serves.
    pub trait Echo {
        /// Returns `payload` (decoded without a copy: `Payload` slices the frame).
        async fn echo(payload: Payload) -> Payload;
    }
}

struct EchoImpl;

#[async_trait]
impl Echo for EchoImpl {
    async fn echo(&self, payload: Payload) -> Result<Payload, RpcError> {
        Ok(payload)
    }
}

/// Serves until `stop` fires; reports the bound address on `ready`.
pub async fn serve(
    stop: oneshot::Receiver<()>,
    ready: mpsc::Sender<Result<SocketAddr, String>>,
    dispatch: Dispatch,
    pool_max_threads: Option<usize>,
) {
    let mut config = ServerConfig::default()
        .with_addr("127.0.0.1:0")
        .with_dispatch(dispatch);
    config.pool.queue = QueueKind::Transfer;
    if let Some(max) = pool_max_threads {
        config.pool.max_threads = max;
        config.pool.core_threads = config.pool.core_threads.min(max);
    }
    match Server::builder()
        .config(config)
        .service(EchoServer::new(EchoImpl))
        .start()
        .await
    {
        Ok(server) => {
            let _ = ready.send(Ok(server.local_addr()));
            let _ = stop.await;
            // Dropping the handle closes every connection at once.
            drop(server);
        }
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
        }
    }
}

/// The brisk caller: one `Client` with `conns` fixed connections, shared by every task.
#[derive(Clone)]
pub struct BriskCaller(EchoClient);

impl Caller for BriskCaller {
    async fn call(&mut self, payload: Bytes) -> Result<Bytes, String> {
        self.0
            .echo(Payload(payload))
            .await
            .map(Payload::into_bytes)
            .map_err(|e| e.to_string())
    }
}

/// One client whose `conns` fixed connections are picked round-robin, calls made
/// together sharing one write (the default `coalesce_calls`).
pub async fn connect(addr: SocketAddr, conns: usize) -> Result<Vec<BriskCaller>, String> {
    let client = Client::builder()
        .addr(addr.to_string())
        .connect_type(ConnectType::Fixed)
        .connections(conns)
        .write_mode(WriteMode::Async)
        .serializer(SerializerKind::MsgPack)
        .build()
        .await
        .map_err(|e| e.to_string())?;
    Ok(vec![BriskCaller(EchoClient::new(client))])
}
