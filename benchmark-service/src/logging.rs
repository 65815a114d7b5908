//! The benchmark binaries' logs: `tracing` to stderr, filtered by
//! `RUST_LOG` (else a default level), with terminal colours only when
//! stderr is a terminal — a log written to a pipe or a file (a CI log, the
//! runner's capture of a child server's stderr) carries no escape codes.
//!
//! stderr, because stdout carries what a parent process parses (a server's
//! `LISTENING` line) and the reports.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the subscriber (once; a second call is a no-op), at `default`
/// (`"info"`, `"warn"`, …) unless `RUST_LOG` says otherwise.
pub fn init(default: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
