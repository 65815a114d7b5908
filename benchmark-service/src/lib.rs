//! # benchmark-service: brisk's benchmark suite (not published)
//!
//! Owns what the benchmark examples (`benchmark_server`, `benchmark_client`) and
//! benches share: the [`service::BenchmarkService`] and its data ([`store`]: cache,
//! `messages.json`, SQLite/PostgreSQL); the frameworks under test ([`players`]:
//! brisk, tarpc, tonic, volo and a raw tokio ceiling, each a server and a client over
//! the same store); the one load engine and the runner ([`runner`]); and the
//! measurement side ([`report`]: latency recording, medians of rounds, verdicts,
//! jkbenchmark's buckets, the Dubbo report, JSON, CSV, SVG and HTML output;
//! [`procfs`] and [`sockstat`]: CPU and TCP segments per call; [`host`]: the machine's CPU
//! count). It must not reach into brisk's internals: it uses brisk through the public
//! facade, like any user. The peers are dependencies of this crate only, so none reaches
//! a user of `brisk`.

pub mod host;
pub mod logging;
pub mod names;
pub mod players;
pub mod procfs;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod server;
pub mod service;
pub mod sockstat;
pub mod store;

pub use service::{
    BenchmarkService, BenchmarkServiceClient, BenchmarkServiceImpl, BenchmarkServiceServer,
};
