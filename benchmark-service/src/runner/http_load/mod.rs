//! Seed 001 over HTTP: the `keepalive` preset's second half.
//!
//! Seed 001 measures an HTTP service with ApacheBench, once opening a connection per request
//! (`ab -n 10000 -c 10`) and once keeping connections alive (`ab -k …`). brisk's binary
//! protocol answers the same question with the `percall` and `fixed` connect types; this
//! module runs the real tools against the same server's HTTP/JSON listener
//! (`POST /BenchmarkService/do_nothing` with the body `[]`) so the numbers sit side by side:
//!
//! * `ab -n 10000 -c 10 -p body.json -T application/json URL` (scenario `http-ab`),
//! * the same with `-k` (scenario `http-ab-k`),
//! * `wrk -t1 -c10 -d5s --latency -s post.lua URL` (scenario `http-wrk`; wrk always keeps its
//!   connections alive).
//!
//! A tool that is not on `PATH` is skipped with an install hint; a tool that fails, hangs (it
//! is killed after a generous timeout) or prints something unparsable is reported and
//! skipped — it never ends the run. The parsers ([`parse_ab`], [`parse_wrk`]) read ab 2.x and
//! wrk 4.x output. Results become [`SceneResult`](crate::report::SceneResult)s with connect
//! type `http` and the table percentages in `extra` (`p50_ms` … `p100_ms`, see
//! [`percentage_key`]); [`seed001_table`] prints them next to the binary scenes in seed 001's
//! layout.
//!
//! # Modules
//!
//! * `parse` — ab's and wrk's output as [`AbReport`] / [`WrkReport`] (pure text parsing);
//! * `scenes` — those reports (and a binary scene's latencies) as scene results;
//! * `tools` — finding and running the tools ([`run_tools`]);
//! * `table` — [`seed001_table`].
//!
//! Data flows one way: `parse` is a leaf, `scenes` builds on it, `tools` and `table` on both.
//! The public paths are this module's re-exports.

mod parse;
mod scenes;
mod table;
mod tools;

#[cfg(test)]
mod tests;

pub use parse::{parse_ab, parse_wrk, AbReport, WrkReport, PERCENTAGES};
pub use scenes::{
    ab_scene, percentage_key, recorder_percentages, wrk_scene, ServerLabels, CONCURRENCY,
};
pub use table::seed001_table;
pub use tools::{run_tools, AB_REQUESTS, NTH_PATH, WRK_SECONDS};
