//! The mode switches that the benchmark suite compares: how a client holds its
//! connections ([`ConnectType`]), when a call's write counts as done
//! ([`WriteMode`]), and where the server runs a handler ([`Dispatch`]).
//!
//! Each is a plain enum with serde and `FromStr`, so the same names work in a
//! config file, on the command line and in code.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::RpcError;

macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident, $key:literal { $($(#[$vm:meta])* $variant:ident = $text:literal $(| $alias:literal)*),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $name {
            $($(#[$vm])* $(#[serde(alias = $alias)])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The name used in configs and on the command line.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $name {
            type Err = RpcError;

            fn from_str(s: &str) -> Result<Self, RpcError> {
                match s.to_ascii_lowercase().as_str() {
                    $($text $(| $alias)* => Ok($name::$variant),)+
                    other => Err(RpcError::config(
                        $key,
                        format!("unknown value `{other}` (expected one of: {})",
                            [$($text),+].join(", ")),
                    )),
                }
            }
        }
    };
}

named_enum! {
    /// How a client holds connections to one server address.
    ///
    /// All services on the same address share them.
    ConnectType, "connect_type" {
        /// One connection per address for the whole process, shared by every client
        /// and reference counted; found broken at send time, it is reconnected and
        /// the send goes on (jkrpc's `single`).
        Reused = "reused" | "single",
        /// An elastic pool of `min_connections..=max_connections`; a connection is
        /// validated on borrow and held only for the write (or, with
        /// `pool_hold = response`, until the response); idle ones are evicted.
        Pooled = "pooled" | "pool",
        /// `connections` connections created up front (unless `lazy_connect`), picked
        /// round-robin (calls made together share one connection's write, up to the
        /// client's `coalesce_calls`; set it to 1 for strict round-robin, e.g. with
        /// `direct` dispatch and CPU-heavy handlers), each multiplexed, reconnected
        /// lazily. The default.
        Fixed = "fixed",
    }
}

named_enum! {
    /// When the client considers a request written.
    WriteMode, "write_mode" {
        /// The caller waits until its frame is flushed to the socket; a write failure
        /// or write timeout is returned right there.
        Sync = "sync",
        /// The caller registers its pending response and returns at once; a later
        /// write failure completes the pending call with that error.
        Async = "async",
    }
}

named_enum! {
    /// Where the server runs a handler.
    Dispatch, "dispatch" {
        /// On the connection's I/O task (jkrpc `handleRequestInIOThread: true`): no
        /// hand-off, but a blocking handler stalls its connection.
        Direct = "direct",
        /// On the bounded worker pool of OS threads; over its bound the caller gets an
        /// immediate `ServerBusy` answer.
        Pool = "pool",
    }
}

#[allow(clippy::derivable_impls)]
impl Default for ConnectType {
    fn default() -> Self {
        ConnectType::Fixed
    }
}

#[allow(clippy::derivable_impls)]
impl Default for WriteMode {
    fn default() -> Self {
        WriteMode::Async
    }
}

#[allow(clippy::derivable_impls)]
impl Default for Dispatch {
    fn default() -> Self {
        Dispatch::Pool
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
