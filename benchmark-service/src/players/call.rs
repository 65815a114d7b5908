//! The vocabulary between the load engine and the players: what a client is built from
//! ([`ClientSetup`]), what a call brought back ([`Reply`], checked the same way for every
//! player) and how a call failed ([`CallError`]). A leaf module, so that every player and the
//! dispatch in [`super`] can use it without depending on each other.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;

use crate::scenario::Scenario;
use crate::store::Message;

/// What a call brought back, for the engine to check.
#[derive(Debug)]
pub enum Reply {
    /// `nth` answered.
    Nothing,
    /// `cache`, `file` or `db` answered with a record.
    Message(Message),
    /// `echo` answered with these bytes.
    Echo(Bytes),
}

impl Reply {
    /// Checks the reply against the call that produced it: the record with the asked id, or the
    /// echoed bytes of the asked length.
    pub fn check(&self, scenario: Scenario, key: i64, payload: &Bytes) -> Result<(), CallError> {
        match (scenario, self) {
            (Scenario::Nth, Reply::Nothing) => Ok(()),
            (Scenario::Cache | Scenario::File | Scenario::Db, Reply::Message(m)) => {
                if m.id == key {
                    Ok(())
                } else {
                    Err(CallError::new(format!(
                        "asked for record {key}, got record {}",
                        m.id
                    )))
                }
            }
            (Scenario::Echo, Reply::Echo(back)) => {
                if back.len() == payload.len() {
                    Ok(())
                } else {
                    Err(CallError::new(format!(
                        "echo returned {} bytes for {}",
                        back.len(),
                        payload.len()
                    )))
                }
            }
            (scenario, reply) => Err(CallError::new(format!(
                "a {scenario} call answered with {reply:?}"
            ))),
        }
    }
}

/// A failed call, described for the error tally (the framework's own error, as text: the
/// engine only counts and reports failures, it does not act on their kind).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallError(pub String);

impl CallError {
    /// A failure with this description.
    pub fn new(text: impl Into<String>) -> CallError {
        CallError(text.into())
    }
}

impl From<::brisk::RpcError> for CallError {
    fn from(e: ::brisk::RpcError) -> Self {
        CallError(e.to_string())
    }
}

/// What a player's client is built from.
#[derive(Debug, Clone)]
pub struct ClientSetup<'a> {
    /// The server to call.
    pub addr: &'a str,
    /// Connections the scene asks for (brisk: the fixed count or the pool's maximum; peers
    /// with one connection per client: that many clients).
    pub connections: u32,
    /// The most calls the scene keeps in flight at once (callers × async depth): a player
    /// whose pool dials per call in flight dials that many up front, as the others connect
    /// theirs before the first call.
    pub calls_in_flight: usize,
    /// Per-call timeout, applied through the framework's own setting where it has one.
    pub timeout: Duration,
}

impl ClientSetup<'_> {
    /// The server address as a socket address (peers take only `ip:port`).
    pub fn socket_addr(&self) -> Result<SocketAddr, CallError> {
        self.addr.parse().map_err(|e| {
            CallError::new(format!(
                "`{}` is not an ip:port address ({e}); only brisk takes registry targets",
                self.addr
            ))
        })
    }

    /// Connections the scene asks for (at least 1).
    pub fn connections(&self) -> usize {
        self.connections.max(1) as usize
    }
}
