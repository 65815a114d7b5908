//! Claims about a run, judged from its rounds: **holds** when every round agrees, **does not
//! hold** when every round disagrees, **inconclusive** otherwise.
//!
//! A [`Claim`] names a subject (e.g. `player=brisk`), its rivals (e.g.
//! `player=tarpc|tonic|volo`), a metric and the options that make one comparison point
//! (`group_by`, e.g. scenario, call mode, concurrency). Within each point the subject's round
//! `r` is compared with the best rival's round `r` — rounds of one point ran interleaved, so
//! round `r` of every variant saw the same moment of the machine. Every (point, round) is one
//! comparison; the verdict is the agreement of all of them. The ratio reported beside it is
//! the median over points of subject ÷ best rival (medians of the rounds), oriented so that
//! above 1 means the subject is better.
//!
//! Judging by agreement instead of by a mean difference is deliberate: on a shared 2-core
//! machine a 5 % mean lead can come from one lucky round; "every round agrees" cannot.

use std::fmt;

use super::rounds::{median, RoundFigures};
use super::scene::SceneResult;

/// What a claim compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Calls per second; higher is better.
    Tps,
    /// Median latency; lower is better.
    P50,
    /// 99th percentile latency; lower is better.
    P99,
}

impl Metric {
    fn of(self, r: &RoundFigures) -> f64 {
        match self {
            Metric::Tps => r.tps,
            Metric::P50 => r.p50_ms,
            Metric::P99 => r.p99_ms,
        }
    }

    fn higher_is_better(self) -> bool {
        self == Metric::Tps
    }

    /// The metric's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Tps => "TPS",
            Metric::P50 => "p50",
            Metric::P99 => "p99",
        }
    }
}

/// Scenes whose options match every `(option, values)` pair; values are `|`-separated
/// alternatives (`player=tarpc|tonic|volo`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter(pub Vec<(String, String)>);

impl Filter {
    /// A filter from `(option, values)` pairs.
    pub fn of(pairs: &[(&str, &str)]) -> Filter {
        Filter(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    /// Whether `scene` matches.
    pub fn matches(&self, scene: &SceneResult) -> bool {
        self.0.iter().all(|(option, values)| {
            scene
                .option(option)
                .is_some_and(|v| values.split('|').any(|alt| alt == v))
        })
    }
}

/// A statement about the run that the rounds can confirm or refute.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The statement, e.g. "brisk beats every peer on nth sync at c=100".
    pub text: String,
    /// What is compared.
    pub metric: Metric,
    /// Which scenes the claim is about.
    pub scope: Filter,
    /// The subject's scenes.
    pub subject: Filter,
    /// The rivals' scenes (the subject must beat the best of them).
    pub rivals: Filter,
    /// Options that make one comparison point.
    pub group_by: Vec<String>,
    /// Slack: the subject "beats" a rival when `subject ≥ rival / tolerance` (higher is better)
    /// or `subject ≤ rival × tolerance` (lower is better); 1.0 means strictly better or equal.
    pub tolerance: f64,
}

/// The outcome of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every round agrees.
    Holds,
    /// Every round disagrees.
    DoesNotHold,
    /// Some rounds agree, some do not.
    Inconclusive,
    /// The run has no scene to compare.
    NoData,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Holds => "holds",
            Verdict::DoesNotHold => "does not hold",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NoData => "no data",
        })
    }
}

/// A judged claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// The claim's text.
    pub claim: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Comparisons (point × round) that agree with the claim.
    pub agreeing: usize,
    /// Comparisons made.
    pub compared: usize,
    /// Median over points of subject ÷ best rival, oriented so that > 1 favours the subject.
    pub ratio: Option<f64>,
    /// Median over points of subject ÷ best rival as they are (for a latency, < 1 favours
    /// the subject): the figure a goal's ratio bounds.
    pub plain_ratio: Option<f64>,
}

impl fmt::Display for Judgement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.claim, self.verdict)?;
        if self.compared > 0 {
            write!(f, " ({}/{} rounds agree", self.agreeing, self.compared)?;
            if let Some(r) = self.ratio {
                write!(f, ", ×{r:.2}")?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

/// A scene's rounds, or its one aggregated figure when it has none recorded.
fn rounds_of(scene: &SceneResult) -> Vec<RoundFigures> {
    if scene.rounds.is_empty() {
        vec![RoundFigures {
            tps: scene.tps,
            p50_ms: scene.p50_ms,
            p99_ms: scene.p99_ms,
        }]
    } else {
        scene.rounds.clone()
    }
}

/// Judges `claim` over `scenes`.
pub fn judge(claim: &Claim, scenes: &[SceneResult]) -> Judgement {
    let in_scope: Vec<&SceneResult> = scenes.iter().filter(|s| claim.scope.matches(s)).collect();
    let key = |s: &SceneResult| -> Vec<String> {
        claim
            .group_by
            .iter()
            .map(|o| s.option(o).unwrap_or_default())
            .collect()
    };
    let mut points: Vec<Vec<String>> = in_scope.iter().map(|s| key(s)).collect();
    points.sort();
    points.dedup();
    let better = |subject: f64, rival: f64| {
        if claim.metric.higher_is_better() {
            subject * claim.tolerance >= rival
        } else {
            subject <= rival * claim.tolerance
        }
    };
    let best_of = |values: &mut dyn Iterator<Item = f64>| {
        if claim.metric.higher_is_better() {
            values.reduce(f64::max)
        } else {
            values.reduce(f64::min)
        }
    };
    let (mut agreeing, mut compared) = (0, 0);
    let mut ratios = Vec::new();
    let mut plain = Vec::new();
    for point in &points {
        let here: Vec<&&SceneResult> = in_scope.iter().filter(|s| key(s) == *point).collect();
        let subjects: Vec<&&SceneResult> = here
            .iter()
            .copied()
            .filter(|s| claim.subject.matches(s))
            .collect();
        let rivals: Vec<Vec<RoundFigures>> = here
            .iter()
            .filter(|s| !claim.subject.matches(s) && claim.rivals.matches(s))
            .map(|s| rounds_of(s))
            .collect();
        if rivals.is_empty() {
            continue;
        }
        for subject in subjects {
            let mine = rounds_of(subject);
            let n = rivals
                .iter()
                .map(Vec::len)
                .chain([mine.len()])
                .min()
                .unwrap_or(0);
            for r in 0..n {
                let Some(best) = best_of(&mut rivals.iter().map(|v| claim.metric.of(&v[r]))) else {
                    continue;
                };
                compared += 1;
                if better(claim.metric.of(&mine[r]), best) {
                    agreeing += 1;
                }
            }
            let med = |v: &[RoundFigures]| {
                let xs: Vec<f64> = v.iter().map(|r| claim.metric.of(r)).collect();
                median(&xs)
            };
            let rival_meds: Vec<f64> = rivals.iter().filter_map(|v| med(v)).collect();
            if let (Some(m), Some(b)) = (med(&mine), best_of(&mut rival_meds.into_iter())) {
                let ratio = if claim.metric.higher_is_better() {
                    m / b
                } else {
                    b / m
                };
                if ratio.is_finite() {
                    ratios.push(ratio);
                }
                if (m / b).is_finite() {
                    plain.push(m / b);
                }
            }
        }
    }
    let verdict = match (agreeing, compared) {
        (_, 0) => Verdict::NoData,
        (a, c) if a == c => Verdict::Holds,
        (0, _) => Verdict::DoesNotHold,
        _ => Verdict::Inconclusive,
    };
    Judgement {
        claim: claim.text.clone(),
        verdict,
        agreeing,
        compared,
        ratio: median(&ratios),
        plain_ratio: median(&plain),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scene(player: &str, c: u32, tps: &[f64]) -> SceneResult {
        let mut s = SceneResult::new(player, "nth", c, 0, "sync");
        s.rounds = tps
            .iter()
            .map(|&t| RoundFigures {
                tps: t,
                p50_ms: 1000.0 / t,
                p99_ms: 2000.0 / t,
            })
            .collect();
        s.tps = median(tps).unwrap_or(0.0);
        s
    }

    fn brisk_beats_peers(metric: Metric) -> Claim {
        Claim {
            text: "brisk beats every peer".into(),
            metric,
            scope: Filter::of(&[("scenario", "nth")]),
            subject: Filter::of(&[("player", "brisk")]),
            rivals: Filter::of(&[("player", "tarpc|tonic")]),
            group_by: vec!["concurrency".into()],
            tolerance: 1.0,
        }
    }

    #[test]
    fn every_round_agreeing_holds_and_every_round_disagreeing_does_not() {
        let scenes = [
            scene("brisk", 1, &[300.0, 310.0, 290.0]),
            scene("tarpc", 1, &[100.0, 120.0, 110.0]),
            scene("tonic", 1, &[200.0, 210.0, 205.0]),
        ];
        let j = judge(&brisk_beats_peers(Metric::Tps), &scenes);
        assert_eq!(j.verdict, Verdict::Holds);
        assert_eq!((j.agreeing, j.compared), (3, 3));
        // 300 / 205 (best rival's median)
        assert!((j.ratio.unwrap() - 300.0 / 205.0).abs() < 1e-9);
        // Latency derived from TPS: brisk is also lower.
        assert_eq!(
            judge(&brisk_beats_peers(Metric::P50), &scenes).verdict,
            Verdict::Holds
        );

        let slow = [
            scene("brisk", 1, &[100.0, 100.0, 100.0]),
            scene("tonic", 1, &[200.0, 210.0, 205.0]),
        ];
        let j = judge(&brisk_beats_peers(Metric::Tps), &slow);
        assert_eq!(j.verdict, Verdict::DoesNotHold);
        assert_eq!(j.agreeing, 0);
        assert!(j.ratio.unwrap() < 1.0);
    }

    #[test]
    fn a_split_is_inconclusive_and_rounds_pair_by_index() {
        // Round 2 of brisk (150) loses to round 2 of tonic (200) though its median wins.
        let scenes = [
            scene("brisk", 1, &[300.0, 150.0, 300.0]),
            scene("tonic", 1, &[200.0, 200.0, 200.0]),
        ];
        let j = judge(&brisk_beats_peers(Metric::Tps), &scenes);
        assert_eq!(j.verdict, Verdict::Inconclusive);
        assert_eq!((j.agreeing, j.compared), (2, 3));
    }

    #[test]
    fn points_are_compared_separately_and_missing_rivals_are_no_data() {
        let scenes = [
            scene("brisk", 1, &[300.0, 300.0]),
            scene("tarpc", 1, &[100.0, 100.0]),
            scene("brisk", 100, &[300.0, 300.0]),
            scene("tarpc", 100, &[400.0, 400.0]),
            // Out of scope: another scenario.
            SceneResult::new("tarpc", "db", 1, 0, "sync"),
        ];
        let j = judge(&brisk_beats_peers(Metric::Tps), &scenes);
        assert_eq!(j.verdict, Verdict::Inconclusive);
        assert_eq!((j.agreeing, j.compared), (2, 4));
        let alone = [scene("brisk", 1, &[1.0])];
        assert_eq!(
            judge(&brisk_beats_peers(Metric::Tps), &alone).verdict,
            Verdict::NoData
        );
    }

    #[test]
    fn tolerance_allows_a_margin() {
        let scenes = [
            scene("brisk", 1, &[95.0, 96.0]),
            scene("tarpc", 1, &[100.0, 100.0]),
        ];
        let mut claim = brisk_beats_peers(Metric::Tps);
        assert_eq!(judge(&claim, &scenes).verdict, Verdict::DoesNotHold);
        claim.tolerance = 1.1;
        assert_eq!(judge(&claim, &scenes).verdict, Verdict::Holds);
    }
}
