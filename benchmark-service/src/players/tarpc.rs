//! The tarpc player: the benchmark service as a `#[tarpc::service]` trait, served and called
//! the way tarpc's own examples do — the serde transport (bincode) over TCP with the
//! length-delimited codec, one `BaseChannel` per accepted connection, each request executed
//! in its own task.
//!
//! tarpc has no connection-count setting: one client is one transport, one TCP connection. So
//! the client opens one tarpc client per connection the scene asks for and caller `i` uses
//! client `i % connections` — the way a tarpc user spreads load over several connections.
//! Every call carries a fresh `context::current()` whose deadline is now + the scene's timeout
//! (tarpc's per-call timeout); the rest is tarpc's defaults. Store errors travel as the
//! methods' `Result<Message, String>`, so a missing record is an answer, not a dropped
//! connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::tarpc::context::{self, Context};
use ::tarpc::server::{BaseChannel, Channel};
use ::tarpc::tokio_serde::formats::Bincode;
use ::tarpc::tokio_util::codec::length_delimited::LengthDelimitedCodec;
use bytes::Bytes;
use futures::StreamExt;
use tokio::net::{TcpListener, TcpStream};

use super::call::{CallError, Reply};
use crate::scenario::Scenario;
use crate::store::{Message, MessageStore};

/// What the suite sets for tarpc.
pub const SETTINGS: &str = "serde transport (bincode, length-delimited frames) over TCP with \
TCP_NODELAY, each request spawned; one tarpc client per connection (tarpc has no \
connection-count setting, so the scene's connections are that many clients, caller i using \
client i % connections); per-call deadline = now + the scene's timeout; tarpc defaults \
otherwise (client::Config, server::Config, 8 MiB frame limit)";

/// The benchmark service, as tarpc declares one.
#[::tarpc::service]
pub trait BenchmarkRpc {
    /// `nth`: nothing at all.
    async fn do_nothing();
    /// `cache`: one of the 10 records from the in-process cache.
    async fn get_message_from_cache(id: i64) -> Result<Message, String>;
    /// `file`: reads and parses `messages.json`, then finds the record.
    async fn get_message_from_file(id: i64) -> Result<Message, String>;
    /// `db`: `select … from message where id = ?` on the configured database.
    async fn get_message_from_db(id: i64) -> Result<Message, String>;
    /// `echo`: the same bytes back.
    async fn echo(data: Bytes) -> Bytes;
}

/// The implementation over a store. tarpc clones the server for every request, so the store
/// sits behind one `Arc` (a `MessageStore` clone would copy the file path).
#[derive(Clone)]
struct BenchmarkServer {
    store: Arc<MessageStore>,
}

impl BenchmarkRpc for BenchmarkServer {
    async fn do_nothing(self, _: Context) {}

    async fn get_message_from_cache(self, _: Context, id: i64) -> Result<Message, String> {
        self.store.cache.get(id).map_err(|e| e.to_string())
    }

    async fn get_message_from_file(self, _: Context, id: i64) -> Result<Message, String> {
        self.store.file.get(id).map_err(|e| e.to_string())
    }

    async fn get_message_from_db(self, _: Context, id: i64) -> Result<Message, String> {
        self.store.db.get(id).await.map_err(|e| e.to_string())
    }

    async fn echo(self, _: Context, data: Bytes) -> Bytes {
        data
    }
}

/// A connected tarpc client: one tarpc client (one TCP connection, its own dispatch task) per
/// connection; clones share them.
#[derive(Clone)]
pub struct Client {
    clients: Arc<[BenchmarkRpcClient]>,
    timeout: Duration,
}

impl Client {
    /// Opens `connections` (at least 1) tarpc clients to `addr`; each call's deadline is now +
    /// `timeout` (which also bounds each connect).
    pub async fn connect(
        addr: SocketAddr,
        connections: usize,
        timeout: Duration,
    ) -> Result<Client, CallError> {
        let mut clients = Vec::with_capacity(connections.max(1));
        for _ in 0..connections.max(1) {
            let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
                .await
                .map_err(|_| CallError::new(format!("tarpc: connecting to {addr} timed out")))?
                .map_err(|e| CallError::new(format!("tarpc: cannot connect to {addr}: {e}")))?;
            stream
                .set_nodelay(true)
                .map_err(|e| CallError::new(format!("tarpc: TCP_NODELAY: {e}")))?;
            let framed = LengthDelimitedCodec::builder().new_framed(stream);
            let transport = ::tarpc::serde_transport::new(framed, Bincode::default());
            clients.push(
                BenchmarkRpcClient::new(::tarpc::client::Config::default(), transport).spawn(),
            );
        }
        Ok(Client {
            clients: clients.into(),
            timeout,
        })
    }

    /// One call of `scenario` on client `caller % connections`.
    pub async fn call(
        &self,
        caller: usize,
        scenario: Scenario,
        key: i64,
        payload: &Bytes,
    ) -> Result<Reply, CallError> {
        let client = &self.clients[caller % self.clients.len()];
        let mut ctx = context::current();
        ctx.deadline = Instant::now() + self.timeout;
        Ok(match scenario {
            Scenario::Nth => {
                client.do_nothing(ctx).await.map_err(rpc_error)?;
                Reply::Nothing
            }
            Scenario::Cache => message(client.get_message_from_cache(ctx, key).await)?,
            Scenario::File => message(client.get_message_from_file(ctx, key).await)?,
            Scenario::Db => message(client.get_message_from_db(ctx, key).await)?,
            Scenario::Echo => {
                Reply::Echo(client.echo(ctx, payload.clone()).await.map_err(rpc_error)?)
            }
            Scenario::Stream | Scenario::PingPong => {
                return Err(CallError::new(format!(
                    "tarpc has no streaming calls: {scenario} is brisk's and tonic's"
                )))
            }
        })
    }
}

fn rpc_error(e: ::tarpc::client::RpcError) -> CallError {
    CallError::new(e.to_string())
}

/// A record answer: the transport's error, the service's error, or the record.
fn message(
    answer: Result<Result<Message, String>, ::tarpc::client::RpcError>,
) -> Result<Reply, CallError> {
    match answer {
        Ok(Ok(m)) => Ok(Reply::Message(m)),
        Ok(Err(e)) => Err(CallError(e)),
        Err(e) => Err(rpc_error(e)),
    }
}

/// Serves the tarpc benchmark service on `listener`: a `BaseChannel` per connection, each
/// request in its own task. Runs until the process ends; a failed accept is logged and
/// skipped (after a short pause, so running out of descriptors does not spin).
pub async fn serve(listener: TcpListener, store: MessageStore) -> std::io::Result<()> {
    let server = BenchmarkServer {
        store: Arc::new(store),
    };
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("tarpc: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("tarpc: TCP_NODELAY on an accepted connection: {e}");
        }
        let framed = LengthDelimitedCodec::builder().new_framed(stream);
        let transport = ::tarpc::serde_transport::new(framed, Bincode::default());
        let requests = BaseChannel::with_defaults(transport)
            .execute(server.clone().serve())
            .for_each(|response| async move {
                tokio::spawn(response);
            });
        tokio::spawn(requests);
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{self, TestServer};
    use super::super::PlayerClient;
    use super::*;

    async fn setup(tag: &str) -> (TestServer, PlayerClient) {
        let server = test_support::start(tag, serve).await;
        let client = Client::connect(server.addr, 2, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(client.clients.len(), 2);
        (server, PlayerClient::Tarpc(client))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_scenario_answers() {
        let (_server, client) = setup("tarpc-every").await;
        test_support::check_every_scenario(&client).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unknown_id_is_an_error_and_the_client_goes_on() {
        let (_server, client) = setup("tarpc-unknown").await;
        test_support::check_unknown_id(&client).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streaming_scenarios_are_refused() {
        let (_server, client) = setup("tarpc-streams").await;
        test_support::check_no_streams(&client).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_all_succeed() {
        let (_server, client) = setup("tarpc-concurrent").await;
        test_support::check_concurrent(&client, &Scenario::UNARY).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connecting_to_nothing_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        assert!(Client::connect(addr, 1, Duration::from_secs(5))
            .await
            .is_err());
    }
}
