//! Result files of a run: JSON, CSV, SVG line charts and a self-contained HTML report.
//!
//! What [`write_all`] leaves in `dir`:
//! - `results.json` — the [`SceneResult`]s as a pretty JSON array (lossless, re-loadable);
//! - `results.csv` — one row per scene for spreadsheets ([`csv_string`]);
//! - per *matrix* (the scenes of one scenario and call mode, and of one payload kind unless
//!   the charts compare kinds) a TPS chart (messages/s for the streaming scenarios) and a p99
//!   chart, `<scenario>-<call_mode>[-<payload kind>]-<compare_by>-tps.svg` and `…-p99.svg`
//!   (the kind named unless it is the default `fill`), one series per value
//!   of the compared option, x = concurrency unless asked otherwise ([`svg_chart`]);
//! - `report.html` — the header, the notes, a table of all scenes and the same SVGs
//!   embedded inline ([`ReportMeta`] is its header).
//!
//! Invariants: every writer creates `dir` if needed and returns [`std::io::Result`];
//! nothing panics on I/O or on odd data (non-finite numbers, no scenes); chart file names
//! are slugs, unique within one call; a bad compared option or x axis is an
//! [`io::ErrorKind::InvalidInput`] error before anything is written.
//!
//! Data flows one way: this file asks `matrix` for the grouping, `chart` for each SVG and
//! `html_page` for the page, and writes the files; those three know nothing of each other
//! or of files.

mod chart;
mod csv_file;
mod html_page;
mod matrix;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

pub use chart::svg_chart;
pub use csv_file::{csv_string, write_csv, CSV_BUCKET_COLUMNS};
pub use html_page::ReportMeta;

use html_page::{html_page, MatrixCharts};
use matrix::{build_matrices, check_x_axis};

use crate::report::scene::SceneResult;

/// Writes `dir/results.json`: the scenes as a pretty-printed JSON array.
pub fn write_json(dir: &Path, scenes: &[SceneResult]) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("results.json");
    let mut json = serde_json::to_string_pretty(scenes).map_err(io::Error::from)?;
    json.push('\n');
    std::fs::write(&path, json)?;
    Ok(path)
}

/// Writes `results.json`, `results.csv`, the charts and `report.html`; returns all paths.
pub fn write_all(
    dir: &Path,
    meta: &ReportMeta,
    scenes: &[SceneResult],
    compare_by: &str,
) -> io::Result<Vec<PathBuf>> {
    let mut files = vec![write_json(dir, scenes)?, write_csv(dir, scenes)?];
    files.extend(write_charts_and_html(dir, meta, scenes, compare_by)?);
    Ok(files)
}

/// Writes TPS and p99 charts per matrix plus `dir/report.html`, with concurrency as the
/// x axis. See [`write_charts_and_html_with_x`].
pub fn write_charts_and_html(
    dir: &Path,
    meta: &ReportMeta,
    scenes: &[SceneResult],
    compare_by: &str,
) -> io::Result<Vec<PathBuf>> {
    write_charts_and_html_with_x(dir, meta, scenes, compare_by, "concurrency")
}

/// The two charts of a matrix: (file-name key, y-axis label, title word, metric).
type ChartMetric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&SceneResult) -> f64,
);
const CHART_METRICS: [ChartMetric; 2] = [
    ("tps", "TPS (requests/s)", "TPS", |s| s.tps),
    ("p99", "p99 latency (ms)", "p99", |s| s.p99_ms),
];

/// Writes the charts and the HTML report; returns the files written (the SVGs, then
/// `report.html`).
///
/// Scenes are grouped into matrices by (scenario, call mode, and payload kind unless
/// `compare_by` names it), in order of first appearance. Within a matrix, each distinct value of the `compare_by` option (one of
/// [`OPTION_NAMES`](crate::report::OPTION_NAMES), e.g. `connect_type`, `write_mode`,
/// `queue`, `player`; several joined by `+`) is a series and `x_by` (`concurrency`,
/// `requests`, `connections` or `payload`) is the x axis. If a series has several scenes at
/// the same x (e.g. the requests dimension of the cross product), the one with the most
/// requests is plotted. Per matrix two SVGs are written,
/// `<scenario>-<call_mode>-<compare_by>-tps.svg` and `…-p99.svg` (slugified,
/// de-duplicated with `-2`, `-3`, …). `report.html` embeds the same SVGs inline plus a
/// table of all scenes.
///
/// An unknown `compare_by` or non-numeric `x_by` is an [`io::ErrorKind::InvalidInput`]
/// error and nothing is written.
pub fn write_charts_and_html_with_x(
    dir: &Path,
    meta: &ReportMeta,
    scenes: &[SceneResult],
    compare_by: &str,
    x_by: &str,
) -> io::Result<Vec<PathBuf>> {
    check_x_axis(x_by)?;
    let matrices = build_matrices(scenes, compare_by, x_by)?;
    std::fs::create_dir_all(dir)?;

    let mut written = Vec::new();
    let mut used_names = HashSet::new();
    let mut sections = Vec::with_capacity(matrices.len());
    for m in &matrices {
        let mut charts = Vec::with_capacity(CHART_METRICS.len());
        // A call of a streaming scenario moves many messages: its throughput chart plots
        // messages/s (`extra.msgs_per_s`), and says so; the file keeps its `-tps` name.
        let stream = m
            .scenario
            .parse::<crate::scenario::Scenario>()
            .is_ok_and(|s| s.is_stream());
        for (key, y_label, title_word, metric) in CHART_METRICS {
            let (y_label, title_word, metric): (&str, &str, fn(&SceneResult) -> f64) =
                if stream && key == "tps" {
                    (
                        "messages/s (calls/s × messages per call)",
                        "messages/s",
                        |s| s.extra.get("msgs_per_s").copied().unwrap_or(s.tps),
                    )
                } else {
                    (y_label, title_word, metric)
                };
            let series: Vec<(String, Vec<(f64, f64)>)> = m
                .series
                .iter()
                .map(|(name, pts)| {
                    (
                        name.clone(),
                        pts.iter().map(|(x, s)| (*x, metric(s))).collect(),
                    )
                })
                .collect();
            let title = format!(
                "{} — {title_word} by {compare_by}",
                m.name_parts().join(" ")
            );
            let svg = svg_chart(&title, x_by, y_label, &series)?;
            let base = slugify(&format!(
                "{}-{}-{}",
                m.name_parts().join("-"),
                compare_by,
                key
            ));
            let mut name = format!("{base}.svg");
            let mut n = 2;
            while !used_names.insert(name.clone()) {
                name = format!("{base}-{n}.svg");
                n += 1;
            }
            let path = dir.join(&name);
            std::fs::write(&path, &svg)?;
            written.push(path);
            charts.push((name, svg));
        }
        sections.push(MatrixCharts {
            heading: m.name_parts().join(" · "),
            charts,
        });
    }

    let path = dir.join("report.html");
    std::fs::write(&path, html_page(meta, scenes, compare_by, &sections))?;
    written.push(path);
    Ok(written)
}

/// Lower-case ASCII letters and digits, everything else collapsed into single `-`
/// (`chart` if nothing is left): a file name that is safe everywhere.
fn slugify(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        out.push_str("chart");
    }
    out
}
