//! One trace across two hops, exported to stdout through OpenTelemetry.
//!
//! ```text
//! cargo run --example traced_calls --features otel
//! ```
//!
//! `Front.quote` calls `Prices.price` from its handler, on behalf of its own
//! call (`with_context`). With `brisk::otel::layer` in the subscriber, the
//! client span of `quote`, its server span, the nested client span of `price`
//! and its server span are printed as one trace: same trace id, each the
//! parent of the next (`traceparent` crosses the wire in call metadata).

use brisk::{Client, Context, Server, Status};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Prices of items.
#[brisk::service]
pub trait Prices {
    /// The price of `item`, in cents.
    async fn price(&self, cx: &Context, item: String) -> Result<u64, Status>;
}

/// The shop's front: quotes totals.
#[brisk::service]
pub trait Front {
    /// `count` × the price of `item`.
    async fn quote(&self, cx: &Context, item: String, count: u64) -> Result<u64, Status>;
}

struct PriceList;

impl Prices for PriceList {
    async fn price(&self, _cx: &Context, item: String) -> Result<u64, Status> {
        tracing::info!(%item, "looking up the price");
        Ok(item.len() as u64 * 100)
    }
}

struct Shop {
    prices: PricesClient,
}

impl Front for Shop {
    async fn quote(&self, cx: &Context, item: String, count: u64) -> Result<u64, Status> {
        let each = self.prices.with_context(cx).price(item).await?;
        Ok(each * count)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let provider = brisk::otel::stdout_provider("traced-calls");
    tracing_subscriber::registry()
        .with(brisk::otel::layer(&provider))
        .with(tracing_subscriber::EnvFilter::new(
            "info,brisk=debug,rpc_client=debug,rpc_server=debug",
        ))
        .init();

    let prices_server = Server::builder()
        .addr("127.0.0.1:0")
        .service(PricesServer::new(PriceList))
        .start()
        .await?;
    let prices = PricesClient::new(
        Client::builder()
            .addr(prices_server.local_addr())
            .build()
            .await?,
    );
    let front_server = Server::builder()
        .addr("127.0.0.1:0")
        .service(FrontServer::new(Shop { prices }))
        .start()
        .await?;
    let front = FrontClient::new(
        Client::builder()
            .addr(front_server.local_addr())
            .build()
            .await?,
    );

    let total = front
        .quote("teapot".into(), 3)
        .instrument(tracing::info_span!("checkout"))
        .await?;
    println!("3 teapots: {total} cents");

    front_server.shutdown().await;
    prices_server.shutdown().await;
    provider.shutdown()?;
    Ok(())
}
