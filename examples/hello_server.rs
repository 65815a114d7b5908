//! A brisk server in a dozen lines: `cargo run --example hello_server`.
//! Stops gracefully on Ctrl-C or SIGTERM (`ServerHandle::shutdown_on_signals`).

#[path = "support/hello.rs"]
mod hello;

use brisk::{Context, RpcError, Server, Status};
use hello::{Hello, HelloServer};

struct Greeter;

impl Hello for Greeter {
    async fn greet(&self, _cx: &Context, name: String) -> Result<String, Status> {
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
        "hello_server listening on {} (Ctrl-C or SIGTERM to stop)",
        server.local_addr()
    );
    let report = server.shutdown_on_signals().await;
    println!(
        "hello_server stopped ({} in {:?})",
        if report.drained {
            "every call answered"
        } else {
            "grace period over"
        },
        report.elapsed
    );
    Ok(())
}
