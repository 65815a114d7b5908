//! `report.html`: one self-contained page with the run's header, its notes, a table of all
//! scenes and the charts.
//!
//! The page is a small hand-written template: inline CSS and the SVG charts embedded inline
//! (not linked), so the single file can be mailed or attached to CI artifacts and still
//! render. Every piece of text that comes from the run (title, notes, scene fields, series
//! names, file names) passes through [`xml_escape`]; only the SVGs, which plotters has
//! already escaped, are inserted as markup.

use std::fmt::Write as _;
use std::time::SystemTime;

use crate::report::dubbo::TestEnvironment;
use crate::report::progress::utc_datetime;
use crate::report::scene::{fmt_ms, SceneResult};

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

/// The charts of one matrix as the page shows them: a heading, then each chart's SVG with
/// its file name as the caption.
pub(super) struct MatrixCharts {
    pub(super) heading: String,
    /// (file name, SVG document).
    pub(super) charts: Vec<(String, String)>,
}

/// Escapes text for XML/HTML content and attribute values.
pub(super) fn xml_escape(text: &str) -> String {
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

/// An `extra` value in the table: whole numbers from 1000, otherwise 2 or 3 decimals.
fn fmt_value(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
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

/// The scene table's column headings, in order.
const TABLE_COLUMNS: [&str; 32] = [
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
    "msgs/s",
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
    "compression",
    "payload kind",
    "volo transport",
];

/// The whole page.
pub(super) fn html_page(
    meta: &ReportMeta,
    scenes: &[SceneResult],
    compare_by: &str,
    matrices: &[MatrixCharts],
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
    for col in TABLE_COLUMNS {
        let _ = write!(h, "<th>{}</th>", xml_escape(col));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for s in scenes {
        push_scene_row(&mut h, s);
    }
    h.push_str("</tbody></table></div>\n");
    let _ = writeln!(
        h,
        "<h2>Charts (compared by {})</h2>",
        xml_escape(compare_by)
    );
    if matrices.is_empty() {
        h.push_str("<p>No scenes.</p>\n");
    }
    for m in matrices {
        let _ = write!(
            h,
            "<section><h3>{}</h3><div class=\"charts\">",
            xml_escape(&m.heading)
        );
        for (name, svg) in &m.charts {
            let _ = write!(
                h,
                "<figure>{svg}<figcaption>{}</figcaption></figure>",
                xml_escape(name)
            );
        }
        h.push_str("</div></section>\n");
    }
    h.push_str("</body>\n</html>\n");
    h
}

/// One `<tr>` of the scene table, one cell per [`TABLE_COLUMNS`] entry (the array type
/// checks the count).
fn push_scene_row(h: &mut String, s: &SceneResult) {
    let text = |v: &str| format!("<td class=\"t\">{}</td>", xml_escape(v));
    let num = |v: String| format!("<td>{}</td>", xml_escape(&v));
    let x = |k: &str| s.extra.get(k).copied();
    let extra = s
        .extra
        .iter()
        .map(|(k, v)| format!("{k}={}", fmt_value(*v)))
        .collect::<Vec<_>>()
        .join("; ");
    let cells: [String; TABLE_COLUMNS.len()] = [
        text(&s.name()),
        text(&s.player),
        text(&s.scenario),
        num(s.concurrency.to_string()),
        num(s.requests.to_string()),
        text(&s.call_mode),
        text(&s.connect_type),
        num(s.connections.to_string()),
        text(&s.write_mode),
        text(&s.dispatch),
        text(&s.queue),
        text(&s.serializer),
        num(s.payload.to_string()),
        num(format!("{:.0}", s.tps)),
        num(match (x("tps_min"), x("tps_max")) {
            (Some(lo), Some(hi)) => format!("{lo:.0}–{hi:.0}"),
            _ => String::new(),
        }),
        num(x("tps_best").map(|v| format!("{v:.0}")).unwrap_or_default()),
        // The streams: calls/s × the messages each call moved (empty for unary scenes).
        num(x("msgs_per_s")
            .map(|v| format!("{v:.0}"))
            .unwrap_or_default()),
        num(fmt_ms(s.avg_ms)),
        num(fmt_ms(s.p50_ms)),
        num(fmt_ms(s.p90_ms)),
        num(fmt_ms(s.p99_ms)),
        num(fmt_ms(s.p999_ms)),
        num(fmt_ms(s.max_ms)),
        num(s.errors.to_string()),
        num(format!("{:.2}", s.error_pct())),
        num(format!("{:.0}", s.runtime_ms)),
        num(x("server_cpu_us_per_call")
            .map(|v| format!("{v:.1}"))
            .unwrap_or_default()),
        num(x("server_segments_per_call")
            .map(|v| format!("{v:.2}"))
            .unwrap_or_default()),
        text(&extra),
        text(&s.compression),
        text(&s.payload_kind),
        text(&s.volo_transport),
    ];
    h.push_str("<tr>");
    for cell in cells {
        h.push_str(&cell);
    }
    h.push_str("</tr>\n");
}
