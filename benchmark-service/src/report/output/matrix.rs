//! Grouping scenes into chart matrices: which scenes share a chart, which line each is on
//! and where on the x axis.
//!
//! A *matrix* is the scenes of one scenario and call mode — the shape of jkrpc's comparison
//! tables — and of one payload kind unless the kind is among the compared options (a `text`
//! and a `random` echo of one size would otherwise meet at one x of one series). Within it
//! each distinct value of the compared option(s) is one series and a numeric option is the x
//! axis. Invariants:
//! - matrices and series keep the order in which their first scene appears;
//! - a series has at most one point per x: of several scenes at the same x (e.g. the
//!   requests dimension of a cross product) the one with the most requests is kept, the
//!   most reliable, and a later scene replaces an earlier one of equal size (a re-run);
//! - an unknown option to compare by, or a non-numeric x, is an
//!   [`io::ErrorKind::InvalidInput`] error, found before any file is written.

use std::io;

use crate::report::scene::{SceneResult, OPTION_NAMES};

/// One chart matrix: scenes of one scenario and call mode.
pub(super) struct Matrix<'a> {
    pub(super) scenario: &'a str,
    pub(super) call_mode: &'a str,
    /// The payload kind of every scene of the matrix, when it is split by kind (empty when the
    /// kind is compared).
    pub(super) payload_kind: &'a str,
    /// (series value, points as (x, scene)), points in order of first appearance.
    pub(super) series: Vec<(String, Vec<(f64, &'a SceneResult)>)>,
}

impl Matrix<'_> {
    /// The parts that name the matrix: scenario, call mode, and the payload kind unless it is
    /// empty or the default `fill` (so a run without kinds keeps its chart names).
    pub(super) fn name_parts(&self) -> Vec<&str> {
        let mut parts = vec![self.scenario, self.call_mode];
        if !self.payload_kind.is_empty() && self.payload_kind != "fill" {
            parts.push(self.payload_kind);
        }
        parts
    }
}

fn bad_x_axis(x_by: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "cannot use {x_by:?} as the x axis; expected concurrency, requests, connections or payload"
        ),
    )
}

/// Checks that `x_by` names a numeric option, even when there are no scenes to group.
pub(super) fn check_x_axis(x_by: &str) -> io::Result<()> {
    match SceneResult::default().numeric_option(x_by) {
        Some(_) => Ok(()),
        None => Err(bad_x_axis(x_by)),
    }
}

/// Groups `scenes` into matrices. `compare_by` is one of [`OPTION_NAMES`] or several joined
/// by `+` (a series is then named by their non-empty values joined by spaces, `(none)` if
/// all are empty); `x_by` is a numeric option.
pub(super) fn build_matrices<'a>(
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
    let by_kind = !compared.contains(&"payload_kind");
    let mut matrices: Vec<Matrix<'a>> = Vec::new();
    for scene in scenes {
        let payload_kind = if by_kind { &scene.payload_kind[..] } else { "" };
        let value: Option<Vec<String>> = compared.iter().map(|o| scene.option(o)).collect();
        let value = value.map(|v| {
            v.into_iter()
                .filter(|part| !part.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        });
        let (Some(value), Some(x)) = (value, scene.numeric_option(x_by)) else {
            return Err(bad_x_axis(x_by));
        };
        let value = if value.is_empty() {
            "(none)".to_owned()
        } else {
            value
        };
        let pos = match matrices.iter().position(|m| {
            m.scenario == scene.scenario
                && m.call_mode == scene.call_mode
                && m.payload_kind == payload_kind
        }) {
            Some(p) => p,
            None => {
                matrices.push(Matrix {
                    scenario: &scene.scenario,
                    call_mode: &scene.call_mode,
                    payload_kind,
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
        match points.iter_mut().find(|(px, _)| *px == x) {
            Some(slot) if scene.requests >= slot.1.requests => slot.1 = scene,
            Some(_) => {}
            None => points.push((x, scene)),
        }
    }
    Ok(matrices)
}
