//! The benchmark runner behind `examples/benchmark_client.rs`: jkbenchmark's scene
//! matrix, run against the benchmark server of every player (brisk and its peers), reported in
//! jkbenchmark's and Dubbo's formats, with verdicts computed from the rounds.
//!
//! It lives in the library (not in the example) so that tests and other front ends
//! can run the very same engine: the example is only argument parsing around
//! [`cli::main`].
//!
//! Pieces:
//! - [`plan`] — option dimensions, their cross product grouped into points, and the presets;
//! - [`claims`] — what a run can judge (brisk vs every peer, the seeds' setting claims) and
//!   the seed 004 framework table;
//! - [`goals`] — a preset's goals judged over the results;
//! - [`target`] — where the server comes from (remote, spawned child, in-process);
//! - [`engine`] — the one load engine: a point's scenes interleaved round by round, timed
//!   windows or counted rounds, sync/async callers, CPU and TCP segments around each window;
//! - [`sample`] — what a round measured, and the CPU/segment counters around its window;
//! - [`reduce`] — a scene's rounds as one result (medians, spreads, per-call costs) and its
//!   printed lines;
//! - [`cli`] — the command line (clap) and the `__serve` entry of the spawned server;
//! - [`http_load`] — `ab` / `wrk` against the server's HTTP/JSON listener (seed 001);
//! - this module — [`run`] (all servers up, then point by point), the summary table and the
//!   result files.

pub mod claims;
pub mod cli;
pub mod engine;
pub mod goals;
pub mod http_load;
pub mod plan;
pub mod reduce;
pub mod sample;
pub mod target;

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::players::brisk::BriskOptions;
use crate::players::{ClientSetup, PlayerClient};

use crate::report::{write_charts_and_html_with_x, write_csv, write_json, ReportMeta, SceneResult};

pub use cli::{serve_main, ClientArgs};
pub use engine::{run_point, run_scene, PointScene, SceneOutcome, SceneOutput};
pub use plan::{
    CallMode, ConnectKind, LoadShape, Plan, Player, Preset, Scenario, Scene, ServerChoice,
    ServerKey, Settings,
};
pub use target::{RunningServer, ServerSource, Transport};

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The settings are invalid.
    #[error("invalid settings: {0}")]
    Settings(String),
    /// The benchmark server could not be started or stopped.
    #[error("benchmark server: {0}")]
    Server(String),
    /// The client could not connect to the server.
    #[error("cannot reach the benchmark server: {0}")]
    Connect(String),
    /// A scene could not run (not a failed call: those are counted).
    #[error("scene failed: {0}")]
    Scene(String),
    /// Writing results failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being written.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// What to measure.
    pub plan: Plan,
    /// Where the server comes from.
    pub server: ServerSource,
    /// Print progress, round reports and scene lines.
    pub verbose: bool,
}

/// The results of a run.
#[derive(Debug, Default)]
pub struct RunOutcome {
    /// One result per scene that ran, in run order.
    pub scenes: Vec<SceneResult>,
    /// Scenes that could not run, with the reason.
    pub failed: Vec<(String, String)>,
    /// Why calls failed, per scene label (scenes without failed calls are absent).
    pub call_errors: Vec<(String, std::collections::BTreeMap<String, u64>)>,
}

impl RunOutcome {
    /// Failed calls over all scenes, inside the measured windows and outside them (warm-ups).
    pub fn total_errors(&self) -> u64 {
        self.scenes
            .iter()
            .map(|s| {
                let outside = s.extra.get("errors_outside_window").copied().unwrap_or(0.0);
                s.errors + outside as u64
            })
            .sum()
    }
}

/// Runs every scene of the plan.
///
/// When the runner manages the servers it starts all of them first — one per brisk dispatch ×
/// queue, one per volo transport and one per other peer — checks that each answers, then runs
/// the plan point by point ([`Plan::points`]), each point's scenes interleaved round by round
/// ([`engine::run_point`]), and stops them at the end. A remote server (`--addr`, `--registry`) is brisk's: it runs the
/// scenes of the first brisk server choice only (its dispatch and queue are not ours to change),
/// and peers cannot be measured against it.
///
/// With [`Plan::http_load`] the started brisk servers also listen for HTTP/JSON, and after the
/// scenes [`http_load::run_tools`] runs `ab` / `wrk` against each (those installed); their
/// results are appended as scenes with connect type `http`.
///
/// An unreachable server is an error ([`RunError::Connect`]); a scene whose client cannot
/// connect or whose round fails is reported in [`RunOutcome::failed`] and the run goes on.
pub async fn run(options: &RunOptions) -> Result<RunOutcome, RunError> {
    let plan = &options.plan;
    let source = if plan.http_load {
        options.server.with_http_listener()
    } else {
        options.server.clone()
    };
    let mut keys = plan.server_keys();
    if !options.server.is_managed() {
        if let Some(peer) = keys.iter().find(|k| k.player != Player::Brisk) {
            return Err(RunError::Settings(format!(
                "{} needs a server the runner starts; --addr and --registry name a brisk server \
                 (leave them out, or run --players brisk)",
                peer.player
            )));
        }
        keys.truncate(1);
    }
    let output = SceneOutput {
        verbose: options.verbose,
        server_labels: options.server.is_managed(),
    };
    let mut servers: Vec<(ServerKey, RunningServer)> = Vec::new();
    let started = start_servers(&source, &keys, plan, options, &mut servers).await;
    let mut outcome = RunOutcome::default();
    if let Err(e) = started {
        stop_servers(servers).await;
        return Err(e);
    }
    for point in plan.points() {
        let placed: Vec<PointScene<'_>> = point
            .iter()
            .filter_map(|scene| {
                let (_, server) = servers.iter().find(|(k, _)| *k == scene.server_key())?;
                Some(PointScene {
                    scene,
                    addr: server.addr(),
                    server_pid: server.pid(),
                })
            })
            .collect();
        if options.verbose {
            if let Some(first) = point.first() {
                println!(
                    "\n=== {} {} c={}{}",
                    first.scenario,
                    first.call_mode,
                    first.concurrency,
                    if first.scenario.uses_payload() {
                        format!(", {} B", first.payload)
                    } else {
                        String::new()
                    }
                );
            }
        }
        for (p, result) in placed.iter().zip(run_point(&placed, plan, output).await) {
            match result {
                Ok(o) => {
                    if !o.errors.is_empty() {
                        outcome.call_errors.push((p.scene.label(), o.errors));
                    }
                    outcome.scenes.push(o.result);
                }
                Err(e) => {
                    eprintln!("{}: {e}", p.scene.label());
                    outcome.failed.push((p.scene.label(), e.to_string()));
                }
            }
        }
    }
    if plan.http_load {
        for (key, server) in &servers {
            let Some(choice) = key.choice else { continue };
            match server.http_addr() {
                Some(http) => {
                    let http = http.to_owned();
                    let labels = http_load::ServerLabels {
                        dispatch: choice.dispatch.name().to_owned(),
                        queue: choice.queue_name(),
                    };
                    let verbose = options.verbose;
                    let tools = tokio::task::spawn_blocking(move || {
                        http_load::run_tools(&http, &labels, verbose)
                    })
                    .await;
                    match tools {
                        Ok(scenes) => outcome.scenes.extend(scenes),
                        Err(e) => eprintln!("ab/wrk runs failed: {e}"),
                    }
                }
                None => println!(
                    "the server has no known HTTP/JSON address (a remote server) — ab/wrk skipped"
                ),
            }
        }
    }
    stop_servers(servers).await;
    Ok(outcome)
}

/// Starts the server of every key and checks it answers; what started is in `servers` even
/// when a later one fails, so the caller can stop it.
async fn start_servers(
    source: &ServerSource,
    keys: &[ServerKey],
    plan: &Plan,
    options: &RunOptions,
    servers: &mut Vec<(ServerKey, RunningServer)>,
) -> Result<(), RunError> {
    for &key in keys {
        let server = RunningServer::start(source, key).await?;
        // volo's variants are told apart as brisk's are: `volo (mux)`.
        let who = match key.volo_transport {
            Some(transport) => format!("{} ({transport})", key.player),
            None => key.player.to_string(),
        };
        if options.verbose {
            let what = match (options.server.is_managed(), key.choice, key.volo_transport) {
                (false, _, _) => "remote".to_owned(),
                (true, Some(choice), _) => match choice.queue {
                    Some(q) => format!("{} dispatch, {q} queue", choice.dispatch),
                    None => format!("{} dispatch", choice.dispatch),
                },
                (true, None, Some(transport)) => transport.settings().to_owned(),
                (true, None, None) => key.player.settings().to_owned(),
            };
            println!("##### {who} server {} ({what})", server.addr());
        }
        let volo_transport = key.volo_transport.unwrap_or_default();
        let probed = probe_player(key.player, volo_transport, server.addr(), plan.timeout).await;
        servers.push((key, server));
        if let Err(e) = probed {
            return Err(RunError::Connect(format!("{who}: {e}")));
        }
    }
    Ok(())
}

async fn stop_servers(servers: Vec<(ServerKey, RunningServer)>) {
    for (_, server) in servers {
        server.stop().await;
    }
}

/// One call of a scenario the player implements: the check that its server answers (volo's
/// over `volo_transport`, the one its server was started with).
async fn probe_player(
    player: Player,
    volo_transport: plan::VoloTransport,
    addr: &str,
    timeout: Duration,
) -> Result<(), String> {
    if player == Player::Brisk {
        return engine::probe(addr, timeout)
            .await
            .map_err(|e| e.to_string());
    }
    let setup = ClientSetup {
        addr,
        connections: 1,
        calls_in_flight: 1,
        timeout,
    };
    let client = PlayerClient::connect(player, &setup, &BriskOptions::default(), volo_transport)
        .await
        .map_err(|e| e.to_string())?;
    let scenario = if player.supports(Scenario::Nth) {
        Scenario::Nth
    } else {
        Scenario::Echo
    };
    let payload = bytes::Bytes::from_static(b"probe");
    let result = client
        .call(0, scenario, 1, &payload)
        .await
        .and_then(|reply| reply.check(scenario, 1, &payload));
    client.close();
    result.map_err(|e| e.to_string())
}

/// A fixed-width table of all scenes: options that vary, TPS (calls/s), latencies and errors;
/// messages/s beside them when a streaming scene ran (a call of one moves many messages).
pub fn summary_table(scenes: &[SceneResult]) -> String {
    let varies = |f: fn(&SceneResult) -> String| {
        let mut v: Vec<String> = scenes.iter().map(f).collect();
        v.sort();
        v.dedup();
        v.len() > 1
    };
    type Col = (&'static str, fn(&SceneResult) -> String);
    let optional: [Col; 7] = [
        ("connect", |s| {
            if s.connect_type == "fixed" || s.connect_type == "pooled" {
                format!("{}/{}", s.connect_type, s.connections)
            } else {
                s.connect_type.clone()
            }
        }),
        ("write", |s| s.write_mode.clone()),
        ("dispatch", |s| s.dispatch.clone()),
        ("queue", |s| s.queue.clone()),
        ("serializer", |s| s.serializer.clone()),
        ("payload", |s| {
            if s.payload > 0 {
                s.payload.to_string()
            } else {
                String::new()
            }
        }),
        ("cpu%", |s| {
            s.extra
                .get("server_cpu_pct")
                .map(|v| format!("{v:.0}"))
                .unwrap_or_default()
        }),
    ];
    let mut cols: Vec<Col> = vec![
        ("player", |s| s.player.clone()),
        ("scenario", |s| s.scenario.clone()),
        ("c", |s| s.concurrency.to_string()),
        ("n", |s| s.requests.to_string()),
        ("mode", |s| s.call_mode.clone()),
    ];
    cols.extend(
        optional
            .into_iter()
            .filter(|(_, f)| varies(*f) || scenes.len() == 1),
    );
    // Options added later: shown when they vary, or hold something besides their default.
    let later: [(Col, &str); 2] = [
        (("compression", |s| s.compression.clone()), "none"),
        (("kind", |s| s.payload_kind.clone()), "fill"),
    ];
    // volo's transport: shown when a scene holds one besides volo's default (`pool`), not
    // merely because the other players have none.
    let volo: Col = ("volo", |s| s.volo_transport.clone());
    let volo_shown = scenes
        .iter()
        .any(|s| !matches!(s.volo_transport.as_str(), "" | "pool"));
    cols.extend(later.into_iter().filter_map(|(col, default)| {
        let set = |s: &SceneResult| {
            let v = col.1(s);
            !v.is_empty() && v != default
        };
        (varies(col.1) || scenes.iter().any(set)).then_some(col)
    }));
    if volo_shown {
        cols.push(volo);
    }
    cols.extend::<[Col; 9]>([
        ("TPS", |s| format!("{:.0}", s.tps)),
        ("min–max", |s| {
            match (s.extra.get("tps_min"), s.extra.get("tps_max")) {
                (Some(lo), Some(hi)) => format!("{lo:.0}–{hi:.0}"),
                _ => String::new(),
            }
        }),
        ("µs/call", |s| {
            s.extra
                .get("server_cpu_us_per_call")
                .map(|v| format!("{v:.1}"))
                .unwrap_or_default()
        }),
        ("avg ms", |s| format!("{:.3}", s.avg_ms)),
        ("p50", |s| format!("{:.3}", s.p50_ms)),
        ("p99", |s| format!("{:.3}", s.p99_ms)),
        ("p999", |s| format!("{:.3}", s.p999_ms)),
        ("max", |s| format!("{:.3}", s.max_ms)),
        ("err", |s| s.errors.to_string()),
    ]);
    let per_call: [Col; 3] = [
        ("cli µs", |s| extra_fmt(s, "client_cpu_us_per_call", 1)),
        ("srv seg", |s| extra_fmt(s, "server_segments_per_call", 2)),
        ("cli seg", |s| extra_fmt(s, "client_segments_per_call", 2)),
    ];
    cols.extend(
        per_call
            .into_iter()
            .filter(|(_, f)| scenes.iter().any(|s| !f(s).is_empty())),
    );
    if scenes.iter().any(|s| s.extra.contains_key("msgs_per_s")) {
        // The streams: a call moves `msgs_per_call` messages; TPS above counts calls.
        cols.push(("msgs/s", |s| extra_fmt(s, "msgs_per_s", 0)));
    }
    if scenes.iter().any(|s| s.extra.contains_key("mb_per_s")) {
        cols.push(("MB/s", |s| {
            s.extra
                .get("mb_per_s")
                .map(|v| format!("{v:.1}"))
                .unwrap_or_default()
        }));
    }
    let rows: Vec<Vec<String>> = scenes
        .iter()
        .map(|s| cols.iter().map(|(_, f)| f(s)).collect())
        .collect();
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, (h, _))| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([h.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String]| {
        let text: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < 5 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", text.join("  ").trim_end());
    };
    let header: Vec<String> = cols.iter().map(|(h, _)| (*h).to_owned()).collect();
    line(&mut out, &header);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut out, &rule);
    for r in &rows {
        line(&mut out, r);
    }
    out
}

fn extra_fmt(s: &SceneResult, key: &str, decimals: usize) -> String {
    s.extra
        .get(key)
        .map(|v| format!("{v:.decimals$}"))
        .unwrap_or_default()
}

/// Result file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutFormat {
    /// `results.json`.
    Json,
    /// `results.csv`.
    Csv,
}

/// Writes the chosen result files plus the SVG charts and `report.html` into `dir`;
/// returns the paths written.
pub fn write_results(
    dir: &Path,
    formats: &[OutFormat],
    meta: &ReportMeta,
    scenes: &[SceneResult],
    compare_by: &str,
    x_by: &str,
) -> Result<Vec<PathBuf>, RunError> {
    let io_err = |context: String| move |source| RunError::Io { context, source };
    std::fs::create_dir_all(dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
    let mut files = Vec::new();
    for f in formats {
        files.push(
            match f {
                OutFormat::Json => write_json(dir, scenes),
                OutFormat::Csv => write_csv(dir, scenes),
            }
            .map_err(io_err(format!(
                "cannot write results into {}",
                dir.display()
            )))?,
        );
    }
    files.extend(
        write_charts_and_html_with_x(dir, meta, scenes, compare_by, x_by).map_err(io_err(
            format!("cannot write charts into {}", dir.display()),
        ))?,
    );
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_shows_only_varying_options() {
        let mut a = SceneResult::new("brisk", "nth", 1, 100, "sync");
        a.connect_type = "fixed".into();
        a.connections = 10;
        let mut b = a.clone();
        b.connect_type = "reused".into();
        b.concurrency = 20;
        let t = summary_table(&[a, b]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("player"));
        assert!(lines[0].contains("connect"));
        assert!(!lines[0].contains("queue"));
        assert!(lines[2].contains("fixed/10"));
        assert!(lines[3].contains("reused"));
    }
}
