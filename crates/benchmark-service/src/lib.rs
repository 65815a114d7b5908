//! # benchmark-service: brisk's benchmark suite
//!
//! Owns what the benchmark examples (`benchmark_server`, `benchmark_client`) and
//! benches share: the [`service::BenchmarkService`] and its data ([`store`]: cache,
//! `messages.json`, SQLite/PostgreSQL), and the measurement side ([`report`]:
//! latency recording, percentiles, jkbenchmark's buckets, the Dubbo report, JSON,
//! CSV, SVG and HTML output). It must not reach into brisk's internals: it uses
//! brisk through the public facade, like any user.

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
