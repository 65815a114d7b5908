//! Least active: the eligible server with the fewest calls in flight from this
//! client; among equals, weighted random (Dubbo's `leastactive`).
//!
//! In-flight counts are this client's view, which is what it can know without
//! asking: a slow server accumulates calls in flight and receives fewer new ones.

use super::{rng, Node};

/// Picks the least busy eligible node.
pub(super) fn pick<N: Node>(nodes: &[N], eligible: &impl Fn(usize) -> bool) -> Option<usize> {
    let mut least = usize::MAX;
    let mut ties = 0usize;
    let mut total = 0u64;
    let mut first = None;
    for (i, node) in nodes.iter().enumerate() {
        if !eligible(i) {
            continue;
        }
        let active = node.in_flight();
        let w = u64::from(node.weight().max(1));
        if active < least {
            least = active;
            ties = 1;
            total = w;
            first = Some(i);
        } else if active == least {
            ties += 1;
            total += w;
        }
    }
    if ties <= 1 {
        return first;
    }
    let mut r = rng::below(total);
    for (i, node) in nodes.iter().enumerate() {
        if !eligible(i) || node.in_flight() != least {
            continue;
        }
        let w = u64::from(node.weight().max(1));
        if r < w {
            return Some(i);
        }
        r -= w;
    }
    // Counts moved under us between the two passes: the first minimum will do.
    first
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::super::tests::{nodes, spread};
    use super::super::{Balancer, Picker};

    #[test]
    fn busy_servers_get_nothing_while_others_are_idle() {
        let ns = nodes(&[100, 100, 100]);
        ns[0].in_flight.store(5, Ordering::Relaxed);
        ns[2].in_flight.store(1, Ordering::Relaxed);
        let p = Picker::new(Balancer::LeastActive, &ns);
        assert_eq!(spread(&p, &ns, 1000, |_| true), [0, 1000, 0]);
        // The idle one excluded: the next least busy.
        assert_eq!(spread(&p, &ns, 1000, |i| i != 1), [0, 0, 1000]);
    }
}
