//! The benchmark server: [`BenchmarkService`](crate::BenchmarkService) over a [`MessageStore`],
//! served by brisk with every dispatch and worker-pool setting the suite compares.
//!
//! # Why it exists
//!
//! The benchmark client measures a *separate* server process, as jksoa-benchmark did: a server
//! sharing the client's runtime and CPU would measure the client's scheduling as much as the
//! server. This module is that server, usable three ways:
//!
//! * `cargo run --release --example benchmark_server -- --dispatch pool --queue blocking` — a
//!   person starts it by hand (the example is a thin clap wrapper around [`run`]);
//! * the benchmark client spawns its own executable as a child process,
//!   `current_exe() __serve <ServerArgs::to_argv()>`, whose `__serve` subcommand calls [`run`];
//!   the child prints one `LISTENING <ip:port>` line on stdout ([`LISTENING_PREFIX`],
//!   [`parse_listening_line`], [`wait_for_listening`]) — followed by `LISTENING_HTTP <ip:port>`
//!   when `--http-addr` is set ([`LISTENING_HTTP_PREFIX`], [`wait_for_listening_all`]) — and,
//!   with `--exit-on-stdin-eof`, dies with its parent because its stdin pipe reaches EOF;
//! * tests and benches start it in-process with [`start`](fn@start) (or [`serve_until`]).
//!
//! # Configuration
//!
//! [`ServerArgs`] are the command-line flags. The effective [`ServerConfig`]
//! ([`ServerArgs::server_config`]) is: the defaults, replaced by `--config FILE` (TOML or YAML,
//! the keys of [`ServerConfig`]) when given, then every flag given explicitly on top. All flags
//! are `Option`s for that reason: an unset flag leaves the file's (or the default) value alone.
//!
//! The store is opened before the server binds, so a wrong database URL or an unwritable data
//! directory stops the start with a clear message instead of a 100 % error rate in a report.
//!
//! # Output protocol (stdout)
//!
//! [`run`] prints the effective configuration ([`effective_config_text`]), then exactly one line
//! `LISTENING <ip:port>` (flushed) — and, only when an HTTP/JSON listener is configured
//! (`--http-addr` or `http_addr` in the config file), right after it one line
//! `LISTENING_HTTP <ip:port>` — and after a shutdown signal a short shutdown report. Logs
//! (tracing) belong on stderr. Writes to stdout after start-up ignore errors, so a parent that
//! closes its end of the pipe does not crash the server.
//!
//! # Modules
//!
//! * `args` — [`ServerArgs`] and the [`ServerConfig`] / store configuration they build;
//! * `start` — [`start`](fn@start) / [`start_peer`] on the caller's runtime;
//! * `serve` — [`run`] and [`serve_until`]: print, wait, shut down, report;
//! * `shutdown` — [`ShutdownCause`], the signals, the shutdown report;
//! * `listening` — the `LISTENING` lines and the parent's reading of them;
//! * `error` — [`BenchError`].
//!
//! Data flows one way: `args`, `error` and `shutdown` are leaves, `start` and `listening` build
//! on them, `serve` on all of them. The public paths are this module's re-exports.
//!
//! [`ServerConfig`]: brisk::ServerConfig
//! [`MessageStore`]: crate::store::MessageStore

mod args;
mod error;
mod listening;
mod serve;
mod shutdown;
mod start;

pub use args::{ServerArgs, MAX_AUTO_DB_POOL};
pub use error::BenchError;
pub use listening::{
    parse_listening_http_line, parse_listening_line, wait_for_listening, wait_for_listening_all,
    ListeningAddrs, LISTENING_HTTP_PREFIX, LISTENING_PREFIX,
};
pub use serve::{effective_config_text, run, serve_until};
pub use shutdown::ShutdownCause;
pub use start::{start, start_peer, StartedPeer, StartedServer};

/// The hidden subcommand the benchmark client uses to run its own executable as the server:
/// `current_exe() __serve <ServerArgs::to_argv()>`.
pub const SERVE_SUBCOMMAND: &str = "__serve";
