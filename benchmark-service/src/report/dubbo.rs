//! The boxed "Dubbo Remoting Performance Test Report", and detection of the test machine.
//!
//! The classic Grizzly/Netty/Mina comparison (seeds `000`/`003`) ended every run with a
//! fixed-width box of three sections — Test Environment, Test Scene, Test Result. brisk
//! reproduces that box so its transport choices can be compared the same way and read
//! side by side with the original. The box is 66 columns wide like the original and
//! widens only if a line (typically a long CPU model) would not fit.
//!
//! [`TestEnvironment::detect`] reads the machine from `/etc/os-release`, `/proc` and
//! `/sys`. Every read is fallible and falls back to `"unknown"`: a report must never fail
//! (or panic) because it ran in a container without `/proc/cpuinfo`.
//! [`TestEnvironment::detect_from_root`] takes the filesystem root as a parameter so the
//! parsing is testable against fixture files.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::stats::RoundStats;

const UNKNOWN: &str = "unknown";

/// The machine a benchmark ran on (client side; client and server share a host in the
/// suite's default setup).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestEnvironment {
    /// e.g. `Ubuntu 22.04.4 LTS, Linux 5.15.0-105-generic x86_64`.
    pub os: String,
    /// Logical CPU cores available to the process.
    pub cpu_cores: Option<usize>,
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// e.g. `Rust 1.95.0 / tokio`.
    pub runtime: String,
    /// Total memory in bytes (`MemTotal`).
    pub memory_total: Option<u64>,
    /// Available memory in bytes (`MemAvailable`).
    pub memory_available: Option<u64>,
    /// The network path used, e.g. `loopback 127.0.0.1`.
    pub network: String,
    /// MTU of that network interface in bytes.
    pub mtu: Option<u32>,
}

impl TestEnvironment {
    /// Detects the current machine (see the module docs); never fails.
    pub fn detect() -> Self {
        Self::detect_from_root(Path::new("/"))
    }

    /// Detects the machine reading `etc/os-release`, `proc/...` and `sys/...` under `root`
    /// instead of `/`. Missing or malformed files give `"unknown"`/`None`.
    pub fn detect_from_root(root: &Path) -> Self {
        let read = |rel: &str| std::fs::read_to_string(root.join(rel)).ok();
        let pretty = read("etc/os-release").and_then(|s| parse_os_release(&s));
        let kernel = read("proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        let arch = std::env::consts::ARCH;
        let os = match (pretty, kernel) {
            (Some(p), Some(k)) => format!("{p}, Linux {k} {arch}"),
            (Some(p), None) => format!("{p} {arch}"),
            (None, Some(k)) => format!("Linux {k} {arch}"),
            (None, None) => format!("{} {arch}", std::env::consts::OS),
        };
        let cpuinfo = read("proc/cpuinfo");
        let cpu_model = cpuinfo
            .as_deref()
            .and_then(parse_cpu_model)
            .unwrap_or_else(|| UNKNOWN.to_owned());
        // The machine's, not this process's: a client run with `--client-cpus` may use fewer.
        let cpu_cores = cpuinfo
            .as_deref()
            .and_then(parse_cpu_count)
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()));
        let (memory_total, memory_available) = read("proc/meminfo")
            .map(|s| parse_meminfo(&s))
            .unwrap_or((None, None));
        let mtu = read("sys/class/net/lo/mtu").and_then(|s| s.trim().parse().ok());
        Self {
            os,
            cpu_cores,
            cpu_model,
            runtime: runtime_description(std::env::var("BRISK_RUSTC_VERSION").ok().as_deref()),
            memory_total,
            memory_available,
            network: "loopback 127.0.0.1".to_owned(),
            mtu,
        }
    }

    /// One line describing the machine, for report headers:
    /// `<os>; <n> cores (<model>); <memory> bytes; <runtime>`.
    pub fn summary(&self) -> String {
        format!(
            "{}; {} ({}); {} memory; {}",
            self.os,
            self.cores_text(),
            self.cpu_model,
            bytes_text(self.memory_total),
            self.runtime
        )
    }

    fn cores_text(&self) -> String {
        self.cpu_cores
            .map(|n| format!("{n} cores"))
            .unwrap_or_else(|| format!("{UNKNOWN} cores"))
    }
}

/// `Rust <version> / tokio` from a rustc version string (`"1.95.0"` or the full
/// `rustc 1.95.0 (…)` output); `Rust (stable) / tokio` when absent. The build sets nothing
/// by itself: export `BRISK_RUSTC_VERSION` (at run time; a compile-time value is used as a
/// fallback) to record the exact toolchain.
pub fn runtime_description(rustc_version: Option<&str>) -> String {
    let v = rustc_version
        .or(option_env!("BRISK_RUSTC_VERSION"))
        .map(str::trim)
        .filter(|v| !v.is_empty());
    match v {
        Some(v) => {
            let v = v.strip_prefix("rustc ").unwrap_or(v);
            let v = v.strip_prefix("Rust ").unwrap_or(v);
            format!("Rust {v} / tokio")
        }
        None => "Rust (stable) / tokio".to_owned(),
    }
}

/// `PRETTY_NAME` from `/etc/os-release` content (quotes removed).
fn parse_os_release(content: &str) -> Option<String> {
    content.lines().find_map(|line| {
        let v = line.trim().strip_prefix("PRETTY_NAME=")?;
        let v = v.trim().trim_matches('"').trim_matches('\'').trim();
        (!v.is_empty()).then(|| v.to_owned())
    })
}

/// First `model name` from `/proc/cpuinfo` content (whitespace collapsed).
fn parse_cpu_model(content: &str) -> Option<String> {
    content.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        if k.trim() != "model name" {
            return None;
        }
        let v = v.split_whitespace().collect::<Vec<_>>().join(" ");
        (!v.is_empty()).then_some(v)
    })
}

/// The logical CPUs `/proc/cpuinfo` lists (its `processor` entries), if any.
fn parse_cpu_count(content: &str) -> Option<usize> {
    let count = content
        .lines()
        .filter(|line| {
            line.split_once(':')
                .is_some_and(|(k, _)| k.trim() == "processor")
        })
        .count();
    (count > 0).then_some(count)
}

/// (`MemTotal`, `MemAvailable`) in bytes from `/proc/meminfo` content.
fn parse_meminfo(content: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| {
        content.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let mut parts = rest.split_whitespace();
            let n: u64 = parts.next()?.parse().ok()?;
            match parts.next() {
                Some("kB") | Some("KB") | Some("kb") => n.checked_mul(1024),
                None => Some(n),
                Some(_) => None,
            }
        })
    };
    (field("MemTotal"), field("MemAvailable"))
}

/// `1234567` → `"1,234,567"`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    // Digits before the first comma: 1..=3.
    let head = match digits.len() % 3 {
        0 => 3.min(digits.len()),
        r => r,
    };
    out.push_str(&digits[..head]);
    for group in digits.as_bytes()[head..].chunks(3) {
        out.push(',');
        out.extend(group.iter().map(|&b| char::from(b)));
    }
    out
}

/// The "Test Scene" section of the Dubbo report: what was run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DubboScene {
    /// Client transport description (brisk: e.g. `reused/async-write`).
    pub transporter: String,
    /// Server transport/dispatch description, printed as "Server Transporter" when set.
    pub server_transporter: Option<String>,
    /// Server worker threads, printed as "Server Service Threads" when set.
    pub server_threads: Option<u32>,
    /// Serializer name.
    pub serialization: String,
    /// Response timeout in ms.
    pub timeout_ms: u64,
    /// Payload bytes each way.
    pub data_length: u64,
    /// Connections shared by all callers.
    pub shared_connections: u32,
    /// Concurrent callers.
    pub concurrent_threads: u32,
    /// Calls per caller.
    pub runs_per_thread: u64,
}

impl Default for DubboScene {
    /// The original test: one shared connection, 100 callers, 1 KiB, 10 000 calls each,
    /// 5000 ms timeout.
    fn default() -> Self {
        Self {
            transporter: "brisk fixed".to_owned(),
            server_transporter: None,
            server_threads: None,
            serialization: "msgpack".to_owned(),
            timeout_ms: 5000,
            data_length: 1024,
            shared_connections: 1,
            concurrent_threads: 100,
            runs_per_thread: 10_000,
        }
    }
}

/// Payload bytes per second: succeeded calls × `data_length` × 2 (request and response
/// each carry `data_length` bytes) / elapsed. Application payload, not wire bytes — the
/// same definition the Dubbo report used.
pub fn payload_bytes_per_sec(result: &RoundStats, data_length: u64) -> f64 {
    if result.runtime_ms <= 0.0 {
        return 0.0;
    }
    result.succeeded as f64 * data_length as f64 * 2.0 * 1000.0 / result.runtime_ms
}

/// The boxed Dubbo Remoting Performance Test Report for one run.
///
/// Pass a [`SceneResult`](super::SceneResult) through
/// [`SceneResult::round_stats`](super::SceneResult::round_stats) to report a stored scene.
/// Response time is printed with 3 decimals (Dubbo printed whole ms, which rounds every
/// brisk loopback call to 0).
pub fn dubbo_report(env: &TestEnvironment, scene: &DubboScene, result: &RoundStats) -> String {
    let environment = [
        format!("Client OS: {}", env.os),
        format!("Client CPU: {}", env.cores_text()),
        format!("Client CPU Model: {}", env.cpu_model),
        format!("Client Runtime: {}", env.runtime),
        format!(
            "Client Memory: {} (Available: {})",
            bytes_text(env.memory_total),
            bytes_text(env.memory_available)
        ),
        format!("Client Network: {}", env.network),
        format!(
            "Client MTU: {}",
            env.mtu
                .map(|m| format!("{m} bytes"))
                .unwrap_or_else(|| UNKNOWN.to_owned())
        ),
    ];

    let mut test_scene = Vec::new();
    if let Some(t) = &scene.server_transporter {
        test_scene.push(format!("Server Transporter: {t}"));
    }
    if let Some(n) = scene.server_threads {
        test_scene.push(format!("Server Service Threads: {n}"));
    }
    test_scene.extend([
        format!("Client Transporter: {}", scene.transporter),
        format!("Serialization: {}", scene.serialization),
        format!("Response Timeout: {} ms", scene.timeout_ms),
        format!("Data Length: {} bytes", scene.data_length),
        format!("Client Shared Connections: {}", scene.shared_connections),
        format!("Client Concurrent Threads: {}", scene.concurrent_threads),
        format!("Run Times Per Thread: {}", scene.runs_per_thread),
    ]);

    let bytes_per_sec = payload_bytes_per_sec(result, scene.data_length);
    let test_result = vec![
        format!("Succeeded Requests: {}", group_thousands(result.succeeded)),
        format!("Failed Requests: {}", group_thousands(result.errors)),
        format!("Client Elapsed Time: {:.0} ms", result.runtime_ms),
        format!("Average Response Time: {:.3} ms", result.avg_ms),
        format!("Requests Per Second: {:.0}/s", result.tps),
        format!(
            "Throughput Per Second: {} bytes/s",
            group_thousands(bytes_per_sec.round() as u64)
        ),
    ];

    let title = "Dubbo Remoting Performance Test Report";
    let all_lines = environment.iter().chain(&test_scene).chain(&test_result);
    // Inner width (between the border characters): 64 like the original, or wider so
    // that "| " + longest line + " |" fits.
    let inner = all_lines
        .map(|l| l.chars().count() + 2)
        .chain([title.len() + 2])
        .max()
        .unwrap_or(0)
        .max(64);

    let heavy = format!("+{}+", "=".repeat(inner));
    let light = format!("+{}+", "-".repeat(inner));
    let centered = |text: &str| {
        let len = text.chars().count();
        let left = (inner - len) / 2;
        format!(
            "|{}{}{}|",
            " ".repeat(left),
            text,
            " ".repeat(inner - len - left)
        )
    };
    let left = |text: &str| {
        let len = text.chars().count();
        format!("| {}{}|", text, " ".repeat(inner - 1 - len))
    };

    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(heavy.clone());
    line(centered(title));
    line(heavy.clone());
    line(centered("Test Environment"));
    line(light.clone());
    environment.iter().for_each(|l| line(left(l)));
    line(light.clone());
    line(centered("Test Scene"));
    line(light.clone());
    test_scene.iter().for_each(|l| line(left(l)));
    line(light.clone());
    line(centered("Test Result"));
    line(light);
    test_result.iter().for_each(|l| line(left(l)));
    line(heavy);
    out
}

fn bytes_text(b: Option<u64>) -> String {
    b.map(|b| format!("{} bytes", group_thousands(b)))
        .unwrap_or_else(|| UNKNOWN.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::stats::LatencyRecorder;
    use std::time::Duration;

    fn fixture_env() -> TestEnvironment {
        TestEnvironment {
            os: "Ubuntu 22.04.4 LTS, Linux 5.15.0 x86_64".into(),
            cpu_cores: Some(16),
            cpu_model: "Intel(R) Xeon(R) CPU E5-2620 v2 @ 2.10GHz".into(),
            runtime: runtime_description(Some("1.95.0")),
            memory_total: Some(535_953_408),
            memory_available: Some(40_000_000),
            network: "loopback 127.0.0.1".into(),
            mtu: Some(65536),
        }
    }

    fn result() -> RoundStats {
        let mut r = LatencyRecorder::new();
        for _ in 0..1000 {
            r.record_ok(Duration::from_micros(6_000));
        }
        RoundStats::from_recorder(&r, Duration::from_millis(100))
    }

    #[test]
    fn report_is_boxed_and_aligned() {
        let text = dubbo_report(&fixture_env(), &DubboScene::default(), &result());
        let lines: Vec<&str> = text.lines().collect();
        let width = lines[0].chars().count();
        assert_eq!(width, 66);
        for l in &lines {
            assert_eq!(l.chars().count(), width, "misaligned: {l:?}");
            assert!(l.starts_with('+') || l.starts_with('|'));
        }
        assert_eq!(lines[0], format!("+{}+", "=".repeat(64)));
        assert_eq!(
            lines[1],
            "|             Dubbo Remoting Performance Test Report             |"
        );
        assert!(text.contains("|                        Test Environment                        |"));
        assert!(text.contains("|                          Test Result                           |"));
        assert!(text.contains(&format!("| Client CPU: 16 cores{}|", " ".repeat(43))));
        assert!(text.contains("| Client CPU Model: Intel(R) Xeon(R) CPU E5-2620 v2 @ 2.10GHz "));
        assert!(text.contains("| Client Memory: 535,953,408 bytes (Available: 40,000,000 bytes)"));
        assert!(text.contains("| Client Runtime: Rust 1.95.0 / tokio "));
        assert!(text.contains("| Client MTU: 65536 bytes "));
        assert!(text.contains("| Data Length: 1024 bytes "));
        assert!(text.contains("| Client Shared Connections: 1 "));
        assert!(text.contains("| Client Concurrent Threads: 100 "));
        assert!(text.contains("| Run Times Per Thread: 10000 "));
        assert!(text.contains("| Succeeded Requests: 1,000 "));
        assert!(text.contains("| Failed Requests: 0 "));
        assert!(text.contains("| Client Elapsed Time: 100 ms "));
        assert!(text.contains("| Average Response Time: 6.000 ms "));
        assert!(text.contains("| Requests Per Second: 10000/s "));
        // 1000 calls × 1024 B × 2 / 0.1 s
        assert!(text.contains("| Throughput Per Second: 20,480,000 bytes/s "));
        assert_eq!(lines.last().copied(), Some(lines[0]));
    }

    #[test]
    fn long_lines_widen_the_box() {
        let mut env = fixture_env();
        env.cpu_model = "X".repeat(100);
        let scene = DubboScene {
            server_transporter: Some("brisk fixed".into()),
            server_threads: Some(8),
            ..DubboScene::default()
        };
        let text = dubbo_report(&env, &scene, &result());
        let widths: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
        assert!(widths[0] > 66);
        assert!(widths.iter().all(|&w| w == widths[0]));
        assert!(text.contains("| Server Transporter: brisk fixed "));
        assert!(text.contains("| Server Service Threads: 8 "));
    }

    #[test]
    fn parsers() {
        assert_eq!(
            parse_os_release("NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\nID=ubuntu\n")
                .as_deref(),
            Some("Ubuntu 22.04.4 LTS")
        );
        assert_eq!(parse_os_release("NAME=x\n"), None);
        assert_eq!(
            parse_cpu_model("processor\t: 0\nmodel name\t: Intel(R)  Xeon(R) CPU\nflags\t: x\n")
                .as_deref(),
            Some("Intel(R) Xeon(R) CPU")
        );
        assert_eq!(parse_cpu_model("processor : 0\n"), None);
        assert_eq!(
            parse_cpu_count("processor\t: 0\nmodel name\t: X\n\nprocessor\t: 1\nmodel name\t: X\n"),
            Some(2)
        );
        assert_eq!(parse_cpu_count("model name\t: X\n"), None);
        assert_eq!(
            parse_meminfo("MemTotal:       16384 kB\nMemFree: 1 kB\nMemAvailable:    8192 kB\n"),
            (Some(16_777_216), Some(8_388_608))
        );
        assert_eq!(parse_meminfo("garbage"), (None, None));
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(30_846_411), "30,846,411");
        assert_eq!(
            runtime_description(Some("rustc 1.95.0 (59807616e 2026-04-14)")),
            "Rust 1.95.0 (59807616e 2026-04-14) / tokio"
        );
    }

    #[test]
    fn detection_never_panics_on_missing_files() {
        let missing = std::env::temp_dir().join("brisk-report-no-such-root-dir");
        let env = TestEnvironment::detect_from_root(&missing);
        assert_eq!(env.cpu_model, "unknown");
        assert_eq!(env.memory_total, None);
        assert_eq!(env.mtu, None);
        assert!(!env.os.is_empty());
        assert_eq!(env.network, "loopback 127.0.0.1");
        let text = dubbo_report(&env, &DubboScene::default(), &result());
        assert!(text.contains("| Client Memory: unknown (Available: unknown)"));
        assert!(text.contains("| Client MTU: unknown "));
        // The real machine too.
        let real = TestEnvironment::detect();
        assert!(!real.summary().is_empty());
    }
}
