//! tarpc: its serde transport over TCP (length-delimited frames, bincode), one
//! transport per connection, requests executed the canonical way (a task each).

use std::net::SocketAddr;
use std::sync::mpsc;

use bytes::Bytes;
use futures::StreamExt;
use tarpc::context::Context;
use tarpc::server::{BaseChannel, Channel};
use tarpc::tokio_serde::formats::Bincode;
use tarpc::tokio_util::codec::length_delimited::LengthDelimitedCodec;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::load::Caller;

/// The echo every implementation serves.
#[tarpc::service]
pub trait EchoRpc {
    /// Returns `payload`.
    async fn echo(payload: Bytes) -> Bytes;
}

#[derive(Clone)]
struct EchoImpl;

impl EchoRpc for EchoImpl {
    async fn echo(self, _: Context, payload: Bytes) -> Bytes {
        payload
    }
}

/// Serves until `stop` fires; reports the bound address on `ready`.
pub async fn serve(stop: oneshot::Receiver<()>, ready: mpsc::Sender<Result<SocketAddr, String>>) {
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return;
        }
    };
    let _ = ready.send(listener.local_addr().map_err(|e| e.to_string()));
    let accept = async {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let framed = LengthDelimitedCodec::builder().new_framed(stream);
            let transport = tarpc::serde_transport::new(framed, Bincode::default());
            let requests = BaseChannel::with_defaults(transport)
                .execute(EchoImpl.serve())
                .for_each(|response| async move {
                    tokio::spawn(response);
                });
            tokio::spawn(requests);
        }
    };
    tokio::select! {
        _ = stop => {}
        _ = accept => {}
    }
}

/// The tarpc caller: a client of one transport.
#[derive(Clone)]
pub struct TarpcCaller(EchoRpcClient);

impl Caller for TarpcCaller {
    async fn call(&mut self, payload: Bytes) -> Result<Bytes, String> {
        self.0
            .echo(tarpc::context::current(), payload)
            .await
            .map_err(|e| e.to_string())
    }
}

/// Opens `conns` transports, each with its own spawned client dispatch task.
pub async fn connect(addr: SocketAddr, conns: usize) -> Result<Vec<TarpcCaller>, String> {
    let mut callers = Vec::with_capacity(conns);
    for _ in 0..conns {
        let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let framed = LengthDelimitedCodec::builder().new_framed(stream);
        let transport = tarpc::serde_transport::new(framed, Bincode::default());
        let client = EchoRpcClient::new(tarpc::client::Config::default(), transport).spawn();
        callers.push(TarpcCaller(client));
    }
    Ok(callers)
}
