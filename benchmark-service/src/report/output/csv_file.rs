//! `results.csv`: one row per scene, for spreadsheets.
//!
//! The csv crate does the quoting (RFC 4180: a field holding `,`, `"`, CR or LF is quoted,
//! inner quotes doubled) with `\n` line ends. This file owns the columns, and keeps them
//! stable because spreadsheets and scripts address them by name:
//! - the configuration fields, the statistics, a computed `error_pct`, `runtime_ms`, then the
//!   options added since (`compression`, `payload_kind`, `volo_transport`: appended, so the
//!   older columns keep their order);
//! - one column per latency bucket ([`CSV_BUCKET_COLUMNS`]);
//! - `extra_<key>` for every `extra` key used by any scene, sorted, empty where a scene
//!   lacks it — so every row has as many fields as the header.
//!
//! Numbers are written with Rust's shortest round-trip formatting; a non-finite number is
//! written empty rather than as `NaN`/`inf`, which spreadsheets read as text.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use crate::report::scene::SceneResult;
use crate::report::stats::BUCKET_COUNT;

/// Column names of the bucket counts in `results.csv`.
pub const CSV_BUCKET_COLUMNS: [&str; BUCKET_COUNT] = [
    "bucket_0_1ms",
    "bucket_1_5ms",
    "bucket_5_10ms",
    "bucket_10_50ms",
    "bucket_50_100ms",
    "bucket_100_500ms",
    "bucket_500_1000ms",
    "bucket_gt_1000ms",
];

/// The columns before the buckets, in order.
const SCENE_COLUMNS: [&str; 27] = [
    "player",
    "scenario",
    "concurrency",
    "requests",
    "call_mode",
    "connect_type",
    "connections",
    "write_mode",
    "dispatch",
    "queue",
    "serializer",
    "payload",
    "tps",
    "avg_ms",
    "min_ms",
    "max_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "p999_ms",
    "succeeded",
    "errors",
    "error_pct",
    "runtime_ms",
    "compression",
    "payload_kind",
    "volo_transport",
];

/// Writes `dir/results.csv` (see [`csv_string`]).
pub fn write_csv(dir: &Path, scenes: &[SceneResult]) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("results.csv");
    std::fs::write(&path, csv_string(scenes)?)?;
    Ok(path)
}

/// The CSV text of the scenes: a header row, then one row per scene (columns as in the
/// module docs).
pub fn csv_string(scenes: &[SceneResult]) -> io::Result<String> {
    let extra_keys: BTreeSet<&str> = scenes
        .iter()
        .flat_map(|s| s.extra.keys().map(String::as_str))
        .collect();
    let mut out = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());

    let header = SCENE_COLUMNS
        .iter()
        .chain(CSV_BUCKET_COLUMNS.iter())
        .map(|c| (*c).to_owned())
        .chain(extra_keys.iter().map(|k| format!("extra_{k}")));
    out.write_record(header)?;
    for s in scenes {
        let mut row: Vec<String> = vec![
            s.player.clone(),
            s.scenario.clone(),
            s.concurrency.to_string(),
            s.requests.to_string(),
            s.call_mode.clone(),
            s.connect_type.clone(),
            s.connections.to_string(),
            s.write_mode.clone(),
            s.dispatch.clone(),
            s.queue.clone(),
            s.serializer.clone(),
            s.payload.to_string(),
            number(s.tps),
            number(s.avg_ms),
            number(s.min_ms),
            number(s.max_ms),
            number(s.p50_ms),
            number(s.p90_ms),
            number(s.p99_ms),
            number(s.p999_ms),
            s.succeeded.to_string(),
            s.errors.to_string(),
            number(s.error_pct()),
            number(s.runtime_ms),
            s.compression.clone(),
            s.payload_kind.clone(),
            s.volo_transport.clone(),
        ];
        row.extend(s.buckets.iter().map(u64::to_string));
        row.extend(
            extra_keys
                .iter()
                .map(|k| s.extra.get(*k).map(|v| number(*v)).unwrap_or_default()),
        );
        out.write_record(&row)?;
    }
    let bytes = out.into_inner().map_err(|e| e.into_error())?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// A CSV number: empty when not finite.
fn number(v: f64) -> String {
    if v.is_finite() {
        v.to_string()
    } else {
        String::new()
    }
}
