//! Load balancers: which server of a service gets the next call.
//!
//! A client with several servers asks its balancer once per attempt. The
//! balancers here are the classic four (Dubbo's set), each a pure function of
//! what it is shown, so they are unit-tested without a network:
//!
//! | [`Balancer`] | picks | good for |
//! |---|---|---|
//! | `random` (default) | weighted random | even spread without coordination |
//! | `round_robin` | smooth weighted round robin (nginx's); a lock-free counter when all weights are equal | even spread, deterministic order |
//! | `consistent_hash` | the server owning the call's [`hash_key`](crate::CallOptions::hash_key) on a ring of virtual nodes | stickiness: the same key goes to the same server (caches, sessions); when a server leaves only its keys move |
//! | `least_active` | the server with the fewest calls in flight from this client, ties by weight | uneven or slow servers |
//!
//! A [`Picker`] is built for one list of servers (rebuilt whenever the list
//! changes, so its state — a counter, a ring — always matches the list) and
//! chooses among the *eligible* ones: the client excludes servers that are marked
//! down or that just failed this call. The consistent hash walks the ring past
//! an ineligible server to the next one, so a server that is down moves only its
//! own keys, and they come back when it does.

mod consistent_hash;
mod least_active;
mod random;
mod round_robin;

pub use consistent_hash::{key_hash, HashRing, VIRTUAL_NODES};
pub use round_robin::RoundRobin;

rpc_core::named_enum! {
    /// The load-balancing policy of a client (config key `balancer`).
    #[derive(Default)]
    pub enum Balancer: "balancer" {
        /// Weighted random.
        #[default]
        Random => "random",
        /// Smooth weighted round robin.
        RoundRobin => "round_robin",
        /// Consistent hash of [`CallOptions::hash_key`](crate::CallOptions::hash_key)
        /// (weighted random for calls without a key).
        ConsistentHash => "consistent_hash",
        /// Fewest calls in flight, ties broken by weighted random.
        LeastActive => "least_active",
    }
}

/// What a balancer sees of one server.
pub trait Node {
    /// `host:port`; what the consistent hash places on its ring.
    fn addr(&self) -> &str;
    /// Relative share of the load (at least 1).
    fn weight(&self) -> u32;
    /// Calls this client has in flight to the server.
    fn in_flight(&self) -> usize;
}

/// A balancer's state for one list of servers.
pub enum Picker {
    /// Weighted random: stateless.
    Random,
    /// A counter and the smooth round-robin weights.
    RoundRobin(RoundRobin),
    /// The ring of virtual nodes.
    ConsistentHash(HashRing),
    /// Reads in-flight counts: stateless.
    LeastActive,
}

impl Picker {
    /// The state of `balancer` for `nodes`.
    pub fn new<N: Node>(balancer: Balancer, nodes: &[N]) -> Picker {
        match balancer {
            Balancer::Random => Picker::Random,
            Balancer::RoundRobin => Picker::RoundRobin(RoundRobin::new(nodes)),
            Balancer::ConsistentHash => Picker::ConsistentHash(HashRing::new(nodes)),
            Balancer::LeastActive => Picker::LeastActive,
        }
    }

    /// The index in `nodes` (the list this picker was built for) of the server
    /// for the next call, among those `eligible` accepts; `None` when it accepts
    /// none.
    pub fn pick<N: Node>(
        &self,
        nodes: &[N],
        hash_key: Option<&str>,
        eligible: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        if nodes.len() == 1 {
            return eligible(0).then_some(0);
        }
        match self {
            Picker::Random => random::pick(nodes, &eligible),
            Picker::RoundRobin(rr) => rr.pick(nodes, &eligible),
            Picker::ConsistentHash(ring) => match hash_key {
                Some(key) => ring.pick(key, &eligible),
                None => random::pick(nodes, &eligible),
            },
            Picker::LeastActive => least_active::pick(nodes, &eligible),
        }
    }
}

/// A small per-thread random generator (xorshift64*): balancing needs speed
/// and spread, not cryptographic quality, and no lock.
pub(crate) mod rng {
    use std::cell::Cell;
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};

    thread_local! {
        static STATE: Cell<u64> = Cell::new(RandomState::new().build_hasher().finish() | 1);
    }

    /// A uniformly distributed `u64`.
    pub fn next_u64() -> u64 {
        STATE.with(|s| {
            let mut x = s.get();
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            s.set(x);
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        })
    }

    /// A uniform number in `0..n` (`n > 0`), by multiply-shift (no modulo bias
    /// worth speaking of at these sizes).
    pub fn below(n: u64) -> u64 {
        ((u128::from(next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A node for balancer tests.
    pub struct TestNode {
        pub addr: String,
        pub weight: u32,
        pub in_flight: AtomicUsize,
    }

    impl Node for TestNode {
        fn addr(&self) -> &str {
            &self.addr
        }
        fn weight(&self) -> u32 {
            self.weight
        }
        fn in_flight(&self) -> usize {
            self.in_flight.load(Ordering::Relaxed)
        }
    }

    pub fn nodes(weights: &[u32]) -> Vec<TestNode> {
        weights
            .iter()
            .enumerate()
            .map(|(i, w)| TestNode {
                addr: format!("10.0.0.{}:9000", i + 1),
                weight: *w,
                in_flight: AtomicUsize::new(0),
            })
            .collect()
    }

    /// Picks `n` times and counts per node.
    pub fn spread(
        picker: &Picker,
        nodes: &[TestNode],
        n: usize,
        eligible: impl Fn(usize) -> bool + Copy,
    ) -> Vec<usize> {
        let mut counts = vec![0; nodes.len()];
        for _ in 0..n {
            if let Some(i) = picker.pick(nodes, None, eligible) {
                counts[i] += 1;
            }
        }
        counts
    }

    #[test]
    fn names_round_trip() {
        for &b in Balancer::ALL {
            assert_eq!(b.name().parse::<Balancer>().unwrap(), b);
            assert_eq!(b.to_string(), b.name());
        }
        assert!("fastest"
            .parse::<Balancer>()
            .unwrap_err()
            .to_string()
            .contains("round_robin"));
    }

    #[test]
    fn weighted_balancers_follow_weights_and_skip_the_ineligible() {
        let ns = nodes(&[100, 200, 100]);
        for balancer in [
            Balancer::Random,
            Balancer::RoundRobin,
            Balancer::LeastActive,
        ] {
            let picker = Picker::new(balancer, &ns);
            let counts = spread(&picker, &ns, 40_000, |_| true);
            // Expected 10000 / 20000 / 10000; allow 5 % for the random ones.
            for (i, expect) in [10_000.0, 20_000.0, 10_000.0].iter().enumerate() {
                let got = counts[i] as f64;
                assert!(
                    (got - expect).abs() / expect < 0.05,
                    "{balancer}: {counts:?}"
                );
            }
            let counts = spread(&picker, &ns, 3000, |i| i != 1);
            assert_eq!(counts[1], 0, "{balancer}: {counts:?}");
            assert!(
                counts[0] > 1000 && counts[2] > 1000,
                "{balancer}: {counts:?}"
            );
            assert_eq!(picker.pick(&ns, None, |_| false), None);
        }
    }

    #[test]
    fn one_node_is_picked_without_asking_the_balancer() {
        let ns = nodes(&[5]);
        for &balancer in Balancer::ALL {
            let picker = Picker::new(balancer, &ns);
            assert_eq!(picker.pick(&ns, Some("k"), |_| true), Some(0));
            assert_eq!(picker.pick(&ns, Some("k"), |_| false), None);
        }
    }

    #[test]
    fn rng_is_uniform_enough() {
        let mut buckets = [0u32; 10];
        for _ in 0..100_000 {
            buckets[rng::below(10) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|b| (9_000..11_000).contains(b)),
            "{buckets:?}"
        );
    }
}
