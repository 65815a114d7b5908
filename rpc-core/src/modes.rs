//! The mode switches that the benchmark suite compares: how a client holds its
//! connections ([`ConnectType`]), when a call's write counts as done
//! ([`WriteMode`]), and where the server runs a handler ([`Dispatch`]).
//!
//! Each is a plain enum with serde and `FromStr`, so the same names work in a
//! config file, on the command line and in code.

use crate::named_enum;

named_enum! {
    /// How a client holds connections to one server address.
    ///
    /// All services on the same address share them.
    #[derive(Default)]
    pub enum ConnectType: "connect_type" {
        /// One connection per address for the whole process, shared by every client
        /// and reference counted; found broken at send time, it is reconnected and
        /// the send goes on (jkrpc's `single`).
        Reused => "reused" | "single",
        /// An elastic pool of `min_connections..=max_connections`; a connection is
        /// validated on borrow and held only for the write (or, with
        /// `hold = "response"`, until the response); idle ones are evicted.
        Pooled => "pooled" | "pool",
        /// `connections` connections created up front (unless `lazy_connect`), picked
        /// round-robin (calls made together share one connection's write, up to
        /// `coalesce_calls`; set it to 1 for strict round-robin, e.g. with
        /// `direct` dispatch and CPU-heavy handlers), each multiplexed, reconnected
        /// lazily. The default.
        #[default]
        Fixed => "fixed",
    }
}

named_enum! {
    /// When the client considers a request written.
    #[derive(Default)]
    pub enum WriteMode: "write_mode" {
        /// The caller waits until its frame is flushed to the socket; a write failure
        /// or write timeout is returned right there.
        Sync => "sync",
        /// The caller registers its pending response and returns at once; a later
        /// write failure completes the pending call with that error.
        #[default]
        Async => "async",
    }
}

named_enum! {
    /// Where the server runs a handler.
    #[derive(Default)]
    pub enum Dispatch: "dispatch" {
        /// On the connection's I/O task (jkrpc `handleRequestInIOThread: true`): no
        /// hand-off, but a blocking handler stalls its connection.
        Direct => "direct",
        /// On the bounded worker pool of OS threads; over its bound the caller gets an
        /// immediate `ServerBusy` answer.
        #[default]
        Pool => "pool",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_aliases_work() {
        for c in ConnectType::ALL {
            assert_eq!(c.name().parse::<ConnectType>().unwrap(), *c);
        }
        assert_eq!(
            "single".parse::<ConnectType>().unwrap(),
            ConnectType::Reused
        );
        assert_eq!("SYNC".parse::<WriteMode>().unwrap(), WriteMode::Sync);
        let err = "bogus".parse::<Dispatch>().unwrap_err();
        assert!(err.to_string().contains("`dispatch`"), "{err}");
        assert!(err.to_string().contains("direct, pool"), "{err}");
    }
}
