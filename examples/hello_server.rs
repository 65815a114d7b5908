//! A brisk server in a dozen lines: `cargo run --example hello_server`.

#[path = "support/hello.rs"]
mod hello;

use brisk::{async_trait, RpcError, Server};
use hello::{Hello, HelloServer};

struct Greeter;

#[async_trait]
impl Hello for Greeter {
    async fn greet(&self, name: String) -> Result<String, RpcError> {
        Ok(format!("Hello, {name}!"))
    }
}

#[tokio::main]
async fn main() -> Result<(), RpcError> {
    let server = Server::builder()
        .addr("127.0.0.1:9000")
        .service(HelloServer::new(Greeter))
        .start()
        .await?;
    println!(
        "hello_server listening on {} (Ctrl-C to stop)",
        server.local_addr()
    );
    let _ = tokio::signal::ctrl_c().await;
    server.shutdown().await;
    Ok(())
}
