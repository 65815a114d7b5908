//! The vocabulary between the load engine and the players: what a client is built from
//! ([`ClientSetup`]), what a call brought back ([`Reply`], checked the same way for every
//! player) and how a call failed ([`CallError`]). A leaf module, so that every player and the
//! dispatch in [`super`] can use it without depending on each other.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;

use crate::scenario::{Scenario, STREAM_ITEMS};
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
    /// `stream` or `pingpong` ended: what its items were.
    Items(ItemTally),
}

/// What the items of one streaming call were, tallied as they arrive (a stream of 100 items is
/// not kept; each item is compared with the payload that was asked for, then dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ItemTally {
    /// Items received.
    pub count: u64,
    /// Items whose bytes were not the payload's (wrong length or content).
    pub wrong: u64,
    /// The length of the first wrong item, for the error text.
    pub first_wrong_len: Option<usize>,
}

impl ItemTally {
    /// Counts one received item, checked against `expected`.
    pub fn add(&mut self, item: &[u8], expected: &[u8]) {
        self.count += 1;
        if item != expected {
            self.wrong += 1;
            self.first_wrong_len.get_or_insert(item.len());
        }
    }
}

impl Reply {
    /// Checks the reply against the call that produced it: the record with the asked id, the
    /// echoed bytes of the asked length, or exactly [`STREAM_ITEMS`] items each equal to the
    /// payload.
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
            (Scenario::Stream | Scenario::PingPong, Reply::Items(tally)) => {
                let expected = u64::from(STREAM_ITEMS);
                if tally.count != expected {
                    Err(CallError::new(format!(
                        "{scenario} returned {} items, not {expected}",
                        tally.count
                    )))
                } else if tally.wrong > 0 {
                    Err(CallError::new(format!(
                        "{scenario}: {} of {} items were not the {} B payload (the first: {} B)",
                        tally.wrong,
                        tally.count,
                        payload.len(),
                        tally.first_wrong_len.unwrap_or(0)
                    )))
                } else {
                    Ok(())
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
