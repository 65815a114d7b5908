//! Streaming calls, all three kinds, in one process: a server stream
//! (`watch`), a client stream (`record`) and a bidirectional one (`chat`).
//!
//! ```text
//! cargo run --example stream_watch
//! ```
//!
//! A server stream's handler returns `impl Stream`; a client stream's takes
//! a `Streaming<T>` as its last argument; the typed client returns a
//! `Streaming<T>` for the server's items and takes any `Stream` for its own.
//! Each flow is credit-controlled (`stream_window` items in flight), so a
//! slow reader holds its producer back instead of filling memory.

use std::time::Duration;

use brisk::{Client, Context, RpcError, Server, Status, Stream, Streaming};
use futures::StreamExt;

/// A ticker of prices.
#[brisk::service]
pub trait Prices {
    /// `count` prices of `symbol`, one every `every_ms`.
    async fn watch(
        &self,
        cx: &Context,
        symbol: String,
        count: u32,
        every_ms: u64,
    ) -> Result<impl Stream<Item = Result<f64, Status>> + Send, Status>;
    /// Records the caller's trades; answers how many and their total.
    async fn record(&self, cx: &Context, trades: Streaming<f64>) -> Result<(u32, f64), Status>;
    /// Answers each question as it comes.
    async fn chat(
        &self,
        cx: &Context,
        questions: Streaming<String>,
    ) -> Result<impl Stream<Item = Result<String, Status>> + Send, Status>;
}

struct Ticker;

impl Prices for Ticker {
    async fn watch(
        &self,
        _cx: &Context,
        symbol: String,
        count: u32,
        every_ms: u64,
    ) -> Result<impl Stream<Item = Result<f64, Status>> + Send, Status> {
        if symbol != "BRSK" {
            return Err(Status::new(
                brisk::Code::NotFound,
                format!("no symbol {symbol}"),
            ));
        }
        let ticks = ticks_every(Duration::from_millis(every_ms));
        Ok(ticks
            .take(count as usize)
            .enumerate()
            .map(|(i, ())| Ok(100.0 + i as f64 * 0.25)))
    }

    async fn record(
        &self,
        _cx: &Context,
        mut trades: Streaming<f64>,
    ) -> Result<(u32, f64), Status> {
        let (mut n, mut total) = (0, 0.0);
        while let Some(trade) = trades.message().await? {
            n += 1;
            total += trade;
        }
        Ok((n, total))
    }

    async fn chat(
        &self,
        _cx: &Context,
        questions: Streaming<String>,
    ) -> Result<impl Stream<Item = Result<String, Status>> + Send, Status> {
        Ok(questions.map(|q| q.map(|q| format!("you asked: {q}"))))
    }
}

/// A tick every `every` (a small stand-in for `tokio_stream::wrappers::IntervalStream`).
fn ticks_every(every: Duration) -> impl Stream<Item = ()> + Send {
    futures::stream::unfold(tokio::time::interval(every), |mut interval| async move {
        interval.tick().await;
        Some(((), interval))
    })
}

#[tokio::main]
async fn main() -> Result<(), RpcError> {
    let server = Server::builder()
        .addr("127.0.0.1:0")
        .service(PricesServer::new(Ticker))
        .start()
        .await?;
    let prices = PricesClient::new(
        Client::builder()
            .addr(server.local_addr().to_string())
            .build()
            .await?,
    );

    // Server stream: items as they come, then the end.
    let mut ticks = prices.watch("BRSK".into(), 5, 20).await?;
    while let Some(price) = ticks
        .message()
        .await
        .map_err(|s| s.into_error("Prices", "watch"))?
    {
        println!("watch: BRSK at {price}");
    }
    // An error before the first item ends the stream with that status.
    let mut none = prices.watch("NOPE".into(), 5, 20).await?;
    if let Err(status) = none.message().await {
        println!("watch: {} ({})", status.message(), status.code().name());
    }

    // Client stream: any `Stream` of items; one answer.
    let (n, total) = prices
        .record(futures::stream::iter([100.5, 99.75, 101.0]))
        .await?;
    println!("record: {n} trades, {total} in all");

    // Bidirectional: answers arrive while questions are still being sent.
    let questions = futures::stream::iter(["price?", "volume?"].map(String::from));
    let mut answers = prices.chat(questions).await?;
    while let Some(answer) = answers.next().await {
        println!(
            "chat: {}",
            answer.map_err(|s| s.into_error("Prices", "chat"))?
        );
    }

    server.shutdown().await;
    Ok(())
}
