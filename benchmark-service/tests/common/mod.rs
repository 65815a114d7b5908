//! What the runner tests share: which failed calls a run may have.

use benchmark_service::runner::RunOutcome;

/// The text of volo-thrift 0.12's connection-pool failure: its pool can fail a call while it
/// dials several connections at once ("wait a idle connection error … dial plan exhausted"),
/// seen in these tests about once in ten runs on a loaded machine. It is volo's error, and the
/// suite reports it as such.
pub const VOLO_POOL_RACE: &str = "wait a idle connection error";

/// The failed calls of `outcome` that are not volo's known pool failure, by scene; and every
/// scene of another player must have no failed call at all.
pub fn unexplained_errors(outcome: &RunOutcome) -> Vec<String> {
    let mut out: Vec<String> = outcome
        .call_errors
        .iter()
        .filter(|(scene, kinds)| {
            !(scene.starts_with("volo-") && kinds.keys().all(|k| k.contains(VOLO_POOL_RACE)))
        })
        .map(|(scene, kinds)| format!("{scene}: {kinds:?}"))
        .collect();
    for s in outcome.scenes.iter().filter(|s| s.player != "volo") {
        if s.errors > 0 && !out.iter().any(|o| o.starts_with(&s.name())) {
            out.push(format!("{}: {} failed calls", s.name(), s.errors));
        }
    }
    out
}
