//! A two-hop service for the tracing tests: `Relay.relay(a, b)` answers
//! `Calc.add(a, b)`, called from its handler on behalf of its own call
//! (`with_context`), so a trace has a nested hop.
#![allow(dead_code)]

use brisk::{Client, Context, Dispatch, Server, ServerHandle, Status};

use crate::common::{server_config, CalcClient, CalcImpl, CalcServer};

#[brisk::service]
pub trait Relay {
    async fn relay(&self, cx: &Context, a: i64, b: i64) -> Result<i64, Status>;
    /// `0..n`, as a server stream.
    async fn count(
        &self,
        cx: &Context,
        n: u64,
    ) -> Result<impl futures::Stream<Item = Result<u64, Status>> + Send, Status>;
}

pub struct RelayImpl {
    pub calc: CalcClient,
}

impl Relay for RelayImpl {
    async fn relay(&self, cx: &Context, a: i64, b: i64) -> Result<i64, Status> {
        let sum = self.calc.with_context(cx).add(a, b).await?;
        Ok(sum)
    }

    async fn count(
        &self,
        _cx: &Context,
        n: u64,
    ) -> Result<impl futures::Stream<Item = Result<u64, Status>> + Send, Status> {
        Ok(futures::stream::iter((0..n).map(Ok)))
    }
}

/// A server of `Calc` and `Relay` (whose nested calls go back to the same
/// server), and a client of it.
pub async fn start(dispatch: Dispatch) -> (ServerHandle, RelayClient) {
    let config = server_config(dispatch, brisk::QueueKind::Transfer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calc = CalcClient::new(
        Client::builder()
            .addr(addr)
            .lazy_connect(true)
            .build()
            .await
            .unwrap(),
    );
    let server = Server::builder()
        .config(config)
        .listener(listener)
        .service(CalcServer::new(std::sync::Arc::new(CalcImpl::default())))
        .service(RelayServer::new(RelayImpl { calc }))
        .start()
        .await
        .unwrap();
    let client = RelayClient::new(Client::builder().addr(addr).build().await.unwrap());
    (server, client)
}
