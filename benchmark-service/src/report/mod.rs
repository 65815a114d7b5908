//! Statistics and report output for the benchmark client.
//!
//! The flow of a benchmark run through this module:
//! 1. every caller of a round records its calls, through its own [`BatchedRecorder`], in the
//!    round's one [`LatencyRecorder`] (a [`SharedRecorder`]); a [`ProgressTicker`] prints
//!    Dubbo-style `[HH:MM:SS] count: N, error: E, tps: T` lines from shared counters;
//! 2. at the end of a round the recorder is turned into [`RoundStats`] ([`round_report`]
//!    prints the per-round block);
//! 3. a scene's rounds are reduced to medians ([`rounds`]) in a [`SceneResult`] ([`scene_line`] prints jkbenchmark's
//!    one-line summary; [`dubbo_report`] prints the boxed Dubbo report);
//! 4. claims about the run are judged round by round ([`verdict`]);
//! 5. all scenes are written with [`write_json`], [`write_csv`] and
//!    [`write_charts_and_html`] (or [`write_all`]).
//!
//! Submodules: [`stats`] (recording and statistics), [`progress`] (live progress lines),
//! [`scene`] (the per-scene record and its text formats), [`dubbo`] (the Dubbo report and
//! machine detection), [`output`] (JSON/CSV/SVG/HTML files).

pub mod dubbo;
pub mod output;
pub mod progress;
pub mod rounds;
pub mod scene;
pub mod stats;
pub mod verdict;

pub use dubbo::{
    dubbo_report, group_thousands, payload_bytes_per_sec, DubboScene, TestEnvironment,
};
pub use output::{
    csv_string, svg_chart, write_all, write_charts_and_html, write_charts_and_html_with_x,
    write_csv, write_json, ReportMeta,
};
pub use progress::{
    progress_line, utc_datetime, utc_hms, ProgressMeter, ProgressSample, ProgressTicker,
    DEFAULT_PROGRESS_INTERVAL,
};
pub use rounds::{median, median_stats, spread, RoundFigures};
pub use scene::{round_report, scene_line, SceneResult, OPTION_NAMES};
pub use stats::{
    bucket_index, BatchedRecorder, LatencyRecorder, RoundStats, SharedRecorder, BUCKET_COUNT,
    BUCKET_LABELS, BUCKET_UPPER_MS,
};
pub use verdict::{judge, Claim, Filter, Judgement, Metric, Verdict};
