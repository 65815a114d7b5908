//! Calls `hello_server`: `cargo run --example hello_client -- [name]`.

#[path = "support/hello.rs"]
mod hello;

use std::time::Duration;

use brisk::{CallOptions, Client, RpcError};
use hello::HelloClient;

#[tokio::main]
async fn main() -> Result<(), RpcError> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "brisk".into());
    let client = HelloClient::new(Client::builder().addr("127.0.0.1:9000").build().await?);

    println!("{}", client.greet(name.clone()).await?);

    // Per-call options: a tighter timeout and some metadata.
    let quick = client.with_options(
        CallOptions::timeout(Duration::from_millis(200)).with_metadata("caller", "hello_client"),
    );
    println!("{}", quick.greet(name).await?);
    Ok(())
}
