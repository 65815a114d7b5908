//! [`Connect`]: how a client holds its connections to one server, with each
//! connect type's own settings inside it.
//!
//! A setting that only one connect type reads lives in that type's variant,
//! so a config cannot set a pool size on a fixed client and believe it
//! counted. In a config file the type is a tag:
//!
//! ```toml
//! connect = { type = "fixed", connections = 2, coalesce_calls = 16 }
//! # connect = { type = "pooled", min_connections = 2, max_connections = 10, hold = "write", idle_timeout_ms = 60000 }
//! # connect = { type = "reused" }
//! ```
//!
//! Every field has jkrpc's default, so `connect = { type = "pooled" }` is a
//! complete setting.

use std::time::Duration;

use rpc_core::{ConnectType, RpcError};
use serde::{Deserialize, Serialize};

/// How long a pooled connection is held by one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolHold {
    /// Only while the request is written (jkrpc): the response comes back on the
    /// connection by request id while others already use it.
    #[default]
    Write,
    /// Until the response arrives (Kitex/volo): one call per connection at a time.
    Response,
}

/// How connections to a server are held; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Connect {
    /// One connection per address, shared by every client of the process.
    Reused,
    /// A fixed set of connections per address, calls spread over them.
    Fixed {
        /// Connections per address (jkrpc: 2).
        #[serde(default = "fixed_connections")]
        connections: usize,
        /// Calls made together (while a connection's next write is still
        /// gathering) that share that write before calls move on to the next
        /// connection; 1 picks strictly round-robin per call. Above 1, a
        /// call made while only a few others are in flight (fewer than 4,
        /// and fewer than `coalesce_calls`) stays on the connection of the
        /// call before (a light load uses one connection).
        #[serde(default = "coalesce_calls")]
        coalesce_calls: usize,
    },
    /// A pool per address that grows with demand and shrinks when idle.
    Pooled {
        /// Connections kept open.
        #[serde(default = "min_connections")]
        min_connections: usize,
        /// Most connections open at once.
        #[serde(default = "max_connections")]
        max_connections: usize,
        /// How long a call holds its connection.
        #[serde(default)]
        hold: PoolHold,
        /// Idle connections above `min_connections` are closed after this.
        #[serde(
            rename = "idle_timeout_ms",
            with = "rpc_core::config::duration_ms",
            default = "idle_timeout"
        )]
        idle_timeout: Duration,
    },
}

fn fixed_connections() -> usize {
    Connect::DEFAULT_CONNECTIONS
}
fn coalesce_calls() -> usize {
    Connect::DEFAULT_COALESCE_CALLS
}
fn min_connections() -> usize {
    Connect::DEFAULT_MIN_CONNECTIONS
}
fn max_connections() -> usize {
    Connect::DEFAULT_MAX_CONNECTIONS
}
fn idle_timeout() -> Duration {
    Connect::DEFAULT_IDLE_TIMEOUT
}

impl Default for Connect {
    fn default() -> Self {
        Connect::fixed(fixed_connections())
    }
}

impl Connect {
    /// `fixed`: connections per address (jkrpc's 2).
    pub const DEFAULT_CONNECTIONS: usize = 2;
    /// `fixed`: calls sharing one write before calls move on.
    pub const DEFAULT_COALESCE_CALLS: usize = 16;
    /// `pooled`: connections kept open.
    pub const DEFAULT_MIN_CONNECTIONS: usize = 2;
    /// `pooled`: most connections open at once.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 10;
    /// `pooled`: idle connections above the minimum close after this.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

    /// `fixed` with `connections` per address and the default coalescing.
    pub fn fixed(connections: usize) -> Self {
        Connect::Fixed {
            connections,
            coalesce_calls: coalesce_calls(),
        }
    }

    /// `pooled` between `min` and `max` connections, with the default hold
    /// and idle timeout.
    pub fn pooled(min: usize, max: usize) -> Self {
        Connect::Pooled {
            min_connections: min,
            max_connections: max,
            hold: PoolHold::default(),
            idle_timeout: idle_timeout(),
        }
    }

    /// `connect_type` sized to `n` connections per address: `fixed` keeps `n`
    /// open, `pooled` grows up to `n` (keeping the default minimum, or `n`
    /// when that is less), `reused` has one whatever `n` says. The other
    /// settings are the defaults.
    pub fn sized(connect_type: ConnectType, n: usize) -> Self {
        match connect_type {
            ConnectType::Reused => Connect::Reused,
            ConnectType::Fixed => Connect::fixed(n),
            ConnectType::Pooled => Connect::pooled(Self::DEFAULT_MIN_CONNECTIONS.min(n), n),
        }
    }

    /// The connect type with all of its settings at their defaults.
    pub fn defaults_for(connect_type: ConnectType) -> Self {
        match connect_type {
            ConnectType::Reused => Connect::Reused,
            ConnectType::Fixed => Connect::fixed(fixed_connections()),
            ConnectType::Pooled => Connect::pooled(min_connections(), max_connections()),
        }
    }

    /// Which connect type this is.
    pub fn connect_type(&self) -> ConnectType {
        match self {
            Connect::Reused => ConnectType::Reused,
            Connect::Fixed { .. } => ConnectType::Fixed,
            Connect::Pooled { .. } => ConnectType::Pooled,
        }
    }

    /// How long a call holds a connection (always [`PoolHold::Write`]
    /// unless pooled says otherwise).
    pub fn hold(&self) -> PoolHold {
        match self {
            Connect::Pooled { hold, .. } => *hold,
            _ => PoolHold::Write,
        }
    }

    /// Checks the values; the error names the key as written in a file.
    pub fn validate(&self) -> Result<(), RpcError> {
        match self {
            Connect::Reused => Ok(()),
            Connect::Fixed {
                connections,
                coalesce_calls,
            } => {
                if *connections == 0 {
                    return Err(RpcError::config(
                        "connect.connections",
                        "must be at least 1",
                    ));
                }
                if *coalesce_calls == 0 {
                    return Err(RpcError::config(
                        "connect.coalesce_calls",
                        "must be at least 1 (1 = strict round-robin per call)",
                    ));
                }
                Ok(())
            }
            Connect::Pooled {
                min_connections,
                max_connections,
                idle_timeout,
                ..
            } => {
                if *max_connections == 0 {
                    return Err(RpcError::config(
                        "connect.max_connections",
                        "must be at least 1",
                    ));
                }
                if min_connections > max_connections {
                    return Err(RpcError::config(
                        "connect.min_connections",
                        format!(
                            "{min_connections} is more than max_connections ({max_connections})"
                        ),
                    ));
                }
                rpc_core::config::nonzero_ms(
                    "connect.idle_timeout_ms",
                    idle_timeout.as_millis() as u64,
                )?;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpc_core::config::{parse_str, ConfigFormat};

    #[derive(Debug, Deserialize, PartialEq)]
    struct File {
        connect: Connect,
    }

    #[test]
    fn each_type_carries_its_own_settings_with_defaults() {
        let f: File = parse_str(
            "connect = { type = \"pooled\", max_connections = 4 }\n",
            ConfigFormat::Toml,
        )
        .unwrap();
        assert_eq!(
            f.connect,
            Connect::Pooled {
                min_connections: 2,
                max_connections: 4,
                hold: PoolHold::Write,
                idle_timeout: Duration::from_secs(60),
            }
        );
        let y: File = parse_str(
            "connect:\n  type: pooled\n  max_connections: 4\n",
            ConfigFormat::Yaml,
        )
        .unwrap();
        assert_eq!(y, f);
        let f: File = parse_str("connect = { type = \"reused\" }\n", ConfigFormat::Toml).unwrap();
        assert_eq!(f.connect, Connect::Reused);
    }

    #[test]
    fn a_setting_of_another_type_is_refused() {
        let err = parse_str::<File>(
            "connect = { type = \"fixed\", max_connections = 4 }\n",
            ConfigFormat::Toml,
        )
        .unwrap_err();
        assert!(err.to_string().contains("max_connections"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let err = Connect::pooled(5, 3).validate().unwrap_err();
        assert!(err.to_string().contains("connect.min_connections"), "{err}");
        let err = Connect::fixed(0).validate().unwrap_err();
        assert!(err.to_string().contains("connect.connections"), "{err}");
    }
}
