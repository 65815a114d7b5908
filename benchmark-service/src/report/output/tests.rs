//! Tests of the result files: the CSV columns and quoting, the charts' content, the HTML
//! page and the file set written per run.

use std::time::SystemTime;

use super::chart::{fmt_tick, nice_axis};
use super::*;

/// A temp dir removed on drop.
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("brisk-report-{tag}-{}-{nanos}", std::process::id()));
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

/// How `results.csv` writes one text field: the serializer column of a one-scene table.
fn csv_field(field: &str) -> String {
    let row = |serializer: &str| {
        let mut s = scene("fixed", 1, 1.0, 1.0);
        s.serializer = serializer.into();
        let csv = csv_string(&[s]).expect("csv");
        csv.split_once('\n').expect("header").1.to_owned()
    };
    let marked = row("MARK");
    let (before, after) = marked.split_once("MARK").expect("mark");
    row(field)
        .strip_prefix(before)
        .and_then(|t| t.strip_suffix(after))
        .expect("the field in its column")
        .to_owned()
}

#[test]
fn csv_header_and_quoting() {
    assert_eq!(csv_field("plain"), "plain");
    assert_eq!(csv_field("a,b"), "\"a,b\"");
    assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
    // RFC 4180: spaces are part of a field; they are kept, unquoted, and read back as they
    // were.
    assert_eq!(csv_field(" padded"), " padded");
    let mut v = scenes();
    v[0].serializer = "json, \"pretty\"".into();
    let csv = csv_string(&v).expect("csv");
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
fn csv_reads_back_field_for_field() {
    let mut v = scenes();
    v[0].serializer = " padded, \"quoted\"\nand two lines ".into();
    v[1].tps = f64::NAN;
    let csv = csv_string(&v).expect("csv");
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header = reader.headers().expect("header").clone();
    let column = |name: &str| header.iter().position(|h| h == name).expect(name);
    let rows: Vec<csv::StringRecord> = reader.records().collect::<Result<_, _>>().expect("rows");
    assert_eq!(rows.len(), v.len());
    assert_eq!(&rows[0][column("serializer")], v[0].serializer);
    assert_eq!(&rows[0][column("tps")], "26432");
    assert_eq!(&rows[1][column("tps")], "", "non-finite is empty");
    assert_eq!(&rows[12][column("extra_server_cpu_pct")], "91.25");
    assert!(rows.iter().all(|r| r.len() == header.len()));
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

/// The text of every `<text>` element (as escaped in the SVG), trimmed.
fn texts(svg: &str) -> Vec<&str> {
    svg.split("<text")
        .skip(1)
        .filter_map(|rest| rest.split_once('>'))
        .filter_map(|(_, body)| body.split("</text>").next())
        .map(str::trim)
        .collect()
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
    let svg = svg_chart("TPS by \"connect\"", "concurrency", "TPS", &series).expect("svg");
    assert!(svg.starts_with("<svg "));
    assert_eq!(check_xml(&svg), Ok("svg".to_owned()));
    assert_eq!(svg.matches("<polyline").count(), 3);
    assert!(svg.contains("fixed &lt;&amp;&gt;"));
    let labels = texts(&svg);
    for name in ["reused", "fixed &lt;&amp;&gt;", "empty"] {
        assert!(labels.contains(&name), "legend {name}: {labels:?}");
    }
    assert!(labels.contains(&"TPS by &quot;connect&quot;"), "title");
    assert!(
        labels.contains(&"concurrency") && labels.contains(&"TPS"),
        "axis labels"
    );
    assert!(labels.contains(&"100"), "x tick labels");
    assert!(labels.contains(&"150,000"), "y tick labels");
    // Points are sorted by x within a polyline: 1, 20, 100.
    let reused = svg
        .split("<polyline")
        .nth(1)
        .and_then(|p| p.split("points=\"").nth(1))
        .and_then(|p| p.split('"').next())
        .expect("points");
    let xs: Vec<f64> = reused
        .split_whitespace()
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
    let none = svg_chart("empty", "x", "y", &[]).expect("svg");
    assert_eq!(check_xml(&none), Ok("svg".to_owned()));
    assert!(texts(&none).contains(&"no data"));
    assert_eq!(none.matches("<polyline").count(), 0);

    let one = svg_chart("one", "x", "y", &[("s".to_owned(), vec![(50.0, 0.25)])]).expect("svg");
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
    )
    .expect("svg");
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
    let err = write_charts_and_html_with_x(&tmp.0, &meta, &v, "queue", "queue").expect_err("bad x");
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);

    let all = write_all(&tmp.0, &meta, &v, "player").expect("write all");
    assert_eq!(all.len(), 5);
    let empty = write_charts_and_html(&tmp.0, &meta, &[], "queue").expect("empty");
    assert_eq!(empty.len(), 1);
}

#[test]
fn payload_kinds_get_charts_of_their_own_unless_compared() {
    let tmp = TempDir::new("kinds");
    let mut v = Vec::new();
    for kind in ["text", "random"] {
        for compression in ["none", "zstd"] {
            for payload in [1024, 10_240] {
                let mut s = scene("fixed", 2, 1000.0, 1.0);
                s.scenario = "echo".into();
                s.call_mode = "sync".into();
                s.payload = payload;
                s.payload_kind = kind.into();
                s.compression = compression.into();
                v.push(s);
            }
        }
    }
    // By compression: a matrix per kind, two series of two sizes each (none lost).
    let by_compression = build_matrices(&v, "compression", "payload").expect("ok");
    assert_eq!(by_compression.len(), 2);
    for m in &by_compression {
        assert_eq!(m.series.len(), 2);
        assert!(m.series.iter().all(|(_, points)| points.len() == 2));
    }
    assert_eq!(by_compression[1].name_parts(), ["echo", "sync", "random"]);
    // By kind (with compression): one matrix, a series per kind × compression.
    let by_kind = build_matrices(&v, "payload_kind+compression", "payload").expect("ok");
    assert_eq!(by_kind.len(), 1);
    assert_eq!(by_kind[0].name_parts(), ["echo", "sync"]);
    let series: Vec<&str> = by_kind[0].series.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        series,
        ["text none", "text zstd", "random none", "random zstd"]
    );

    let meta = ReportMeta::new("compression", "d", "m");
    let files = write_all(&tmp.0, &meta, &v, "compression").expect("write");
    let names: Vec<String> = files
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    assert!(names.contains(&"echo-sync-text-compression-tps.svg".to_owned()));
    assert!(names.contains(&"echo-sync-random-compression-p99.svg".to_owned()));
    // The CSV and the HTML table carry both options, after the older columns.
    let csv = std::fs::read_to_string(tmp.0.join("results.csv")).expect("csv");
    let header = csv.lines().next().expect("header");
    assert!(
        header.contains(",runtime_ms,compression,payload_kind,volo_transport,bucket_0_1ms,"),
        "{header}"
    );
    assert!(csv.lines().nth(5).expect("row").contains(",none,random,"));
    let html = std::fs::read_to_string(tmp.0.join("report.html")).expect("html");
    assert!(html.contains("<th>extra</th><th>compression</th><th>payload kind</th>"));
    assert!(html.contains("brisk-echo-c2-n100000-sync-random-zstd"));
    assert!(html.contains("<h3>echo · sync · text</h3>"));
}
