//! Seed 001 over HTTP: the `keepalive` preset's second half.
//!
//! Seed 001 measured an HTTP service with ApacheBench, once opening a connection per request
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
//! wrk 4.x output. Results become [`SceneResult`]s with connect type `http` and the table
//! percentages in `extra` (`p50_ms` … `p100_ms`, see [`percentage_key`]); [`seed001_table`]
//! prints them next to the binary scenes in seed 001's layout.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::report::stats::duration_ms;
use crate::report::{LatencyRecorder, SceneResult};

/// The rows of ApacheBench's "Percentage of the requests served within a certain time" table.
pub const PERCENTAGES: [u32; 9] = [50, 66, 75, 80, 90, 95, 98, 99, 100];

/// Requests per `ab` run (`-n`), as in seed 001.
pub const AB_REQUESTS: u64 = 10_000;

/// Concurrent clients (`ab -c`, `wrk -c`), as in seed 001.
pub const CONCURRENCY: u32 = 10;

/// How long `wrk` runs (`-d`), in seconds.
pub const WRK_SECONDS: u64 = 5;

/// The HTTP/JSON path of `BenchmarkService::do_nothing` (the `nth` scenario).
pub const NTH_PATH: &str = "/BenchmarkService/do_nothing";

/// An `ab` run that takes longer than this is killed and skipped.
const AB_TIMEOUT: Duration = Duration::from_secs(180);

/// A `wrk` run that takes longer than this (its duration plus slack) is killed and skipped.
const WRK_TIMEOUT: Duration = Duration::from_secs(WRK_SECONDS + 60);

/// The wrk script: POST `[]` as JSON.
const WRK_SCRIPT: &str = "-- brisk: POST an empty JSON argument list\n\
wrk.method = \"POST\"\n\
wrk.body = \"[]\"\n\
wrk.headers[\"Content-Type\"] = \"application/json\"\n";

/// The `extra` key of a table percentage, e.g. `p66_ms` for 66 %.
pub fn percentage_key(percent: u32) -> String {
    format!("p{percent}_ms")
}

/// Seed 001's table percentages of a binary scene's latencies, as `extra` entries (ms; 100 %
/// is the maximum). Empty when nothing succeeded.
pub fn recorder_percentages(rec: &LatencyRecorder) -> Vec<(String, f64)> {
    if rec.succeeded() == 0 {
        return Vec::new();
    }
    PERCENTAGES
        .iter()
        .map(|&p| {
            let ms = if p == 100 {
                duration_ms(rec.max())
            } else {
                rec.quantile_ms(f64::from(p) / 100.0)
            };
            (percentage_key(p), round3(ms))
        })
        .collect()
}

/// What an ApacheBench run reported.
#[derive(Debug, Clone, PartialEq)]
pub struct AbReport {
    /// `Complete requests`.
    pub complete: u64,
    /// `Failed requests` (connect, receive, length and exception failures).
    pub failed: u64,
    /// `Non-2xx responses` (0 when ab printed no such line).
    pub non_2xx: u64,
    /// `Time taken for tests`, seconds.
    pub time_taken_s: f64,
    /// `Requests per second … (mean)`.
    pub requests_per_second: f64,
    /// `Time per request … (mean)` — the latency a client sees, ms (not the
    /// "across all concurrent requests" line).
    pub time_per_request_ms: f64,
    /// The minimum of the `Total:` row of the connection times, ms, when printed.
    pub min_ms: Option<f64>,
    /// The percentage table: (percent, ms), in ab's order.
    pub percentages: Vec<(u32, f64)>,
}

impl AbReport {
    /// The table value for `percent`, if ab printed it.
    pub fn percentage(&self, percent: u32) -> Option<f64> {
        lookup(&self.percentages, percent)
    }
}

/// What a wrk run reported.
#[derive(Debug, Clone, PartialEq)]
pub struct WrkReport {
    /// Requests completed (`N requests in Ts, …`).
    pub requests: u64,
    /// The run's duration, seconds (from the same line).
    pub duration_s: f64,
    /// `Requests/sec`.
    pub requests_per_second: f64,
    /// Thread stats latency average, ms.
    pub latency_avg_ms: f64,
    /// Thread stats latency standard deviation, ms.
    pub latency_stdev_ms: f64,
    /// Thread stats latency maximum, ms.
    pub latency_max_ms: f64,
    /// The `--latency` distribution: (percent, ms) — wrk prints 50, 75, 90 and 99.
    pub percentages: Vec<(u32, f64)>,
    /// Sum of the `Socket errors` line (connect, read, write, timeout).
    pub socket_errors: u64,
    /// `Non-2xx or 3xx responses` (0 when wrk printed no such line).
    pub non_2xx: u64,
}

impl WrkReport {
    /// The distribution value for `percent`, if wrk printed it.
    pub fn percentage(&self, percent: u32) -> Option<f64> {
        lookup(&self.percentages, percent)
    }
}

fn lookup(table: &[(u32, f64)], percent: u32) -> Option<f64> {
    table.iter().find(|(p, _)| *p == percent).map(|(_, v)| *v)
}

/// The first whitespace-separated token after `label` on a line starting with it.
fn value_after<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    line.trim_start()
        .strip_prefix(label)?
        .split_whitespace()
        .next()
}

/// Parses ApacheBench's output (2.x). Requires `Complete requests`, `Requests per second` and
/// the mean `Time per request`; everything else is optional. The error names what is missing
/// (ab prints only its error, e.g. `apr_socket_recv: Connection refused`, when it fails early).
pub fn parse_ab(text: &str) -> Result<AbReport, String> {
    let mut complete = None;
    let mut failed = 0;
    let mut non_2xx = 0;
    let mut time_taken_s = 0.0;
    let mut rps = None;
    let mut tpr = None;
    let mut min_ms = None;
    let mut percentages = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        if let Some(v) = value_after(line, "Complete requests:") {
            complete = v.parse::<u64>().ok();
        } else if let Some(v) = value_after(line, "Failed requests:") {
            failed = v.parse().unwrap_or(0);
        } else if let Some(v) = value_after(line, "Non-2xx responses:") {
            non_2xx = v.parse().unwrap_or(0);
        } else if let Some(v) = value_after(line, "Time taken for tests:") {
            time_taken_s = v.parse().unwrap_or(0.0);
        } else if let Some(v) = value_after(line, "Requests per second:") {
            rps = v.parse::<f64>().ok();
        } else if let Some(v) = value_after(line, "Time per request:") {
            // Two such lines; the first is "(mean)", the second "(mean, across all …)".
            if tpr.is_none() && !line.contains("across") {
                tpr = v.parse::<f64>().ok();
            }
        } else if let Some(v) = value_after(line, "Total:") {
            min_ms = v.parse::<f64>().ok();
        } else if line.starts_with("Percentage of the requests") {
            in_table = true;
        } else if in_table {
            let mut tokens = line.split_whitespace();
            let percent = tokens
                .next()
                .and_then(|t| t.strip_suffix('%'))
                .and_then(|t| t.parse::<u32>().ok());
            let ms = tokens.next().and_then(|t| t.parse::<f64>().ok());
            match (percent, ms) {
                (Some(p), Some(ms)) => percentages.push((p, ms)),
                _ => in_table = !line.trim().is_empty() && percentages.is_empty(),
            }
        }
    }
    let missing = |what: &str| format!("no `{what}` in ab's output");
    Ok(AbReport {
        complete: complete.ok_or_else(|| missing("Complete requests"))?,
        failed,
        non_2xx,
        time_taken_s,
        requests_per_second: rps.ok_or_else(|| missing("Requests per second"))?,
        time_per_request_ms: tpr.ok_or_else(|| missing("Time per request"))?,
        min_ms,
        percentages,
    })
}

/// A wrk duration (`412.35us`, `1.08ms`, `2.00s`, `1.50m`, `1.00h`) in ms.
fn parse_wrk_duration(token: &str) -> Option<f64> {
    let split = token.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = token.split_at(split);
    let value: f64 = number.parse().ok()?;
    let factor = match unit {
        "ns" => 1e-6,
        "us" => 1e-3,
        "ms" => 1.0,
        "s" => 1e3,
        "m" => 60e3,
        "h" => 3_600e3,
        _ => return None,
    };
    Some(value * factor)
}

/// Parses wrk's output (4.x, with or without `--latency`). Requires `Requests/sec` and the
/// `Latency` thread-stats line; the distribution, error lines and request count are optional.
pub fn parse_wrk(text: &str) -> Result<WrkReport, String> {
    let mut requests = 0;
    let mut duration_s = 0.0;
    let mut rps = None;
    let mut latency = None;
    let mut percentages = Vec::new();
    let mut socket_errors = 0;
    let mut non_2xx = 0;
    let mut in_distribution = false;
    for line in text.lines() {
        let trimmed = line.trim();
        let tokens: Vec<&str> = trimmed.split_whitespace().collect();
        if let Some(v) = value_after(trimmed, "Requests/sec:") {
            rps = v.parse::<f64>().ok();
        } else if tokens.first() == Some(&"Latency") && tokens.len() >= 4 {
            // "Latency   412.35us  201.18us   8.93ms   91.02%"
            let ms: Option<Vec<f64>> = tokens[1..4].iter().map(|t| parse_wrk_duration(t)).collect();
            if let Some(ms) = ms {
                latency = Some((ms[0], ms[1], ms[2]));
            }
        } else if trimmed == "Latency Distribution" {
            in_distribution = true;
        } else if in_distribution {
            let percent = tokens
                .first()
                .and_then(|t| t.strip_suffix('%'))
                .and_then(|t| t.parse::<f64>().ok());
            let ms = tokens.get(1).and_then(|t| parse_wrk_duration(t));
            match (percent, ms) {
                // wrk prints "50%", "75%", …; fractions ("99.9%") are not table rows.
                (Some(p), Some(ms)) if p.fract() == 0.0 => percentages.push((p as u32, ms)),
                (Some(_), Some(_)) => {}
                _ => in_distribution = false,
            }
        }
        if tokens.len() >= 4 && tokens[1] == "requests" && tokens[2] == "in" {
            // "120964 requests in 5.00s, 10.38MB read"
            requests = tokens[0].parse().unwrap_or(0);
            duration_s =
                parse_wrk_duration(tokens[3].trim_end_matches(',')).map_or(0.0, |ms| ms / 1000.0);
        } else if let Some(rest) = trimmed.strip_prefix("Socket errors:") {
            // "Socket errors: connect 0, read 3, write 0, timeout 0"
            socket_errors = rest
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum();
        } else if let Some(v) = value_after(trimmed, "Non-2xx or 3xx responses:") {
            non_2xx = v.parse().unwrap_or(0);
        }
    }
    let (latency_avg_ms, latency_stdev_ms, latency_max_ms) =
        latency.ok_or_else(|| "no `Latency` line in wrk's output".to_owned())?;
    Ok(WrkReport {
        requests,
        duration_s,
        requests_per_second: rps.ok_or_else(|| "no `Requests/sec` in wrk's output".to_owned())?,
        latency_avg_ms,
        latency_stdev_ms,
        latency_max_ms,
        percentages,
        socket_errors,
        non_2xx,
    })
}

/// Where the server of these results runs (copied into the scene results).
#[derive(Debug, Clone, Default)]
pub struct ServerLabels {
    /// Dispatch name (empty for a server the runner does not manage).
    pub dispatch: String,
    /// Queue name (empty for direct dispatch).
    pub queue: String,
}

fn http_scene(
    scenario: &str,
    requests: u64,
    connections: u32,
    labels: &ServerLabels,
) -> SceneResult {
    let mut s = SceneResult::new("brisk", scenario, CONCURRENCY, requests, "sync");
    s.connect_type = "http".to_owned();
    s.connections = connections;
    s.serializer = "json".to_owned();
    s.dispatch = labels.dispatch.clone();
    s.queue = labels.queue.clone();
    s
}

/// An `ab` run as a scene result (`p999_ms` stays 0: ab does not report it).
pub fn ab_scene(
    scenario: &str,
    keepalive: bool,
    ab: &AbReport,
    labels: &ServerLabels,
) -> SceneResult {
    let connections = if keepalive { CONCURRENCY } else { 1 };
    let mut s = http_scene(scenario, ab.complete, connections, labels);
    s.tps = ab.requests_per_second;
    s.avg_ms = ab.time_per_request_ms;
    s.min_ms = ab.min_ms.unwrap_or(0.0);
    s.p50_ms = ab.percentage(50).unwrap_or(0.0);
    s.p90_ms = ab.percentage(90).unwrap_or(0.0);
    s.p99_ms = ab.percentage(99).unwrap_or(0.0);
    s.max_ms = ab.percentage(100).unwrap_or(0.0);
    s.errors = ab.failed.saturating_add(ab.non_2xx);
    s.succeeded = ab.complete.saturating_sub(s.errors);
    s.runtime_ms = round3(ab.time_taken_s * 1000.0);
    for &(p, ms) in &ab.percentages {
        s.extra.insert(percentage_key(p), ms);
    }
    s
}

/// A `wrk` run as a scene result (`p999_ms` stays 0: wrk does not report it; 100 % is the
/// latency maximum).
pub fn wrk_scene(wrk: &WrkReport, labels: &ServerLabels) -> SceneResult {
    let mut s = http_scene("http-wrk", wrk.requests, CONCURRENCY, labels);
    s.tps = wrk.requests_per_second;
    s.avg_ms = wrk.latency_avg_ms;
    s.max_ms = wrk.latency_max_ms;
    s.p50_ms = wrk.percentage(50).unwrap_or(0.0);
    s.p90_ms = wrk.percentage(90).unwrap_or(0.0);
    s.p99_ms = wrk.percentage(99).unwrap_or(0.0);
    s.errors = wrk.socket_errors.saturating_add(wrk.non_2xx);
    s.succeeded = wrk.requests.saturating_sub(wrk.non_2xx);
    s.runtime_ms = round3(wrk.duration_s * 1000.0);
    for &(p, ms) in &wrk.percentages {
        s.extra.insert(percentage_key(p), round3(ms));
    }
    s.extra
        .insert(percentage_key(100), round3(wrk.latency_max_ms));
    s.extra
        .insert("latency_stdev_ms".to_owned(), round3(wrk.latency_stdev_ms));
    s
}

/// `name`'s path when an executable of that name is on `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

/// Runs `program args`, returns its stdout; an error (with the tail of its stderr) when it
/// cannot start, exits unsuccessfully or outlives `timeout` (then it is killed).
fn run_tool(program: &Path, args: &[String], timeout: Duration) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                text = String::from_utf8_lossy(&bytes).into_owned();
            }
            text
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("killed after {} s", timeout.as_secs()));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("cannot wait for it: {e}"));
            }
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let status = status?;
    if status.success() {
        Ok(stdout)
    } else {
        let tail: Vec<&str> = stderr
            .lines()
            .chain(stdout.lines())
            .filter(|l| !l.trim().is_empty() && !l.starts_with("Completed "))
            .collect();
        let tail = tail[tail.len().saturating_sub(3)..].join(" | ");
        Err(format!("exited with {status}: {tail}"))
    }
}

/// The temporary directory holding `body.json` and `post.lua`; removed on drop.
struct ToolFiles {
    dir: PathBuf,
}

impl ToolFiles {
    fn create() -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("brisk-http-load-{}", std::process::id()));
        let files = ToolFiles { dir };
        std::fs::create_dir_all(&files.dir)
            .and_then(|()| std::fs::write(files.body(), "[]"))
            .and_then(|()| std::fs::write(files.script(), WRK_SCRIPT))
            .map_err(|e| {
                format!(
                    "cannot write the request files into {}: {e}",
                    files.dir.display()
                )
            })?;
        Ok(files)
    }

    fn body(&self) -> PathBuf {
        self.dir.join("body.json")
    }

    fn script(&self) -> PathBuf {
        self.dir.join("post.lua")
    }
}

impl Drop for ToolFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `ab`, `ab -k` and `wrk` (those installed) against `http_addr`'s `nth` method and
/// returns a scene result per run that worked. Blocking (several seconds): call it from
/// `spawn_blocking`. Missing tools and failures are printed, never returned.
pub fn run_tools(http_addr: &str, labels: &ServerLabels, verbose: bool) -> Vec<SceneResult> {
    let url = format!("http://{http_addr}{NTH_PATH}");
    let mut scenes = Vec::new();
    let ab = find_on_path("ab");
    let wrk = find_on_path("wrk");
    if verbose {
        println!("\n=== HTTP/JSON: POST {url} with body []");
    }
    if ab.is_none() {
        println!("ab not installed (apt-get install apache2-utils) — skipped");
    }
    if wrk.is_none() {
        println!("wrk not installed (apt-get install wrk) — skipped");
    }
    if ab.is_none() && wrk.is_none() {
        return scenes;
    }
    let files = match ToolFiles::create() {
        Ok(f) => f,
        Err(e) => {
            println!("{e} — ab/wrk skipped");
            return scenes;
        }
    };
    if let Some(ab) = &ab {
        for keepalive in [false, true] {
            let scenario = if keepalive { "http-ab-k" } else { "http-ab" };
            let mut args: Vec<String> = Vec::new();
            if keepalive {
                args.push("-k".into());
            }
            args.extend([
                "-n".to_owned(),
                AB_REQUESTS.to_string(),
                "-c".to_owned(),
                CONCURRENCY.to_string(),
                "-p".to_owned(),
                files.body().display().to_string(),
                "-T".to_owned(),
                "application/json".to_owned(),
                url.clone(),
            ]);
            if verbose {
                println!("\n$ ab {}", args.join(" "));
            }
            match run_tool(ab, &args, AB_TIMEOUT).and_then(|out| parse_ab(&out)) {
                Ok(report) => {
                    let scene = ab_scene(scenario, keepalive, &report, labels);
                    if verbose {
                        println!("{}", tool_line(&scene));
                    }
                    scenes.push(scene);
                }
                Err(e) => println!("{scenario}: ab failed ({e}) — skipped"),
            }
        }
    }
    if let Some(wrk) = &wrk {
        let args: Vec<String> = vec![
            "-t1".into(),
            format!("-c{CONCURRENCY}"),
            format!("-d{WRK_SECONDS}s"),
            "--latency".into(),
            "-s".into(),
            files.script().display().to_string(),
            url.clone(),
        ];
        if verbose {
            println!("\n$ wrk {}", args.join(" "));
        }
        match run_tool(wrk, &args, WRK_TIMEOUT).and_then(|out| parse_wrk(&out)) {
            Ok(report) => {
                let scene = wrk_scene(&report, labels);
                if verbose {
                    println!("{}", tool_line(&scene));
                }
                scenes.push(scene);
            }
            Err(e) => println!("http-wrk: wrk failed ({e}) — skipped"),
        }
    }
    scenes
}

fn tool_line(s: &SceneResult) -> String {
    format!(
        "{}: {:.2} requests/s, {:.3} ms per request, {} requests, {} failed",
        s.scenario, s.tps, s.avg_ms, s.requests, s.errors
    )
}

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
/// run with [`Plan::http_load`](super::Plan::http_load) and the HTTP tool runs), rows
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

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ab -n 10000 -c 10 -p body.json -T application/json …` with ab 2.3 (Debian 12).
    const AB_SAMPLE: &str = "\
This is ApacheBench, Version 2.3 <$Revision: 1903618 $>
Copyright 1996 Adam Twiss, Zeus Technology Ltd, http://www.zeustech.net/
Licensed to The Apache Software Foundation, http://www.apache.org/

Benchmarking 127.0.0.1 (be patient)
Completed 1000 requests
Completed 2000 requests
Completed 3000 requests
Completed 4000 requests
Completed 5000 requests
Completed 6000 requests
Completed 7000 requests
Completed 8000 requests
Completed 9000 requests
Completed 10000 requests
Finished 10000 requests


Server Software:        
Server Hostname:        127.0.0.1
Server Port:            41327

Document Path:          /BenchmarkService/do_nothing
Document Length:        4 bytes

Concurrency Level:      10
Time taken for tests:   1.873 seconds
Complete requests:      10000
Failed requests:        0
Total transferred:      1030000 bytes
Total body sent:        1800000
HTML transferred:       40000 bytes
Requests per second:    5339.06 [#/sec] (mean)
Time per request:       1.873 [ms] (mean)
Time per request:       0.187 [ms] (mean, across all concurrent requests)
Transfer rate:          537.04 [Kbytes/sec] received
                        938.51 kb/s sent
                        1475.55 kb/s total

Connection Times (ms)
              min  mean[+/-sd] median   max
Connect:        0    1   0.3      1       4
Processing:     0    1   0.5      1       9
Waiting:        0    1   0.4      1       8
Total:          1    2   0.6      2      11

Percentage of the requests served within a certain time (ms)
  50%      2
  66%      2
  75%      2
  80%      2
  90%      3
  95%      3
  98%      4
  99%      5
 100%     11 (longest request)
";

    /// `ab -k …` with failures and non-2xx answers (ab 2.3).
    const AB_K_FAILURES_SAMPLE: &str = "\
This is ApacheBench, Version 2.3 <$Revision: 1903618 $>
Benchmarking 127.0.0.1 (be patient)
Finished 10000 requests


Concurrency Level:      10
Time taken for tests:   0.612 seconds
Complete requests:      10000
Failed requests:        12
   (Connect: 0, Receive: 0, Length: 12, Exceptions: 0)
Non-2xx responses:      7
Keep-Alive requests:    10000
Total transferred:      1180000 bytes
Requests per second:    16339.87 [#/sec] (mean)
Time per request:       0.612 [ms] (mean)
Time per request:       0.061 [ms] (mean, across all concurrent requests)
Transfer rate:          1882.86 [Kbytes/sec] received

Connection Times (ms)
              min  mean[+/-sd] median   max
Connect:        0    0   0.0      0       0
Processing:     0    1   0.3      1       6
Waiting:        0    1   0.3      1       6
Total:          0    1   0.3      1       6

Percentage of the requests served within a certain time (ms)
  50%      1
  66%      1
  75%      1
  80%      1
  90%      1
  95%      1
  98%      2
  99%      2
 100%      6 (longest request)
";

    /// `wrk -t1 -c10 -d5s --latency -s post.lua …` with wrk 4.1.0 (Debian 12).
    const WRK_SAMPLE: &str = "\
Running 5s test @ http://127.0.0.1:41327/BenchmarkService/do_nothing
  1 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   412.35us  201.18us   8.93ms   91.02%
    Req/Sec    24.31k     1.02k   26.11k    78.00%
  Latency Distribution
     50%  381.00us
     75%  452.00us
     90%  553.00us
     99%    1.08ms
  120964 requests in 5.00s, 10.38MB read
Requests/sec:  24192.35
Transfer/sec:      2.08MB
";

    /// wrk with errors and a slow tail (seconds).
    const WRK_ERRORS_SAMPLE: &str = "\
Running 5s test @ http://127.0.0.1:1/x
  1 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.21ms    3.40ms   1.02s    99.10%
    Req/Sec     8.01k   500.00     9.00k    70.00%
  Latency Distribution
     50%  800.00us
     75%    1.00ms
     90%    1.50ms
     99%   12.00ms
  40000 requests in 5.01s, 3.43MB read
  Socket errors: connect 0, read 3, write 1, timeout 2
  Non-2xx or 3xx responses: 5
Requests/sec:   7984.03
Transfer/sec:    701.71KB
";

    #[test]
    fn parses_ab() {
        let r = parse_ab(AB_SAMPLE).unwrap();
        assert_eq!(r.complete, 10_000);
        assert_eq!(r.failed, 0);
        assert_eq!(r.non_2xx, 0);
        assert_eq!(r.requests_per_second, 5339.06);
        assert_eq!(r.time_per_request_ms, 1.873);
        assert_eq!(r.time_taken_s, 1.873);
        assert_eq!(r.min_ms, Some(1.0));
        let expected: Vec<(u32, f64)> = PERCENTAGES
            .iter()
            .copied()
            .zip([2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 4.0, 5.0, 11.0])
            .collect();
        assert_eq!(r.percentages, expected);

        let s = ab_scene("http-ab", false, &r, &ServerLabels::default());
        assert_eq!((s.connect_type.as_str(), s.connections), ("http", 1));
        assert_eq!(
            (s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms),
            (2.0, 3.0, 5.0, 11.0)
        );
        assert_eq!((s.succeeded, s.errors), (10_000, 0));
        assert_eq!(s.extra.get("p66_ms"), Some(&2.0));
    }

    #[test]
    fn parses_ab_failures() {
        let r = parse_ab(AB_K_FAILURES_SAMPLE).unwrap();
        assert_eq!((r.failed, r.non_2xx), (12, 7));
        assert_eq!(r.time_per_request_ms, 0.612);
        assert_eq!(r.percentage(100), Some(6.0));
        let s = ab_scene("http-ab-k", true, &r, &ServerLabels::default());
        assert_eq!((s.succeeded, s.errors), (9_981, 19));
        assert_eq!(s.connections, CONCURRENCY);
    }

    #[test]
    fn ab_errors_are_reported_not_panics() {
        let refused = "This is ApacheBench, Version 2.3 <$Revision: 1903618 $>\n\
            Benchmarking 127.0.0.1 (be patient)\n\
            apr_socket_recv: Connection refused (111)\n";
        let e = parse_ab(refused).unwrap_err();
        assert!(e.contains("Complete requests"), "{e}");
        assert!(parse_ab("").is_err());
        // Garbage numbers are missing values, not panics.
        let garbage = "Complete requests: x\nRequests per second: y\nTime per request: z\n";
        assert!(parse_ab(garbage).is_err());
        // Truncated table: what is there is kept.
        let cut = AB_SAMPLE.split(" 95%").next().unwrap_or_default();
        assert_eq!(parse_ab(cut).unwrap().percentages.len(), 5);
    }

    #[test]
    fn parses_wrk() {
        let r = parse_wrk(WRK_SAMPLE).unwrap();
        assert_eq!(r.requests, 120_964);
        assert!((r.duration_s - 5.0).abs() < 1e-9);
        assert_eq!(r.requests_per_second, 24192.35);
        assert!((r.latency_avg_ms - 0.41235).abs() < 1e-9);
        assert!((r.latency_stdev_ms - 0.20118).abs() < 1e-9);
        assert!((r.latency_max_ms - 8.93).abs() < 1e-9);
        let pcts: Vec<u32> = r.percentages.iter().map(|(p, _)| *p).collect();
        assert_eq!(pcts, [50, 75, 90, 99]);
        assert!((r.percentage(99).unwrap_or_default() - 1.08).abs() < 1e-9);
        assert_eq!((r.socket_errors, r.non_2xx), (0, 0));

        let s = wrk_scene(&r, &ServerLabels::default());
        assert_eq!(s.scenario, "http-wrk");
        assert_eq!(s.extra.get("p75_ms"), Some(&0.452));
        assert_eq!(s.extra.get("p100_ms"), Some(&8.93));
        assert!(!s.extra.contains_key("p66_ms"));
    }

    #[test]
    fn parses_wrk_errors_and_units() {
        let r = parse_wrk(WRK_ERRORS_SAMPLE).unwrap();
        assert_eq!((r.socket_errors, r.non_2xx), (6, 5));
        assert!((r.latency_max_ms - 1020.0).abs() < 1e-9);
        assert!((r.duration_s - 5.01).abs() < 1e-9);
        let s = wrk_scene(&r, &ServerLabels::default());
        assert_eq!((s.succeeded, s.errors), (39_995, 11));
        assert_eq!(parse_wrk_duration("1.50m"), Some(90_000.0));
        assert_eq!(parse_wrk_duration("12"), None);
        assert_eq!(parse_wrk_duration("3.0xs"), None);
        // No --latency: still a result, without the distribution.
        let plain: String = WRK_SAMPLE
            .lines()
            .filter(|l| !l.contains('%') || l.contains("Stdev") || l.contains("Latency"))
            .filter(|l| !l.contains("Distribution"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(parse_wrk(&plain).unwrap().percentages.is_empty());
        assert!(parse_wrk("unable to connect to 127.0.0.1:1 Connection refused\n").is_err());
    }

    #[test]
    fn table_puts_binary_and_http_side_by_side() {
        let labels = ServerLabels::default();
        let mut percall = SceneResult::new("brisk", "nth", 10, 5000, "sync");
        percall.connect_type = "percall".into();
        percall.tps = 4000.0;
        percall.avg_ms = 2.5;
        for p in PERCENTAGES {
            percall.extra.insert(percentage_key(p), f64::from(p) / 10.0);
        }
        let mut fixed = percall.clone();
        fixed.connect_type = "fixed".into();
        fixed.connections = 10;
        let other = SceneResult::new("brisk", "nth", 10, 5000, "sync");
        assert_eq!(seed001_table(&[percall.clone(), fixed.clone()]), None);
        let scenes = [
            percall,
            fixed,
            other,
            ab_scene("http-ab", false, &parse_ab(AB_SAMPLE).unwrap(), &labels),
            ab_scene(
                "http-ab-k",
                true,
                &parse_ab(AB_K_FAILURES_SAMPLE).unwrap(),
                &labels,
            ),
            wrk_scene(&parse_wrk(WRK_SAMPLE).unwrap(), &labels),
        ];
        let table = seed001_table(&scenes).unwrap();
        let lines: Vec<&str> = table.lines().collect();
        // header, rule, 3 rows, 9 percentages
        assert_eq!(lines.len(), 14, "{table}");
        for name in [
            "binary per-call",
            "binary persistent (fixed/10)",
            "HTTP ab",
            "HTTP ab -k",
            "HTTP wrk",
        ] {
            assert!(lines[0].contains(name), "{table}");
        }
        assert!(lines[2].starts_with("Requests per second") && lines[2].contains("24192.35"));
        let p66 = lines.iter().find(|l| l.starts_with(" 66%")).unwrap();
        assert!(p66.trim_end().ends_with('-'), "{table}");
        let p75 = lines.iter().find(|l| l.starts_with(" 75%")).unwrap();
        assert!(p75.trim_end().ends_with("0.452"), "{table}");
    }

    #[test]
    fn missing_tools_are_not_found() {
        assert_eq!(find_on_path("brisk-no-such-tool-xyz"), None);
    }
}
