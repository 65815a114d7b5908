//! Running ab and wrk: finding them on `PATH`, writing their request files (the JSON body and
//! wrk's Lua script) into a temporary directory that is removed afterwards, running each with a
//! time-out, and turning their output into scene results.
//!
//! Blocking by design (the tools run for seconds; the runner calls [`run_tools`] from
//! `spawn_blocking`). A missing tool, a failure, a time-out or unparsable output is printed and
//! skipped, never returned: the HTTP runs are an addition to a run, not a condition of it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use wait_timeout::ChildExt;

use crate::report::SceneResult;

use super::parse::{parse_ab, parse_wrk};
use super::scenes::{ab_scene, wrk_scene, ServerLabels, CONCURRENCY};

/// Requests per `ab` run (`-n`), as in seed 001.
pub const AB_REQUESTS: u64 = 10_000;

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

/// `name`'s path when an executable of that name is on `PATH`.
fn find_tool(name: &str) -> Option<PathBuf> {
    which::which(name).ok()
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
    // Both pipes are drained while the tool runs: a tool blocked on a full pipe would never exit.
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = match child.wait_timeout(timeout) {
        Ok(Some(status)) => Ok(status),
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("killed after {} s", timeout.as_secs()))
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("cannot wait for it: {e}"))
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

/// Reads `pipe` to its end on a thread of its own; the text (lossy UTF-8) is the thread's result.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The temporary directory holding `body.json` and `post.lua`; removed on drop.
struct ToolFiles {
    dir: tempfile::TempDir,
}

impl ToolFiles {
    fn create() -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("brisk-http-load-")
            .tempdir()
            .map_err(|e| {
                format!(
                    "cannot create a directory for the request files in {}: {e}",
                    std::env::temp_dir().display()
                )
            })?;
        let files = ToolFiles { dir };
        std::fs::write(files.body(), "[]")
            .and_then(|()| std::fs::write(files.script(), WRK_SCRIPT))
            .map_err(|e| {
                format!(
                    "cannot write the request files into {}: {e}",
                    files.dir.path().display()
                )
            })?;
        Ok(files)
    }

    fn body(&self) -> PathBuf {
        self.dir.path().join("body.json")
    }

    fn script(&self) -> PathBuf {
        self.dir.path().join("post.lua")
    }
}

/// Runs `ab`, `ab -k` and `wrk` (those installed) against `http_addr`'s `nth` method and
/// returns a scene result per run that worked. Blocking (several seconds): call it from
/// `spawn_blocking`. Missing tools and failures are printed, never returned.
pub fn run_tools(http_addr: &str, labels: &ServerLabels, verbose: bool) -> Vec<SceneResult> {
    let url = format!("http://{http_addr}{NTH_PATH}");
    let mut scenes = Vec::new();
    let ab = find_tool("ab");
    let wrk = find_tool("wrk");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tools_are_not_found() {
        assert_eq!(find_tool("brisk-no-such-tool-xyz"), None);
    }
}
