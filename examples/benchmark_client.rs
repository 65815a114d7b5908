//! The brisk benchmark client: jkbenchmark's scene matrix (player × scenario × concurrency ×
//! call mode × connect type × write mode × serializer × compression × payload size and kind ×
//! server dispatch/queue)
//! against the benchmark server of every player — brisk, tarpc, tonic, volo, raw — with
//! jkbenchmark's per-scene lines, Dubbo's boxed report, the computed verdicts and
//! JSON/CSV/SVG/HTML results.
//!
//! ```text
//! cargo run --release --example benchmark_client -- --preset jkrpc-matrix
//! cargo run --release --example benchmark_client -- --preset peers --configs 1:1:1024
//! cargo run --release --example benchmark_client -- --preset connect-type --players brisk,tarpc
//! cargo run --release --example benchmark_client -- --scenario nth,db --concurrency 1,20 --call-mode sync,async
//! cargo run --release --example benchmark_client -- --addr 127.0.0.1:9080 --scenario echo --payload 1k,10k
//! cargo run --release --example benchmark_client -- --preset compression --payload-kind text --compression none,zstd
//! cargo run --release --features etcd --example benchmark_client -- --registry etcd://127.0.0.1:2379 --balancer round_robin
//! ```
//!
//! Without `--addr` it starts the servers itself: this same executable, re-run with the
//! hidden `__serve` subcommand (handled below), one per brisk dispatch × queue and one per
//! peer (`__serve --player tonic`). The engine
//! lives in `benchmark_service::runner` so tests run exactly the same code; `--help`
//! lists every flag and preset.

use std::process::ExitCode;

use benchmark_service::runner::{self, ClientArgs};
use benchmark_service::server::SERVE_SUBCOMMAND;
use clap::Parser;

fn main() -> ExitCode {
    benchmark_service::logging::init("warn");

    let mut argv = std::env::args_os();
    let program = argv.next();
    let rest: Vec<_> = argv.collect();
    if rest.first().is_some_and(|a| a == SERVE_SUBCOMMAND) {
        return runner::serve_main(rest.into_iter().skip(1));
    }
    let args = ClientArgs::parse_from(program.into_iter().chain(rest));
    runner::cli::main(args)
}
