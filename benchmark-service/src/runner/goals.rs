//! A preset's goals judged over a run's results: each [`Goal`] becomes a [`Claim`] — the
//! subject's scenes against the best rival's at each point within the goal's `at`, round by
//! round, with the goal's ratio as the slack — and is printed with its verdict, the rounds that
//! agree and the median ratio the goal bounds.
//!
//! A side of a goal that is brisk's alone has brisk's other options pinned as the verdicts pin
//! them (`claims::brisk_pins`: one connect type, write mode, serializer and compression), so a
//! run that varies those on top of a preset does not compare pool+json with direct+msgpack.

use std::fmt::Write as _;

use crate::report::{judge, Claim, Filter, Metric, SceneResult};

use super::claims::{brisk_pins, point_keys, POINT};
use super::plan::{Goal, GoalMetric, Plan, Player};

/// `goal` as a claim over the scenes of `plan` (see the module docs).
pub fn goal_claim(plan: &Plan, goal: &Goal) -> Claim {
    let scenes = plan.scenes();
    let brisk: Vec<_> = scenes
        .iter()
        .filter(|s| s.player == Player::Brisk)
        .collect();
    let pins = brisk_pins(&brisk).unwrap_or_default();
    let side = |options: &std::collections::BTreeMap<String, String>| {
        let mut filter: Vec<(String, String)> = options.clone().into_iter().collect();
        if options.get("player").map(String::as_str) == Some(Player::Brisk.name()) {
            filter.extend(
                pins.iter()
                    .filter(|(k, _)| !options.contains_key(k))
                    .cloned(),
            );
        }
        Filter(filter)
    };
    let scope = match goal.point() {
        Ok(Some(point)) => Filter(vec![
            ("connections".into(), point.connections.to_string()),
            ("concurrency".into(), point.in_flight.to_string()),
            ("payload".into(), point.payload.to_string()),
        ]),
        Ok(None) => Filter(Vec::new()),
        // `Goal::check` refuses it when the file is read; judged, it matches nothing.
        Err(_) => Filter::of(&[("connections", "")]),
    };
    let (metric, tolerance) = match goal.metric {
        GoalMetric::Tps => (Metric::Tps, 1.0 / goal.ratio),
        GoalMetric::P50 => (Metric::P50, goal.ratio),
        GoalMetric::P99 => (Metric::P99, goal.ratio),
    };
    Claim {
        text: goal.text.clone(),
        metric,
        scope,
        subject: side(&goal.subject),
        rivals: side(&goal.rivals),
        group_by: point_keys(plan, &POINT),
        tolerance,
    }
}

/// The goals whose point the plan does not run, each as a line saying so (such a goal can only
/// judge "no data").
pub fn goals_off_plan(plan: &Plan, goals: &[Goal]) -> Vec<String> {
    let scenes = plan.scenes();
    goals
        .iter()
        .filter_map(|goal| {
            let at = goal.point().ok().flatten()?;
            let run = scenes.iter().any(|s| {
                s.connections == at.connections
                    && s.concurrency == at.in_flight
                    && s.payload == at.payload
            });
            (!run).then(|| {
                format!(
                    "goal {:?}: this run has no scene at {} (its verdict will be \"no data\")",
                    goal.text,
                    at.label()
                )
            })
        })
        .collect()
}

/// The goals judged over the results, as text lines: each one's verdict, how many rounds agree,
/// and the median of the subject's figure ÷ the best rival's — the figure the goal's ratio
/// bounds: at least it for calls/s, at most it for latencies.
pub fn goal_lines(plan: &Plan, goals: &[Goal], results: &[SceneResult]) -> String {
    let mut out = String::new();
    for goal in goals {
        let j = judge(&goal_claim(plan, goal), results);
        let _ = write!(out, "{}: {}", j.claim, j.verdict);
        if j.compared > 0 {
            let _ = write!(out, " ({}/{} rounds agree", j.agreeing, j.compared);
            if let Some(r) = j.plain_ratio {
                let bound = match goal.metric {
                    GoalMetric::Tps => "≥",
                    GoalMetric::P50 | GoalMetric::P99 => "≤",
                };
                let _ = write!(out, ", median {r:.2}, asks {bound} {}", goal.ratio);
            }
            out.push(')');
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::claims::tests::result;
    use crate::runner::plan::Preset;

    #[test]
    fn the_peers_presets_goals_are_judged_round_by_round_at_their_point() {
        let file = Preset::Peers.file();
        let plan = file.settings.clone().resolve().unwrap();
        assert_eq!(file.goals.len(), 11);
        let echo = |player: &str, dispatch: &str, conns: u32, c: u32, tps: &[f64]| {
            let mut s = result(player, "echo", c, "sync", tps);
            s.connections = conns;
            s.payload = 1024;
            if player == "brisk" {
                s.dispatch = dispatch.into();
                if dispatch == "direct" {
                    s.queue = String::new();
                }
            } else if player == "volo" {
                s.volo_transport = dispatch.into();
            }
            s
        };
        let results = vec![
            // 1:100: pool at 0.85, 0.75 and 0.9 of direct; 10:100 at 0.9 in every round.
            echo("brisk", "direct", 1, 100, &[500.0, 400.0, 500.0]),
            echo("brisk", "pool", 1, 100, &[425.0, 300.0, 450.0]),
            echo("brisk", "direct", 10, 100, &[400.0, 400.0, 400.0]),
            echo("brisk", "pool", 10, 100, &[360.0, 360.0, 360.0]),
            // The best volo transport counts: mux at 100 makes direct only 4× at 1:100.
            echo("volo", "pool", 1, 100, &[50.0, 50.0, 50.0]),
            echo("volo", "mux", 1, 100, &[100.0, 100.0, 100.0]),
        ];
        let lines = goal_lines(&plan, &file.goals, &results);
        let line = |text: &str| {
            lines
                .lines()
                .find(|l| l.starts_with(text))
                .unwrap_or_else(|| panic!("{text}: {lines}"))
        };
        assert_eq!(
            line("pool dispatch ≥ 0.8 × direct's calls/s at 1:100:1024"),
            "pool dispatch ≥ 0.8 × direct's calls/s at 1:100:1024: inconclusive \
             (2/3 rounds agree, median 0.85, asks ≥ 0.8)"
        );
        assert!(
            line("pool dispatch ≥ 0.8 × direct's calls/s at 10:100:1024")
                .ends_with(": holds (3/3 rounds agree, median 0.90, asks ≥ 0.8)"),
            "{lines}"
        );
        assert!(
            line("direct dispatch ≥ 5 × the best volo transport's calls/s at 1:100:1024")
                .ends_with(": inconclusive (2/3 rounds agree, median 5.00, asks ≥ 5)"),
            "the round of 400 is 4× the best volo (mux, 100), not 5×: {lines}"
        );
        assert!(
            line("pool dispatch p50 ≤ 1.2 × direct's at 1:1:1024").ends_with(": no data"),
            "no scene at 1:1: {lines}"
        );
        // A latency goal shows subject ÷ rival, as its ratio bounds it.
        let p50 = |player: &str, dispatch: &str, ms: f64| {
            let mut s = echo(player, dispatch, 1, 1, &[1.0, 1.0, 1.0]);
            for r in &mut s.rounds {
                r.p50_ms = ms;
            }
            s
        };
        // The bound's direction: 1.02 × raw meets "≤ 1.05", 1.10 × does not.
        for (ms, verdict) in [(0.0102, "holds"), (0.011, "does not hold")] {
            let near = [p50("brisk", "direct", ms), p50("raw", "", 0.010)];
            let lines = goal_lines(&plan, &file.goals, &near);
            assert!(
                lines.contains(&format!(
                    "direct dispatch p50 ≤ 1.05 × raw's at 1:1:1024: {verdict}"
                )),
                "{ms}: {lines}"
            );
        }
        let latency = [p50("brisk", "direct", 0.011), p50("raw", "", 0.022)];
        let lines = goal_lines(&plan, &file.goals, &latency);
        assert!(
            lines.contains(
                "direct dispatch p50 ≤ 1.05 × raw's at 1:1:1024: holds \
                 (3/3 rounds agree, median 0.50, asks ≤ 1.05)"
            ),
            "{lines}"
        );
    }
}
