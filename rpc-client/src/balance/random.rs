//! Weighted random: each eligible server with probability weight / total.

use super::{rng, Node};

/// Picks an eligible node with probability proportional to its weight.
pub(super) fn pick<N: Node>(nodes: &[N], eligible: &impl Fn(usize) -> bool) -> Option<usize> {
    let total: u64 = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| eligible(*i))
        .map(|(_, n)| u64::from(n.weight().max(1)))
        .sum();
    if total == 0 {
        return None;
    }
    let mut r = rng::below(total);
    for (i, node) in nodes.iter().enumerate() {
        if !eligible(i) {
            continue;
        }
        let w = u64::from(node.weight().max(1));
        if r < w {
            return Some(i);
        }
        r -= w;
    }
    // Unreachable with a stable `eligible`; a changing one may get here.
    (0..nodes.len()).find(|i| eligible(*i))
}
