//! Presets: named settings layers kept as data files, `benchmark-service/presets/<name>.toml`,
//! compiled into the binary so `--preset NAME` needs no file on disk; `--preset-file PATH` reads
//! a file of the same format from disk.
//!
//! The format ([`PresetFile`]) is a `title` for the reports, a `[settings]` table whose keys
//! are the fields of [`Settings`] (spelled as `file_values` describes), and any number of
//! `[[goals]]`, targets the run's verdicts judge ([`Goal`]):
//!
//! ```toml
//! title = "echo at two sizes"
//!
//! [settings]
//! players = ["brisk", "tonic"]
//! scenarios = ["echo"]
//! payloads = ["1k", "10k"]
//! concurrency = [1, 20]
//! ```
//!
//! A key the format does not know, a value of the wrong type or a name no parser accepts is an
//! error ([`PresetFileError`]) naming the file, line and column; nothing in a file is ignored.
//! The shipped files are checked by the tests, which is why reading one of them
//! ([`Preset::file`]) cannot fail at run time.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use strum::{Display, EnumString, IntoStaticStr, VariantNames};

use super::{Goal, Settings};

/// A shipped preset: a named set of defaults reproducing one of the classic comparisons, sized
/// to finish in a few minutes on a 2-core machine. Its name is its file's stem and its output
/// directory under `bench-results/`; it parses in any ASCII case, with `_` for `-`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Display, EnumString, IntoStaticStr, VariantNames)]
#[strum(
    serialize_all = "kebab-case",
    ascii_case_insensitive,
    parse_err_ty = String,
    parse_err_fn = unknown_preset
)]
pub enum Preset {
    /// Seeds 000/003: echo 1 KiB over one fixed connection, 100 sync callers; compares
    /// serializers and prints the boxed Dubbo report.
    #[strum(to_string = "dubbo-report", serialize = "dubbo_report")]
    DubboReport,
    /// Seed 004: nth/cache/file/db × c 1/20/50/100 × sync/async over 10 fixed connections.
    #[strum(to_string = "jkrpc-matrix", serialize = "jkrpc_matrix")]
    JkrpcMatrix,
    /// Seed 004: nth async, reused/pooled/fixed × c 1/20/50/100.
    #[strum(to_string = "connect-type", serialize = "connect_type")]
    ConnectType,
    /// Seed 004: nth async on the worker pool, blocking vs transfer queue.
    Queue,
    /// Seed 004: nth async, sync vs async write completion.
    #[strum(to_string = "write-mode", serialize = "write_mode")]
    WriteMode,
    /// Seed 002: echo 1k…100k at c = cores, with server CPU % and MB/s.
    #[strum(to_string = "payload-sweep", serialize = "payload_sweep")]
    PayloadSweep,
    /// brisk (direct and pool dispatch), tarpc, tonic, volo (pool and mux transport) and the raw
    /// ceiling on echo over `C:N:P` load points, with CPU µs and TCP data segments (≈ writes) per
    /// call.
    Peers,
    /// Seed 001: nth with a new connection per call vs persistent connections, c = 10; then
    /// `ab`, `ab -k` and `wrk` against the server's HTTP/JSON listener when installed.
    Keepalive,
    /// Every scenario with tiny counts: an end-to-end check in seconds.
    Smoke,
    /// Issue 19: brisk vs tonic on a server stream and a bidirectional ping-pong of 1 KiB
    /// items, 1 connection × 1 and × 10 callers, in messages/s.
    Streams,
    /// Issue 20: brisk's echo with no, zstd and gzip body compression, on text and on random
    /// payloads of 1, 10 and 100 KiB, with the bytes each call puts on the wire.
    Compression,
}

fn unknown_preset(s: &str) -> String {
    crate::names::unknown::<Preset>("preset", s)
}

/// The text of `presets/<file>.toml`, compiled in.
macro_rules! shipped {
    ($file:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/presets/",
            $file,
            ".toml"
        ))
    };
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 11] = [
        Preset::DubboReport,
        Preset::JkrpcMatrix,
        Preset::ConnectType,
        Preset::Queue,
        Preset::WriteMode,
        Preset::PayloadSweep,
        Preset::Peers,
        Preset::Keepalive,
        Preset::Smoke,
        Preset::Streams,
        Preset::Compression,
    ];

    /// The preset's command-line name (also its file's stem and its output directory under
    /// `bench-results/`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The preset's file as shipped (`presets/<name>.toml`).
    pub fn source(self) -> &'static str {
        match self {
            Preset::DubboReport => shipped!("dubbo-report"),
            Preset::JkrpcMatrix => shipped!("jkrpc-matrix"),
            Preset::ConnectType => shipped!("connect-type"),
            Preset::Queue => shipped!("queue"),
            Preset::WriteMode => shipped!("write-mode"),
            Preset::PayloadSweep => shipped!("payload-sweep"),
            Preset::Peers => shipped!("peers"),
            Preset::Keepalive => shipped!("keepalive"),
            Preset::Smoke => shipped!("smoke"),
            Preset::Streams => shipped!("streams"),
            Preset::Compression => shipped!("compression"),
        }
    }

    /// The preset's file, read.
    ///
    /// # Panics
    ///
    /// Never for the shipped files: every one of them is read by the tests
    /// (`plan::preset_tests`), so a broken one fails the build's tests, not a run.
    pub fn file(self) -> PresetFile {
        let origin = format!("presets/{}.toml", self.name());
        match PresetFile::parse(self.source(), &origin) {
            Ok(file) => file,
            Err(e) => panic!("the shipped preset {self} does not read: {e}"),
        }
    }

    /// A title for reports.
    pub fn title(self) -> String {
        self.file().title
    }

    /// The preset's settings layer.
    pub fn settings(self) -> Settings {
        self.file().settings
    }
}

/// A preset file: a title, one settings layer and the goals its run is judged by.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetFile {
    /// A title for the reports [default: "brisk benchmark"].
    #[serde(default = "default_title")]
    pub title: String,
    /// The settings layer (an absent table says nothing).
    #[serde(default)]
    pub settings: Settings,
    /// Targets the run's verdicts say whether it met (`[[goals]]`, see [`Goal`]).
    #[serde(default)]
    pub goals: Vec<Goal>,
}

fn default_title() -> String {
    "brisk benchmark".to_owned()
}

impl Default for PresetFile {
    /// No settings, the plain title: what a run without a preset starts from.
    fn default() -> Self {
        PresetFile {
            title: default_title(),
            settings: Settings::default(),
            goals: Vec::new(),
        }
    }
}

/// Why a preset file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PresetFileError {
    /// The file could not be read.
    #[error("cannot read preset file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a preset: bad TOML, an unknown key, or a value no setting accepts. The
    /// TOML error says the line and column and quotes the line.
    #[error("preset file {origin}: {source}")]
    Parse {
        /// Where the text came from (a path, or the shipped preset's name).
        origin: String,
        /// The TOML reader's error.
        #[source]
        source: toml::de::Error,
    },
    /// A goal that cannot be judged (see [`Goal::check`]).
    #[error("preset file {origin}: {why}")]
    Goal {
        /// Where the text came from.
        origin: String,
        /// What is wrong with the goal, naming it.
        why: String,
    },
}

impl PresetFile {
    /// Reads a preset from `text`; `origin` (a path) names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<PresetFile, PresetFileError> {
        let file: PresetFile = toml::from_str(text).map_err(|source| PresetFileError::Parse {
            origin: origin.to_owned(),
            source,
        })?;
        for (i, goal) in file.goals.iter().enumerate() {
            goal.check().map_err(|why| PresetFileError::Goal {
                origin: origin.to_owned(),
                why: format!("goals[{i}]: {why}"),
            })?;
        }
        Ok(file)
    }

    /// Reads the preset file at `path`.
    pub fn load(path: &Path) -> Result<PresetFile, PresetFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| PresetFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        PresetFile::parse(&text, &path.display().to_string())
    }
}
