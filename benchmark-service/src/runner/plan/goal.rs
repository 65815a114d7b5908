//! [`Goal`]: a target a preset file sets for its run — one set of scenes against another, as a
//! ratio of one figure, at one load point — judged round by round like the seeds' claims.
//!
//! A preset states its goals as data (`[[goals]]` tables), so a run prints whether it met them
//! instead of leaving the ratios to be worked out from the result files:
//!
//! ```toml
//! [[goals]]
//! text = "pool dispatch ≥ 0.8 × direct's calls/s at 1:100:1024"
//! metric = "tps"                                  # tps, p50 or p99
//! at = "1:100:1024"                               # C:N:P; every point when left out
//! subject = { player = "brisk", dispatch = "pool" }
//! rivals = { player = "brisk", dispatch = "direct" }
//! ratio = 0.8
//! ```
//!
//! For `tps` the subject meets the goal in a round when its calls/s are at least `ratio` × the
//! best rival's in that round; for `p50` and `p99` when its latency is at most `ratio` × the
//! best (lowest) rival's. `subject` and `rivals` match scenes by the options of the result
//! files (`player`, `dispatch`, `volo_transport`, …; `a|b` matches either): a scene the subject
//! matches is never its own rival. The checks here run when the file is read, so a goal that
//! names an unknown option, a bad point or a ratio that is not a positive number is an error
//! naming the goal, not a verdict of "no data" after a run of minutes.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::LoadShape;
use crate::report::OPTION_NAMES;

/// The figure a goal compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GoalMetric {
    /// Calls per second: the subject's at least `ratio` × the best rival's.
    Tps,
    /// Median latency: the subject's at most `ratio` × the best rival's.
    P50,
    /// 99th percentile latency: the subject's at most `ratio` × the best rival's.
    P99,
}

/// One `[[goals]]` table of a preset file (see the module docs).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    /// What the goal asks, printed beside its verdict.
    pub text: String,
    /// The figure compared.
    pub metric: GoalMetric,
    /// The load point `C:N:P` the goal is about; every point when absent.
    #[serde(default)]
    pub at: Option<String>,
    /// The options of the subject's scenes.
    pub subject: BTreeMap<String, String>,
    /// The options of the rivals' scenes; the subject is held to the best of them.
    pub rivals: BTreeMap<String, String>,
    /// The ratio the subject must meet (see the module docs).
    pub ratio: f64,
}

impl Goal {
    /// The goal's load point, parsed.
    ///
    /// # Errors
    ///
    /// What is wrong with `at` (see [`check`](Self::check), which reading a file runs).
    pub fn point(&self) -> Result<Option<LoadShape>, String> {
        self.at.as_deref().map(str::parse).transpose()
    }

    /// Whether the goal can be judged: a known option in `subject` and `rivals`, a point
    /// that parses, a positive finite ratio, a subject and rivals that are not the same scenes.
    pub fn check(&self) -> Result<(), String> {
        let name = &self.text;
        if !(self.ratio.is_finite() && self.ratio > 0.0) {
            return Err(format!(
                "goal {name:?}: ratio must be a positive number, not {}",
                self.ratio
            ));
        }
        self.point().map_err(|e| format!("goal {name:?}: {e}"))?;
        for (side, options) in [("subject", &self.subject), ("rivals", &self.rivals)] {
            if options.is_empty() {
                return Err(format!("goal {name:?}: {side} names no option"));
            }
            if let Some(bad) = options.keys().find(|k| !OPTION_NAMES.contains(&k.as_str())) {
                return Err(format!(
                    "goal {name:?}: {side} names {bad:?}, which is not an option of the results \
                     (one of {})",
                    OPTION_NAMES.join(", ")
                ));
            }
        }
        for (option, values) in self.subject.iter().chain(&self.rivals) {
            check_values(option, values).map_err(|e| format!("goal {name:?}: {e}"))?;
        }
        if narrows(&self.rivals, &self.subject) {
            return Err(format!(
                "goal {name:?}: every scene the rivals match is the subject's too, so no rival \
                 would be left (a subject's scene is never its own rival)"
            ));
        }
        Ok(())
    }
}

/// Whether every scene `narrow` matches is one `wide` matches too: each option `wide` names,
/// `narrow` names with values among `wide`'s.
fn narrows(narrow: &BTreeMap<String, String>, wide: &BTreeMap<String, String>) -> bool {
    wide.iter().all(|(option, values)| {
        narrow.get(option).is_some_and(|narrow_values| {
            narrow_values
                .split('|')
                .all(|v| values.split('|').any(|w| w == v))
        })
    })
}

/// Whether `values` (`a|b|…`) can match a result's `option`: no empty or padded alternative,
/// and a known player or dispatch where the option is one of those.
fn check_values(option: &str, values: &str) -> Result<(), String> {
    for value in values.split('|') {
        if value.is_empty() || value.trim() != value {
            return Err(format!(
                "{option} = {values:?}: an empty or padded value matches nothing (write a|b)"
            ));
        }
        let known = match option {
            "player" => value.parse::<crate::players::Player>().is_ok(),
            "dispatch" => matches!(value, "direct" | "pool"),
            _ => true,
        };
        if !known {
            return Err(format!("{option} = {value:?} matches no scene"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goal() -> Goal {
        Goal {
            text: "pool near direct".into(),
            metric: GoalMetric::Tps,
            at: Some("1:100:1024".into()),
            subject: BTreeMap::from([("dispatch".into(), "pool".into())]),
            rivals: BTreeMap::from([("dispatch".into(), "direct".into())]),
            ratio: 0.8,
        }
    }

    #[test]
    fn a_well_formed_goal_checks_and_its_point_parses() {
        let g = goal();
        assert_eq!(g.check(), Ok(()));
        let point = g.point().unwrap().unwrap();
        assert_eq!(
            (point.connections, point.in_flight, point.payload),
            (1, 100, 1024)
        );
        let anywhere = Goal { at: None, ..goal() };
        assert_eq!(anywhere.point(), Ok(None));
    }

    #[test]
    fn a_goal_that_cannot_be_judged_is_refused_with_its_name() {
        let bad = |g: Goal| g.check().unwrap_err();
        let e = bad(Goal {
            ratio: 0.0,
            ..goal()
        });
        assert!(
            e.contains("pool near direct") && e.contains("positive"),
            "{e}"
        );
        assert!(bad(Goal {
            ratio: f64::NAN,
            ..goal()
        })
        .contains("positive"));
        let e = bad(Goal {
            at: Some("1:100".into()),
            ..goal()
        });
        assert!(e.contains("C:N:P"), "{e}");
        let e = bad(Goal {
            subject: BTreeMap::from([("dispach".into(), "pool".into())]),
            ..goal()
        });
        assert!(e.contains("\"dispach\"") && e.contains("dispatch"), "{e}");
        let e = bad(Goal {
            rivals: BTreeMap::new(),
            ..goal()
        });
        assert!(e.contains("rivals names no option"), "{e}");
        let e = bad(Goal {
            rivals: goal().subject,
            ..goal()
        });
        assert!(e.contains("no rival"), "{e}");
        // Rivals narrower than the subject: all of them are the subject's.
        let e = bad(Goal {
            subject: BTreeMap::from([("player".into(), "brisk".into())]),
            rivals: BTreeMap::from([
                ("player".into(), "brisk".into()),
                ("dispatch".into(), "direct".into()),
            ]),
            ..goal()
        });
        assert!(e.contains("no rival"), "{e}");
        // A subject narrower than the rivals is fine: the rest are rivals.
        let fine = Goal {
            subject: BTreeMap::from([
                ("player".into(), "brisk".into()),
                ("dispatch".into(), "pool".into()),
            ]),
            rivals: BTreeMap::from([("player".into(), "brisk".into())]),
            ..goal()
        };
        assert_eq!(fine.check(), Ok(()));
        let e = bad(Goal {
            subject: BTreeMap::from([("dispatch".into(), "pol".into())]),
            ..goal()
        });
        assert!(e.contains("\"pol\" matches no scene"), "{e}");
        let e = bad(Goal {
            rivals: BTreeMap::from([("player".into(), "volo | raw".into())]),
            ..goal()
        });
        assert!(e.contains("padded"), "{e}");
    }
}
