//! What a benchmark run measures: the option dimensions, the settings layers that choose
//! their values, the resolved [`Plan`], its cross product of [`Scene`]s, and the presets.
//!
//! Every dimension is a list, as in jkbenchmark, and a [`Scene`] is one point of the cross
//! product. Data flows one way:
//!
//! ```text
//! preset file / flags ──▶ Settings layers ──over──▶ Settings ──resolve──▶ Plan ──▶ points/scenes
//! ```
//!
//! - `values` — the plan's own value types ([`CallMode`], [`PayloadKind`], [`LoadShape`]) and
//!   the text forms
//!   of sizes and counts;
//! - `settings` — [`Settings`], one layer with every field optional; [`Settings::over`] and
//!   [`Settings::resolve`];
//! - `file_values` — how a settings file spells each value (the same words as the flags);
//! - `preset` — the shipped presets (data files compiled in) and [`PresetFile`], the format
//!   `--preset-file` reads;
//! - `goal` — [`Goal`], a target a preset file sets for its run;
//! - `resolved` — [`Plan`] and its checks;
//! - `scene` — [`Scene`] and the server it runs against (brisk's dispatch × queue, volo's
//!   transport);
//! - `cross_product` — servers and points of a plan;
//! - `charts` — what the charts compare and plot unless told.

mod charts;
mod cross_product;
mod file_values;
mod goal;
mod preset;
mod resolved;
mod scene;
mod settings;
mod values;

#[cfg(test)]
mod preset_tests;
#[cfg(test)]
mod tests;

use std::fmt;

pub use crate::players::brisk::{BriskOptions, ConnectKind};
pub use crate::players::volo::Transport as VoloTransport;
pub use crate::players::Player;
pub use crate::scenario::Scenario;
pub use goal::{Goal, GoalMetric};
pub use preset::{Preset, PresetFile, PresetFileError};
pub use resolved::Plan;
pub use scene::{Scene, ServerChoice, ServerKey};
pub use settings::{Settings, DEFAULT_ASYNC_DEPTH, DEFAULT_SCENE, DEFAULT_WARMUP_TIME};
pub use values::{parse_bytes, parse_count, CallMode, LoadShape, PayloadKind};

fn join<T: fmt::Display>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

/// Removes repeated values, keeping the first occurrence's order.
fn dedup<T: PartialEq + Clone>(v: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(v.len());
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Logical CPUs (at least 1).
pub fn cpus() -> u32 {
    u32::try_from(crate::host::cpus()).unwrap_or(u32::MAX)
}
