//! tonic: a gRPC unary echo written by hand (no `protoc`): a
//! `#[derive(prost::Message)]` message, a tower `Service` routing one path to
//! `tonic::server::Grpc::unary` with `ProstCodec` — what `tonic-build` would
//! generate — and `tonic::client::Grpc::unary` over one `Channel` per connection.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::body::Body;
use tonic::codec::ProstCodec;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::codegen::{http, BoxFuture, Service};
use tonic::server::{NamedService, UnaryService};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

use crate::load::Caller;

const PATH: &str = "/brisk.peer.Echo/Echo";

/// The one message: the payload, as protobuf `bytes` field 1.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EchoMessage {
    #[prost(bytes = "bytes", tag = "1")]
    pub payload: Bytes,
}

struct EchoUnary;

impl UnaryService<EchoMessage> for EchoUnary {
    type Response = EchoMessage;
    type Future = std::future::Ready<Result<Response<EchoMessage>, Status>>;

    fn call(&mut self, request: Request<EchoMessage>) -> Self::Future {
        std::future::ready(Ok(Response::new(request.into_inner())))
    }
}

/// The gRPC service `brisk.peer.Echo`.
#[derive(Clone)]
struct EchoGrpc;

impl NamedService for EchoGrpc {
    const NAME: &'static str = "brisk.peer.Echo";
}

impl Service<http::Request<Body>> for EchoGrpc {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path() == PATH {
            Box::pin(async move {
                let mut grpc =
                    tonic::server::Grpc::new(ProstCodec::<EchoMessage, EchoMessage>::default());
                Ok(grpc.unary(EchoUnary, req).await)
            })
        } else {
            Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) })
        }
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
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let served = tonic::transport::Server::builder()
        .add_service(EchoGrpc)
        .serve_with_incoming_shutdown(incoming, async {
            let _ = stop.await;
        })
        .await;
    if let Err(e) = served {
        eprintln!("peer_compare: tonic server stopped: {e}");
    }
}

/// The tonic caller: a gRPC client over one channel (one HTTP/2 connection).
#[derive(Clone)]
pub struct TonicCaller(tonic::client::Grpc<Channel>);

impl Caller for TonicCaller {
    async fn call(&mut self, payload: Bytes) -> Result<Bytes, String> {
        self.0.ready().await.map_err(|e| e.to_string())?;
        let response: Response<EchoMessage> = self
            .0
            .unary(
                Request::new(EchoMessage { payload }),
                PathAndQuery::from_static(PATH),
                ProstCodec::default(),
            )
            .await
            .map_err(|e| e.to_string())?;
        Ok(response.into_inner().payload)
    }
}

/// Opens `conns` channels, each one HTTP/2 connection.
pub async fn connect(addr: SocketAddr, conns: usize) -> Result<Vec<TonicCaller>, String> {
    let mut callers = Vec::with_capacity(conns);
    for _ in 0..conns {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| e.to_string())?
            .tcp_nodelay(true)
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        callers.push(TonicCaller(tonic::client::Grpc::new(channel)));
    }
    Ok(callers)
}
