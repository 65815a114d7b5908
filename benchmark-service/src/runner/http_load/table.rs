//! Seed 001's table: binary and HTTP scenes as columns, requests/s, mean time per request,
//! failed requests and the 50 … 100 % rows (ms) as rows — the layout ApacheBench prints, so the
//! numbers compare directly with seed 001's.

use std::fmt::Write as _;

use crate::report::SceneResult;

use super::parse::PERCENTAGES;
use super::scenes::percentage_key;

/// A column heading for `s` in [`seed001_table`].
fn column_name(s: &SceneResult) -> String {
    match (s.connect_type.as_str(), s.scenario.as_str()) {
        ("http", "http-ab") => "HTTP ab".to_owned(),
        ("http", "http-ab-k") => "HTTP ab -k".to_owned(),
        ("http", "http-wrk") => "HTTP wrk".to_owned(),
        ("http", other) => format!("HTTP {other}"),
        ("percall", _) => "binary per-call".to_owned(),
        ("fixed" | "pooled", _) => {
            format!("binary persistent ({}/{})", s.connect_type, s.connections)
        }
        (other, _) => format!("binary {other}"),
    }
}

/// Seed 001's numbers side by side: a column per scene that has them (the binary scenes of a
/// run with [`Plan::http_load`](crate::runner::Plan::http_load) and the HTTP tool runs), rows
/// requests/s, time per request (mean, ms), failed requests and the 50 … 100 % table (ms;
/// `-` where a tool does not report that percentage). `None` when no scene came from an HTTP
/// tool.
pub fn seed001_table(scenes: &[SceneResult]) -> Option<String> {
    if !scenes.iter().any(|s| s.connect_type == "http") {
        return None;
    }
    let columns: Vec<&SceneResult> = scenes
        .iter()
        .filter(|s| s.connect_type == "http" || s.extra.contains_key(&percentage_key(50)))
        .collect();
    let dispatches: std::collections::BTreeSet<&str> =
        columns.iter().map(|s| s.dispatch.as_str()).collect();
    let mut header = vec![String::new()];
    header.extend(columns.iter().map(|s| {
        let name = column_name(s);
        if dispatches.len() > 1 && !s.dispatch.is_empty() {
            format!(
                "{name} [{}{}{}]",
                s.dispatch,
                if s.queue.is_empty() { "" } else { "/" },
                s.queue
            )
        } else {
            name
        }
    }));
    let mut rows = vec![header];
    let row = |label: &str, f: &dyn Fn(&SceneResult) -> String| {
        let mut r = vec![label.to_owned()];
        r.extend(columns.iter().map(|s| f(s)));
        r
    };
    rows.push(row("Requests per second", &|s| format!("{:.2}", s.tps)));
    rows.push(row("Time per request (mean, ms)", &|s| {
        format!("{:.3}", s.avg_ms)
    }));
    rows.push(row("Failed requests", &|s| s.errors.to_string()));
    for p in PERCENTAGES {
        let key = percentage_key(p);
        rows.push(row(&format!("{p:>3}%"), &|s| {
            s.extra
                .get(&key)
                .map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
        }));
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (n, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        if n == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            let _ = writeln!(out, "{}", rule.join("  "));
        }
    }
    Some(out)
}
