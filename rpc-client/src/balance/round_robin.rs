//! Round robin: a lock-free counter when every weight is equal (the common
//! case), nginx's smooth weighted round robin otherwise.
//!
//! Smooth WRR spreads a heavy server's turns out instead of giving it a burst:
//! weights 5/1/1 give `a a b a c a a` rather than `a a a a a b c`. Each pick adds
//! every eligible server's weight to its running score, takes the highest, and
//! subtracts the total from the winner.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::Node;

/// Round-robin state for one list of servers.
pub struct RoundRobin {
    uniform: bool,
    next: AtomicUsize,
    scores: Mutex<Vec<i64>>,
}

impl RoundRobin {
    /// State for `nodes`.
    pub fn new<N: Node>(nodes: &[N]) -> RoundRobin {
        let uniform = nodes.windows(2).all(|w| w[0].weight() == w[1].weight());
        RoundRobin {
            uniform,
            next: AtomicUsize::new(0),
            scores: Mutex::new(vec![0; nodes.len()]),
        }
    }

    pub(super) fn pick<N: Node>(
        &self,
        nodes: &[N],
        eligible: &impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let n = nodes.len();
        if n == 0 {
            return None;
        }
        if self.uniform {
            let start = self.next.fetch_add(1, Ordering::Relaxed);
            return (0..n).map(|k| (start + k) % n).find(|i| eligible(*i));
        }
        let mut scores = self.scores.lock();
        if scores.len() != n {
            scores.resize(n, 0);
        }
        let mut total = 0i64;
        let mut best: Option<usize> = None;
        for (i, node) in nodes.iter().enumerate() {
            if !eligible(i) {
                continue;
            }
            let w = i64::from(node.weight().max(1));
            scores[i] += w;
            total += w;
            if best.is_none_or(|b| scores[i] > scores[b]) {
                best = Some(i);
            }
        }
        if let Some(b) = best {
            scores[b] -= total;
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::nodes;
    use super::super::{Balancer, Picker};

    #[test]
    fn equal_weights_take_turns_exactly() {
        let ns = nodes(&[100, 100, 100]);
        let p = Picker::new(Balancer::RoundRobin, &ns);
        let order: Vec<_> = (0..6)
            .map(|_| p.pick(&ns, None, |_| true).unwrap())
            .collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn unequal_weights_are_smooth() {
        let ns = nodes(&[5, 1, 1]);
        let p = Picker::new(Balancer::RoundRobin, &ns);
        let order: Vec<_> = (0..7)
            .map(|_| p.pick(&ns, None, |_| true).unwrap())
            .collect();
        assert_eq!(order, [0, 0, 1, 0, 2, 0, 0]);
    }
}
