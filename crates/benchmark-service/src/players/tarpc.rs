//! PLACEHOLDER: the tarpc player is being written on its own branch; this file is replaced whole.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;

use super::{CallError, Reply};
use crate::scenario::Scenario;
use crate::store::MessageStore;

/// What the suite sets for tarpc.
pub const SETTINGS: &str = "not built yet";

/// A connected tarpc client.
#[derive(Clone)]
pub struct Client;

impl Client {
    /// Connects `connections` connections to `addr`.
    pub async fn connect(
        _addr: SocketAddr,
        _connections: usize,
        _timeout: Duration,
    ) -> Result<Client, CallError> {
        Err(CallError::new("the tarpc player is not built yet"))
    }

    /// One call.
    pub async fn call(
        &self,
        _caller: usize,
        _scenario: Scenario,
        _key: i64,
        _payload: &Bytes,
    ) -> Result<Reply, CallError> {
        Err(CallError::new("the tarpc player is not built yet"))
    }
}

/// Serves tarpc's benchmark service on `listener`.
pub async fn serve(
    _listener: tokio::net::TcpListener,
    _store: MessageStore,
) -> std::io::Result<()> {
    Err(std::io::Error::other("the tarpc player is not built yet"))
}
