//! Result files: JSON, CSV, SVG charts and a self-contained HTML report.
//!
//! Everything is written by hand with std only — the formats are simple and the suite
//! should not pull a CSV, plotting or templating stack into every brisk build:
//! - `results.json` — the [`SceneResult`]s as a pretty JSON array (lossless, re-loadable);
//! - `results.csv` — one row per scene for spreadsheets (RFC 4180 quoting, `\n` line ends,
//!   one column per bucket and per `extra` key);
//! - one SVG line chart of TPS and one of p99 latency per *matrix* (scenes of the same
//!   scenario and call mode), one series per value of the option being compared, the x
//!   axis being concurrency — the shape of jkrpc's comparison tables;
//! - `report.html` — a single file with inline CSS and the SVGs embedded inline (not
//!   linked), so it can be mailed or attached to CI artifacts and still render.
//!
//! All writers create `dir` if needed and return [`std::io::Result`]; nothing panics on I/O.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::dubbo::{group_thousands, TestEnvironment};
use super::progress::utc_datetime;
use super::scene::{fmt_ms, SceneResult, OPTION_NAMES};
use super::stats::BUCKET_COUNT;

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

/// Header information of a report page.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportMeta {
    /// Title of the run, e.g. `brisk connection types`.
    pub title: String,
    /// When the run happened (free text; [`ReportMeta::now`] uses UTC).
    pub date: String,
    /// The machine it ran on (free text; [`TestEnvironment::summary`] fits).
    pub machine: String,
    /// Text sections shown before the scenes, as (heading, preformatted text): the framework
    /// table, the verdicts.
    pub notes: Vec<(String, String)>,
}

impl ReportMeta {
    /// Header from explicit values.
    pub fn new(
        title: impl Into<String>,
        date: impl Into<String>,
        machine: impl Into<String>,
    ) -> Self {
        Self {
            title: title.into(),
            date: date.into(),
            machine: machine.into(),
            notes: Vec::new(),
        }
    }

    /// Header dated now (UTC) describing the detected machine.
    pub fn now(title: impl Into<String>) -> Self {
        Self::new(
            title,
            utc_datetime(SystemTime::now()),
            TestEnvironment::detect().summary(),
        )
    }
}

/// Writes `dir/results.json`: the scenes as a pretty-printed JSON array.
pub fn write_json(dir: &Path, scenes: &[SceneResult]) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("results.json");
    let mut json = serde_json::to_string_pretty(scenes).map_err(io::Error::from)?;
    json.push('\n');
    std::fs::write(&path, json)?;
    Ok(path)
}

/// Writes `dir/results.csv` (see [`csv_string`]).
pub fn write_csv(dir: &Path, scenes: &[SceneResult]) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("results.csv");
    std::fs::write(&path, csv_string(scenes))?;
    Ok(path)
}

/// The CSV text of the scenes: a header row, then one row per scene. Columns: the
/// configuration fields, the statistics (plus a computed `error_pct`), one column per
/// bucket ([`CSV_BUCKET_COLUMNS`]), then `extra_<key>` for every `extra` key used by any
/// scene (sorted; empty where a scene lacks it). Non-finite numbers are written empty.
pub fn csv_string(scenes: &[SceneResult]) -> String {
    let extra_keys: BTreeSet<&str> = scenes
        .iter()
        .flat_map(|s| s.extra.keys().map(String::as_str))
        .collect();
    let mut header: Vec<String> = [
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
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    header.extend(CSV_BUCKET_COLUMNS.iter().map(|s| (*s).to_owned()));
    header.extend(extra_keys.iter().map(|k| format!("extra_{k}")));

    let mut out = String::new();
    push_csv_row(&mut out, header.iter().map(String::as_str));
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
            csv_f64(s.tps),
            csv_f64(s.avg_ms),
            csv_f64(s.min_ms),
            csv_f64(s.max_ms),
            csv_f64(s.p50_ms),
            csv_f64(s.p90_ms),
            csv_f64(s.p99_ms),
            csv_f64(s.p999_ms),
            s.succeeded.to_string(),
            s.errors.to_string(),
            csv_f64(s.error_pct()),
            csv_f64(s.runtime_ms),
        ];
        row.extend(s.buckets.iter().map(u64::to_string));
        row.extend(
            extra_keys
                .iter()
                .map(|k| s.extra.get(*k).map(|v| csv_f64(*v)).unwrap_or_default()),
        );
        push_csv_row(&mut out, row.iter().map(String::as_str));
    }
    out
}

fn csv_f64(v: f64) -> String {
    if v.is_finite() {
        v.to_string()
    } else {
        String::new()
    }
}

/// Quotes a CSV field when needed (RFC 4180): fields containing `,`, `"`, CR or LF, or
/// with leading/trailing whitespace, are wrapped in quotes with inner quotes doubled.
pub fn csv_field(field: &str) -> String {
    let needs = field.contains([',', '"', '\n', '\r'])
        || field.starts_with(char::is_whitespace)
        || field.ends_with(char::is_whitespace);
    if needs {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

fn push_csv_row<'a>(out: &mut String, fields: impl Iterator<Item = &'a str>) {
    let mut first = true;
    for f in fields {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&csv_field(f));
    }
    out.push('\n');
}

/// Escapes text for XML/HTML content and attribute values.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Lower-case ASCII letters and digits, everything else collapsed into single `-`.
pub fn slugify(text: &str) -> String {
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

/// Series colours (colour-blind-friendly Tableau 10).
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

const SVG_W: f64 = 720.0;
const SVG_H: f64 = 420.0;
const MARGIN_L: f64 = 80.0;
const MARGIN_R: f64 = 170.0;
const MARGIN_T: f64 = 44.0;
const MARGIN_B: f64 = 58.0;

/// A "nice" step (1, 2 or 5 × 10^k) close to `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let exp = 10f64.powf(raw.log10().floor());
    let f = raw / exp;
    let nf = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nf * exp
}

/// An axis covering `[min, max]` with ~5 nice ticks: (lo, hi, step).
fn nice_axis(min: f64, max: f64) -> (f64, f64, f64) {
    let (mut min, mut max) = (min, max);
    if max - min <= f64::EPSILON * max.abs().max(1.0) {
        // A single value: centre it.
        let pad = if min == 0.0 { 1.0 } else { min.abs() * 0.5 };
        min -= pad;
        max += pad;
    }
    let step = nice_step((max - min) / 5.0);
    let lo = (min / step).floor() * step;
    let hi = (max / step).ceil() * step;
    (lo, hi, step)
}

fn fmt_tick(v: f64, step: f64) -> String {
    let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
    if step >= 1.0 {
        let r = v.round();
        if r.abs() >= 10_000.0 {
            let sign = if r < 0.0 { "-" } else { "" };
            format!("{sign}{}", group_thousands(r.abs() as u64))
        } else {
            format!("{r:.0}")
        }
    } else {
        let decimals = (-step.log10()).ceil().clamp(0.0, 6.0) as usize;
        format!("{v:.decimals$}")
    }
}

fn fmt_value(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A self-contained SVG line chart.
///
/// Each series is `(name, points)`; points are `(x, y)` and are drawn sorted by x, one
/// coloured `<polyline>` plus a circle marker (with a hover `<title>`) per point. Axes
/// have ~5 ticks with numeric labels; y starts at 0 unless data is negative. A legend
/// sits to the right. Non-finite points are skipped; with no points at all the axes are
/// drawn with a "no data" note. Every series yields exactly one `<polyline>` (empty if it
/// has no finite points).
pub fn svg_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> String {
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|(_, p)| p.iter().copied())
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    let has_data = !pts.is_empty();
    let fold = |f: fn(&(f64, f64)) -> f64| {
        pts.iter()
            .map(f)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            })
    };
    let (xmin, xmax) = if has_data { fold(|p| p.0) } else { (0.0, 1.0) };
    let (ymin, ymax) = if has_data { fold(|p| p.1) } else { (0.0, 1.0) };
    let (x_lo, x_hi, x_step) = nice_axis(xmin, xmax);
    let y_floor = if ymin >= 0.0 { 0.0 } else { ymin };
    let y_top = if ymax <= y_floor { y_floor + 1.0 } else { ymax };
    let (y_lo, y_hi, y_step) = nice_axis(y_floor, y_top);

    let pw = SVG_W - MARGIN_L - MARGIN_R;
    let ph = SVG_H - MARGIN_T - MARGIN_B;
    let px = |x: f64| MARGIN_L + (x - x_lo) / (x_hi - x_lo) * pw;
    let py = |y: f64| MARGIN_T + ph - (y - y_lo) / (y_hi - y_lo) * ph;

    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#,
        w = SVG_W,
        h = SVG_H
    );
    let _ = write!(s, "<title>{}</title>", xml_escape(title));
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{SVG_W}" height="{SVG_H}" fill="#ffffff"/>"##
    );
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="24" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        MARGIN_L + pw / 2.0,
        xml_escape(title)
    );

    // Y grid, ticks and labels.
    let max_ticks = 50;
    let mut i = 0;
    loop {
        let v = y_lo + f64::from(i) * y_step;
        if v > y_hi + y_step * 1e-6 || i > max_ticks {
            break;
        }
        let y = py(v);
        let _ = write!(
            s,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/>"##,
            MARGIN_L,
            MARGIN_L + pw
        );
        let _ = write!(
            s,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#333333"/>"##,
            MARGIN_L - 5.0,
            MARGIN_L
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            MARGIN_L - 8.0,
            y + 4.0,
            xml_escape(&fmt_tick(v, y_step))
        );
        i += 1;
    }
    // X ticks and labels.
    let mut i = 0;
    loop {
        let v = x_lo + f64::from(i) * x_step;
        if v > x_hi + x_step * 1e-6 || i > max_ticks {
            break;
        }
        let x = px(v);
        let base = MARGIN_T + ph;
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{base:.1}" x2="{x:.1}" y2="{:.1}" stroke="#333333"/>"##,
            base + 5.0
        );
        let _ = write!(
            s,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            base + 18.0,
            xml_escape(&fmt_tick(v, x_step))
        );
        i += 1;
    }
    // Axes.
    let _ = write!(
        s,
        r##"<line x1="{l:.1}" y1="{t:.1}" x2="{l:.1}" y2="{b:.1}" stroke="#333333"/><line x1="{l:.1}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}" stroke="#333333"/>"##,
        l = MARGIN_L,
        t = MARGIN_T,
        b = MARGIN_T + ph,
        r = MARGIN_L + pw
    );
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{}</text>"#,
        MARGIN_L + pw / 2.0,
        SVG_H - 14.0,
        xml_escape(x_label)
    );
    let _ = write!(
        s,
        r#"<text x="16" y="{cy:.1}" text-anchor="middle" font-size="12" transform="rotate(-90 16 {cy:.1})">{}</text>"#,
        xml_escape(y_label),
        cy = MARGIN_T + ph / 2.0
    );
    if !has_data {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#888888" font-size="14">no data</text>"##,
            MARGIN_L + pw / 2.0,
            MARGIN_T + ph / 2.0
        );
    }

    // Series.
    for (idx, (name, points)) in series.iter().enumerate() {
        let color = PALETTE[idx % PALETTE.len()];
        let mut p: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        let coords: Vec<String> = p
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            s,
            r#"<g><polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            coords.join(" ")
        );
        for &(x, y) in &p {
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"><title>{}: ({}, {})</title></circle>"#,
                px(x),
                py(y),
                xml_escape(name),
                fmt_value(x),
                fmt_value(y)
            );
        }
        s.push_str("</g>");
        // Legend entry.
        let ly = MARGIN_T + 8.0 + idx as f64 * 18.0;
        let lx = MARGIN_L + pw + 16.0;
        let _ = write!(
            s,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"/><circle cx="{:.1}" cy="{ly:.1}" r="3.5" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 22.0,
            lx + 11.0,
            lx + 28.0,
            ly + 4.0,
            xml_escape(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// One chart matrix: scenes of one scenario and call mode.
struct Matrix<'a> {
    scenario: &'a str,
    call_mode: &'a str,
    /// (series value, points as (x, scene)).
    series: Vec<(String, Vec<(f64, &'a SceneResult)>)>,
}

fn build_matrices<'a>(
    scenes: &'a [SceneResult],
    compare_by: &str,
    x_by: &str,
) -> io::Result<Vec<Matrix<'a>>> {
    let compared: Vec<&str> = compare_by.split('+').collect();
    if let Some(bad) = compared.iter().find(|o| !OPTION_NAMES.contains(o)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "cannot compare by {bad:?}; expected one of {OPTION_NAMES:?} (several joined by +)"
            ),
        ));
    }
    let mut matrices: Vec<Matrix<'a>> = Vec::new();
    for scene in scenes {
        let value: Option<Vec<String>> = compared.iter().map(|o| scene.option(o)).collect();
        let value = value.map(|v| {
            v.into_iter()
                .filter(|part| !part.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        });
        let (Some(value), Some(x)) = (value, scene.numeric_option(x_by)) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cannot use {x_by:?} as the x axis; expected concurrency, requests, connections or payload"
                ),
            ));
        };
        let value = if value.is_empty() {
            "(none)".to_owned()
        } else {
            value
        };
        let pos = match matrices
            .iter()
            .position(|m| m.scenario == scene.scenario && m.call_mode == scene.call_mode)
        {
            Some(p) => p,
            None => {
                matrices.push(Matrix {
                    scenario: &scene.scenario,
                    call_mode: &scene.call_mode,
                    series: Vec::new(),
                });
                matrices.len() - 1
            }
        };
        let matrix = &mut matrices[pos];
        let spos = match matrix.series.iter().position(|(v, _)| *v == value) {
            Some(p) => p,
            None => {
                matrix.series.push((value, Vec::new()));
                matrix.series.len() - 1
            }
        };
        let points = &mut matrix.series[spos].1;
        // One point per x: keep the scene with the most requests (the most reliable),
        // a later scene replacing an earlier one of equal size (a re-run).
        match points.iter_mut().find(|(px, _)| *px == x) {
            Some(slot) if scene.requests >= slot.1.requests => slot.1 = scene,
            Some(_) => {}
            None => points.push((x, scene)),
        }
    }
    Ok(matrices)
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

/// Writes the charts and the HTML report; returns the files written (the SVGs, then
/// `report.html`).
///
/// Scenes are grouped into matrices by (scenario, call mode), in order of first
/// appearance. Within a matrix, each distinct value of the `compare_by` option (one of
/// [`OPTION_NAMES`], e.g. `connect_type`, `write_mode`, `queue`, `player`) is a series and
/// `x_by` (`concurrency`, `requests`, `connections` or `payload`) is the x axis. If a series
/// has several scenes at the same x (e.g. the requests dimension of the cross product), the
/// one with the most requests is plotted. Per matrix two SVGs are written,
/// `<scenario>-<call_mode>-<compare_by>-tps.svg` and `…-p99.svg` (slugified, de-duplicated).
/// `report.html` embeds the same SVGs inline plus a table of all scenes.
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
    if SceneResult::default().numeric_option(x_by).is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot use {x_by:?} as the x axis; expected concurrency, requests, connections or payload"),
        ));
    }
    let matrices = build_matrices(scenes, compare_by, x_by)?;
    std::fs::create_dir_all(dir)?;

    let mut written = Vec::new();
    let mut used_names = HashSet::new();
    let mut sections = String::new();
    for m in &matrices {
        let heading = format!("{} · {}", m.scenario, m.call_mode);
        let _ = write!(
            sections,
            "<section><h3>{}</h3><div class=\"charts\">",
            xml_escape(&heading)
        );
        type Metric = fn(&SceneResult) -> f64;
        let metrics: [(&str, &str, Metric); 2] = [
            ("tps", "TPS (requests/s)", |s| s.tps),
            ("p99", "p99 latency (ms)", |s| s.p99_ms),
        ];
        for (key, y_label, metric) in metrics {
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
                "{} {} — {} by {}",
                m.scenario,
                m.call_mode,
                if key == "tps" { "TPS" } else { "p99" },
                compare_by
            );
            let svg = svg_chart(&title, x_by, y_label, &series);
            let base = slugify(&format!(
                "{}-{}-{}-{}",
                m.scenario, m.call_mode, compare_by, key
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
            let _ = write!(
                sections,
                "<figure>{svg}<figcaption>{}</figcaption></figure>",
                xml_escape(&name)
            );
        }
        sections.push_str("</div></section>\n");
    }

    let html = html_page(meta, scenes, compare_by, &sections);
    let path = dir.join("report.html");
    std::fs::write(&path, html)?;
    written.push(path);
    Ok(written)
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

const CSS: &str =
    "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}\
h1{margin-bottom:4px}.meta{color:#555;margin-top:0}\
table{border-collapse:collapse;font-size:12px;margin:12px 0}\
th,td{border:1px solid #ddd;padding:3px 6px;text-align:right;white-space:nowrap}\
th{background:#f3f3f3;position:sticky;top:0}td.t{text-align:left}\
tr:nth-child(even) td{background:#fafafa}\
.charts{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0}\
figcaption{font-size:11px;color:#777;text-align:center}\
.scroll{overflow-x:auto}";

fn html_page(
    meta: &ReportMeta,
    scenes: &[SceneResult],
    compare_by: &str,
    sections: &str,
) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{t}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{t}</h1>\n<p class=\"meta\">Date: {d}<br>Machine: {m}</p>\n",
        t = xml_escape(&meta.title),
        d = xml_escape(&meta.date),
        m = xml_escape(&meta.machine)
    );
    for (heading, text) in &meta.notes {
        let _ = writeln!(
            h,
            "<h2>{}</h2>\n<pre>{}</pre>",
            xml_escape(heading),
            xml_escape(text)
        );
    }
    let _ = writeln!(h, "<h2>Scenes ({})</h2>", scenes.len());
    h.push_str("<div class=\"scroll\"><table id=\"scenes\">\n<thead><tr>");
    for col in [
        "scene",
        "player",
        "scenario",
        "c",
        "n",
        "call",
        "connect",
        "conns",
        "write",
        "dispatch",
        "queue",
        "serializer",
        "payload B",
        "TPS",
        "TPS min–max",
        "best TPS",
        "avg ms",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p999 ms",
        "max ms",
        "errors",
        "error %",
        "runtime ms",
        "server CPU µs/call",
        "server segments/call",
        "extra",
    ] {
        let _ = write!(h, "<th>{}</th>", xml_escape(col));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for s in scenes {
        let text = |v: &str| format!("<td class=\"t\">{}</td>", xml_escape(v));
        let num = |v: String| format!("<td>{}</td>", xml_escape(&v));
        let extra = s
            .extra
            .iter()
            .map(|(k, v)| format!("{k}={}", fmt_value(*v)))
            .collect::<Vec<_>>()
            .join("; ");
        h.push_str("<tr>");
        h.push_str(&text(&s.name()));
        h.push_str(&text(&s.player));
        h.push_str(&text(&s.scenario));
        h.push_str(&num(s.concurrency.to_string()));
        h.push_str(&num(s.requests.to_string()));
        h.push_str(&text(&s.call_mode));
        h.push_str(&text(&s.connect_type));
        h.push_str(&num(s.connections.to_string()));
        h.push_str(&text(&s.write_mode));
        h.push_str(&text(&s.dispatch));
        h.push_str(&text(&s.queue));
        h.push_str(&text(&s.serializer));
        h.push_str(&num(s.payload.to_string()));
        let x = |k: &str| s.extra.get(k).copied();
        h.push_str(&num(format!("{:.0}", s.tps)));
        h.push_str(&num(match (x("tps_min"), x("tps_max")) {
            (Some(lo), Some(hi)) => format!("{lo:.0}–{hi:.0}"),
            _ => String::new(),
        }));
        h.push_str(&num(x("tps_best")
            .map(|v| format!("{v:.0}"))
            .unwrap_or_default()));
        h.push_str(&num(fmt_ms(s.avg_ms)));
        h.push_str(&num(fmt_ms(s.p50_ms)));
        h.push_str(&num(fmt_ms(s.p90_ms)));
        h.push_str(&num(fmt_ms(s.p99_ms)));
        h.push_str(&num(fmt_ms(s.p999_ms)));
        h.push_str(&num(fmt_ms(s.max_ms)));
        h.push_str(&num(s.errors.to_string()));
        h.push_str(&num(format!("{:.2}", s.error_pct())));
        h.push_str(&num(format!("{:.0}", s.runtime_ms)));
        h.push_str(&num(x("server_cpu_us_per_call")
            .map(|v| format!("{v:.1}"))
            .unwrap_or_default()));
        h.push_str(&num(x("server_segments_per_call")
            .map(|v| format!("{v:.2}"))
            .unwrap_or_default()));
        h.push_str(&text(&extra));
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
    let _ = writeln!(
        h,
        "<h2>Charts (compared by {})</h2>",
        xml_escape(compare_by)
    );
    if sections.is_empty() {
        h.push_str("<p>No scenes.</p>\n");
    }
    h.push_str(sections);
    h.push_str("</body>\n</html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temp dir removed on drop.
    struct TempDir(PathBuf);
    impl TempDir {
        fn new(tag: &str) -> Self {
            let nanos = SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let dir = std::env::temp_dir()
                .join(format!("brisk-report-{tag}-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("create temp dir");
            TempDir(dir)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Minimal well-formedness check: tags balance, attributes are quoted, one root.
    fn check_xml(doc: &str) -> Result<String, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut root = None;
        let mut rest = doc.trim();
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            if stack.is_empty() && !text.trim().is_empty() {
                return Err(format!("text outside root: {text:?}"));
            }
            if text.contains('&') && !text.contains(';') {
                return Err("bare &".into());
            }
            let end = rest[start..].find('>').ok_or("unterminated tag")? + start;
            let tag = &rest[start + 1..end];
            if tag.matches('"').count() & 1 == 1 {
                return Err(format!("unbalanced quotes in {tag:?}"));
            }
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or("close without open")?;
                if open != name.trim() {
                    return Err(format!("</{name}> closes <{open}>"));
                }
            } else if !tag.ends_with('/') {
                let name: String = tag.chars().take_while(|c| !c.is_whitespace()).collect();
                if stack.is_empty() {
                    if root.is_some() {
                        return Err("second root".into());
                    }
                    root = Some(name.clone());
                }
                stack.push(name);
            } else if stack.is_empty() {
                return Err("self-closing root".into());
            }
            rest = &rest[end + 1..];
        }
        if !stack.is_empty() {
            return Err(format!("unclosed {stack:?}"));
        }
        root.ok_or_else(|| "no root".into())
    }

    fn scene(conn: &str, c: u32, tps: f64, p99: f64) -> SceneResult {
        let mut s = SceneResult::new("brisk", "nth", c, 100_000, "async");
        s.connect_type = conn.into();
        s.connections = 10;
        s.tps = tps;
        s.p99_ms = p99;
        s.succeeded = 100_000;
        s.runtime_ms = (100_000.0 / tps * 1e6).round() / 1e3;
        s
    }

    fn scenes() -> Vec<SceneResult> {
        let mut v = Vec::new();
        for (conn, tps) in [
            ("reused", [26432.0, 62182.0, 59880.0, 56957.0]),
            ("pooled", [27828.0, 89290.0, 72562.0, 69061.0]),
            ("fixed", [20081.0, 139382.0, 182055.0, 170785.0]),
        ] {
            for (i, c) in [1, 20, 50, 100].into_iter().enumerate() {
                v.push(scene(conn, c, tps[i], 0.5 + i as f64));
            }
        }
        let mut db = scene("fixed", 20, 20528.0, 4.0);
        db.scenario = "db".into();
        db.call_mode = "sync".into();
        db.extra.insert("server_cpu_pct".into(), 91.25);
        v.push(db);
        v
    }

    #[test]
    fn csv_header_and_quoting() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field(" padded"), "\" padded\"");
        let mut v = scenes();
        v[0].serializer = "json, \"pretty\"".into();
        let csv = csv_string(&v);
        let mut lines = csv.lines();
        let header = lines.next().expect("header");
        assert!(header.starts_with("player,scenario,concurrency,requests,call_mode,connect_type,"));
        assert!(header.contains(",bucket_0_1ms,"));
        assert!(header.ends_with(",bucket_gt_1000ms,extra_server_cpu_pct"));
        let cols = header.split(',').count();
        let first = lines.next().expect("row");
        assert!(first.contains(",\"json, \"\"pretty\"\"\","), "{first}");
        assert!(first.ends_with(','), "missing extra is empty: {first}");
        assert_eq!(csv.lines().count(), v.len() + 1);
        let last = csv.lines().last().expect("last");
        assert_eq!(last.split(',').count(), cols);
        assert!(last.ends_with(",91.25"));
    }

    #[test]
    fn json_file_round_trip() {
        let tmp = TempDir::new("json");
        let v = scenes();
        let path = write_json(&tmp.0, &v).expect("write json");
        assert_eq!(path, tmp.0.join("results.json"));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.trim_start().starts_with('['));
        let back: Vec<SceneResult> = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, v);
        let csv = write_csv(&tmp.0, &v).expect("write csv");
        assert!(csv.exists());
    }

    #[test]
    fn svg_has_one_polyline_per_series_and_parses() {
        let series = vec![
            (
                "reused".to_owned(),
                vec![(1.0, 26432.0), (100.0, 56957.0), (20.0, 62182.0)],
            ),
            (
                "fixed <&>".to_owned(),
                vec![(1.0, 20081.0), (20.0, 139382.0)],
            ),
            ("empty".to_owned(), vec![]),
        ];
        let svg = svg_chart("TPS by \"connect\"", "concurrency", "TPS", &series);
        assert!(svg.starts_with("<svg "));
        assert_eq!(check_xml(&svg), Ok("svg".to_owned()));
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.contains("fixed &lt;&amp;&gt;"));
        assert!(svg.contains(">100<"), "x tick labels");
        assert!(svg.contains(">150,000<"), "y tick labels");
        // Points are sorted by x within a polyline: 1, 20, 100.
        let reused = svg
            .split("<polyline")
            .nth(1)
            .and_then(|p| p.split("points=\"").nth(1))
            .and_then(|p| p.split('"').next())
            .expect("points");
        let xs: Vec<f64> = reused
            .split(' ')
            .map(|xy| {
                xy.split(',')
                    .next()
                    .and_then(|x| x.parse().ok())
                    .expect("x")
            })
            .collect();
        assert_eq!(xs.len(), 3);
        assert!(xs[0] < xs[1] && xs[1] < xs[2]);
    }

    #[test]
    fn svg_edge_cases() {
        let none = svg_chart("empty", "x", "y", &[]);
        assert_eq!(check_xml(&none), Ok("svg".to_owned()));
        assert!(none.contains("no data"));
        assert_eq!(none.matches("<polyline").count(), 0);

        let one = svg_chart("one", "x", "y", &[("s".to_owned(), vec![(50.0, 0.25)])]);
        assert_eq!(check_xml(&one), Ok("svg".to_owned()));
        assert_eq!(one.matches("<polyline").count(), 1);
        assert_eq!(one.matches("<circle").count(), 2); // marker + legend
        assert!(!one.contains("NaN") && !one.contains("inf"));

        let flat = svg_chart(
            "zeros",
            "x",
            "y",
            &[(
                "z".to_owned(),
                vec![(1.0, 0.0), (2.0, 0.0), (f64::NAN, 1.0)],
            )],
        );
        assert_eq!(check_xml(&flat), Ok("svg".to_owned()));
        assert!(!flat.contains("NaN"));
    }

    #[test]
    fn axis_math() {
        assert_eq!(nice_axis(1.0, 100.0), (0.0, 100.0, 20.0));
        assert_eq!(nice_axis(0.0, 182_055.0), (0.0, 200_000.0, 50_000.0));
        let (lo, hi, _) = nice_axis(5.0, 5.0);
        assert!(lo < 5.0 && hi > 5.0);
        assert_eq!(fmt_tick(0.30000000000000004, 0.1), "0.3");
        assert_eq!(fmt_tick(150_000.0, 50_000.0), "150,000");
        assert_eq!(
            slugify("nth · async / Connect_Type"),
            "nth-async-connect-type"
        );
        assert_eq!(slugify("***"), "chart");
    }

    #[test]
    fn html_report_with_inline_charts() {
        let tmp = TempDir::new("html");
        let meta = ReportMeta::new(
            "brisk connection <types>",
            "2026-01-01 00:00:00 UTC",
            "test box",
        );
        let files = write_charts_and_html(&tmp.0, &meta, &scenes(), "connect_type").expect("write");
        // Two matrices (nth/async, db/sync) × 2 charts + report.html.
        assert_eq!(files.len(), 5);
        let names: Vec<String> = files
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            names,
            [
                "nth-async-connect-type-tps.svg",
                "nth-async-connect-type-p99.svg",
                "db-sync-connect-type-tps.svg",
                "db-sync-connect-type-p99.svg",
                "report.html"
            ]
        );
        for f in &files {
            assert!(f.exists(), "{f:?}");
        }
        let svg = std::fs::read_to_string(&files[0]).expect("svg");
        assert_eq!(check_xml(&svg), Ok("svg".to_owned()));
        assert_eq!(svg.matches("<polyline").count(), 3);
        let html = std::fs::read_to_string(&files[4]).expect("html");
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<table id=\"scenes\">"));
        assert!(html.contains("brisk-nth-c100-n100000-async"));
        assert!(html.contains("brisk connection &lt;types&gt;"));
        assert!(html.contains("2026-01-01 00:00:00 UTC"));
        assert!(html.contains("test box"));
        assert!(html.contains("server_cpu_pct=91.25"));
        assert_eq!(html.matches("<svg").count(), 4);
        assert!(!html.contains(".svg\""), "SVGs must be inline, not linked");
        assert!(html.contains("<style>"));
    }

    #[test]
    fn duplicates_keep_largest_run_and_bad_options_error() {
        let tmp = TempDir::new("dups");
        let mut v = vec![
            scene("fixed", 20, 1000.0, 1.0),
            scene("fixed", 20, 2000.0, 1.0),
        ];
        v[0].requests = 10_000;
        let matrices = build_matrices(&v, "connect_type", "concurrency").expect("ok");
        assert_eq!(matrices.len(), 1);
        assert_eq!(matrices[0].series[0].1.len(), 1);
        assert_eq!(matrices[0].series[0].1[0].1.tps, 2000.0);

        let meta = ReportMeta::new("t", "d", "m");
        let err = write_charts_and_html(&tmp.0, &meta, &v, "colour").expect_err("bad option");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let err =
            write_charts_and_html_with_x(&tmp.0, &meta, &v, "queue", "queue").expect_err("bad x");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);

        let all = write_all(&tmp.0, &meta, &v, "player").expect("write all");
        assert_eq!(all.len(), 5);
        let empty = write_charts_and_html(&tmp.0, &meta, &[], "queue").expect("empty");
        assert_eq!(empty.len(), 1);
    }
}
