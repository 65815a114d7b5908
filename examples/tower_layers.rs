//! tower layers on both sides of a call, in one process.
//!
//! ```text
//! cargo run --example tower_layers
//! ```
//!
//! The server puts tower's load shedding over a concurrency limit and a
//! timeout around its handlers (`ServerBuilder::layer`); the client is itself
//! a `tower::Service` (the generic call, `RpcRequest` in, `RpcResponse` out),
//! wrapped in a client-side timeout. A burst beyond the server's limit is
//! answered `ServerBusy` at once; a handler slower than the server's timeout
//! is answered `DeadlineExceeded`.

use std::time::Duration;

use brisk::codec::BodyCodec;
use brisk::{Client, Code, Context, RpcRequest, SerializerKind, Server, Status};
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

/// Waits on command.
#[brisk::service]
pub trait Sleeper {
    /// Sleeps `ms` milliseconds, then answers them.
    async fn sleep(&self, cx: &Context, ms: u64) -> Result<u64, Status>;
}

struct Napper;

impl Sleeper for Napper {
    async fn sleep(&self, _cx: &Context, ms: u64) -> Result<u64, Status> {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(ms)
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let server = Server::builder()
        .addr("127.0.0.1:0")
        .service(SleeperServer::new(Napper))
        // Four calls in handlers at most; past that, `ServerBusy` at once.
        .layer(ServiceBuilder::new().load_shed().concurrency_limit(4))
        // No handler runs longer than 300 ms.
        .layer(tower::timeout::TimeoutLayer::new(Duration::from_millis(
            300,
        )))
        .start()
        .await?;
    let client = Client::builder().addr(server.local_addr()).build().await?;

    // The client as a tower service, under a layer of its own.
    let mut generic = ServiceBuilder::new()
        .timeout(Duration::from_secs(2))
        .service(client.clone());
    let body = SerializerKind::MsgPack.encode_body(&(10u64,))?;
    let request = RpcRequest::new("Sleeper", "sleep", SerializerKind::MsgPack, body);
    let answer = generic.ready().await?.call(request).await?;
    let ms: u64 = SerializerKind::MsgPack.decode_bytes(&answer.body)?;
    println!("generic call through a client timeout layer: slept {ms} ms");

    // A burst of 10 calls at once against the server's limit of 4.
    let typed = SleeperClient::new(client);
    let burst: Vec<_> = (0..10)
        .map(|_| {
            let typed = typed.clone();
            tokio::spawn(async move { typed.sleep(100).await })
        })
        .collect();
    let (mut served, mut shed) = (0, 0);
    for call in burst {
        match call.await? {
            Ok(_) => served += 1,
            Err(e) if e.code() == Code::ServerBusy => shed += 1,
            Err(e) => return Err(e.into()),
        }
    }
    println!("burst of 10 against a limit of 4: {served} served, {shed} shed (ServerBusy)");

    // Slower than the server's timeout layer.
    match typed.sleep(1_000).await {
        Err(e) if e.code() == Code::DeadlineExceeded => {
            println!("a 1 s call under the server's 300 ms timeout: {e}")
        }
        other => return Err(format!("expected DeadlineExceeded, got {other:?}").into()),
    }
    server.shutdown().await;
    Ok(())
}
