//! The benchmark server: `BenchmarkService` (nth, cache, file, db, echo) served by brisk.
//!
//! ```text
//! cargo run --release --example benchmark_server -- --help
//! cargo run --release --example benchmark_server -- --dispatch pool --queue blocking
//! cargo run --release --example benchmark_server -- --db postgres://postgres@127.0.0.1/postgres
//! cargo run --release --features etcd --example benchmark_server -- --registry etcd://127.0.0.1:2379
//! ```
//!
//! Prints its effective configuration and `LISTENING <ip:port>` on stdout, logs on stderr
//! (`RUST_LOG`, default `info`), and stops gracefully on Ctrl-C or SIGTERM. Run
//! `benchmark_client` against it.

use benchmark_service::server::{run, ServerArgs};
use clap::Parser;

/// brisk benchmark server: serves the jksoa-benchmark BenchmarkService.
#[derive(Parser, Debug)]
#[command(name = "benchmark_server", version)]
struct Cli {
    #[command(flatten)]
    args: ServerArgs,
}

fn main() {
    let cli = Cli::parse();
    // Logs go to stderr: stdout carries the LISTENING line a parent parses.
    benchmark_service::logging::init("info");
    if let Err(e) = run(cli.args) {
        eprintln!("benchmark_server: {e}");
        std::process::exit(1);
    }
}
