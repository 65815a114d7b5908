//! Consistent hashing on a ring of virtual nodes (Ketama style).
//!
//! Each server owns [`VIRTUAL_NODES`] points on a 64-bit ring (scaled by its
//! weight relative to the default weight of 100), placed by hashing its address
//! and the point's number. A call's key hashes onto the ring and goes to the
//! first point at or after it. Because points depend only on addresses:
//! - every client, in every process, maps a key to the same server;
//! - when a server leaves, only the keys it owned move (to the next points);
//!   when it comes back, they move back.
//!
//! A server that is down or excluded is skipped by walking on along the ring,
//! which is the same as removing it, without rebuilding anything.
//!
//! The hash is FNV-1a followed by a 64-bit finalizer (MurmurHash3's `fmix64`):
//! stable across platforms and Rust versions (std's hasher is not promised to
//! be) and well spread for short keys like addresses.

use rpc_registry::DEFAULT_WEIGHT;

use super::Node;

/// Points per server of the default weight.
pub const VIRTUAL_NODES: u32 = 160;

/// The ring for one list of servers.
pub struct HashRing {
    /// (point, index of the node), sorted by point.
    points: Vec<(u64, u32)>,
}

/// The hash a key (or a virtual node) is placed on the ring by.
pub fn key_hash(bytes: &[u8]) -> u64 {
    fmix64(fnv1a(0xcbf2_9ce4_8422_2325, bytes))
}

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

fn point(addr: &str, replica: u32) -> u64 {
    let h = fnv1a(0xcbf2_9ce4_8422_2325, addr.as_bytes());
    let h = fnv1a(h, b"#");
    fmix64(fnv1a(h, &replica.to_le_bytes()))
}

impl HashRing {
    /// Places every node's virtual nodes.
    pub fn new<N: Node>(nodes: &[N]) -> HashRing {
        let mut points = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            let scaled = u64::from(VIRTUAL_NODES) * u64::from(node.weight().max(1))
                / u64::from(DEFAULT_WEIGHT);
            let replicas = scaled.clamp(1, u64::from(VIRTUAL_NODES) * 10) as u32;
            points.extend((0..replicas).map(|r| (point(node.addr(), r), i as u32)));
        }
        // Ties (vanishingly rare) are broken by address, so every client agrees.
        points.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| nodes[a.1 as usize].addr().cmp(nodes[b.1 as usize].addr()))
        });
        HashRing { points }
    }

    /// Points on the ring.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// True when the ring has no points (no nodes).
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The first eligible node at or after `key`'s place on the ring.
    pub fn pick(&self, key: &str, eligible: &impl Fn(usize) -> bool) -> Option<usize> {
        if self.points.is_empty() {
            return None;
        }
        let h = key_hash(key.as_bytes());
        let start = self.points.partition_point(|p| p.0 < h);
        let len = self.points.len();
        (0..len)
            .map(|k| self.points[(start + k) % len].1 as usize)
            .find(|i| eligible(*i))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::nodes;
    use super::*;

    fn owner(ring: &HashRing, key: &str, eligible: impl Fn(usize) -> bool) -> usize {
        ring.pick(key, &eligible).unwrap()
    }

    #[test]
    fn the_same_key_always_lands_on_the_same_server() {
        let ns = nodes(&[100, 100, 100]);
        let ring = HashRing::new(&ns);
        // Another client that lists the servers in another order agrees.
        let mut reversed = nodes(&[100, 100, 100]);
        reversed.reverse();
        let ring_r = HashRing::new(&reversed);
        for k in 0..2000 {
            let key = format!("user-{k}");
            let a = owner(&ring, &key, |_| true);
            assert_eq!(owner(&ring, &key, |_| true), a);
            assert_eq!(reversed[owner(&ring_r, &key, |_| true)].addr, ns[a].addr);
        }
    }

    #[test]
    fn keys_spread_evenly_and_by_weight() {
        let ns = nodes(&[100, 100, 100]);
        let ring = HashRing::new(&ns);
        assert_eq!(ring.len(), 480);
        let mut counts = [0usize; 3];
        for k in 0..30_000 {
            counts[owner(&ring, &format!("key-{k}"), |_| true)] += 1;
        }
        assert!(
            counts.iter().all(|c| (8_000..12_000).contains(c)),
            "{counts:?}"
        );

        let ns = nodes(&[100, 300]);
        let ring = HashRing::new(&ns);
        let mut counts = [0usize; 2];
        for k in 0..40_000 {
            counts[owner(&ring, &format!("key-{k}"), |_| true)] += 1;
        }
        assert!((8_000..12_000).contains(&counts[0]), "{counts:?}");
    }

    #[test]
    fn a_leaving_server_moves_only_its_own_keys() {
        let ns = nodes(&[100, 100, 100, 100]);
        let ring = HashRing::new(&ns);
        let before: Vec<usize> = (0..10_000)
            .map(|k| owner(&ring, &format!("k{k}"), |_| true))
            .collect();

        // Down (skipped) or removed from the list: the same outcome.
        let without: Vec<_> = nodes(&[100, 100, 100, 100])
            .into_iter()
            .filter(|n| n.addr != ns[2].addr)
            .collect();
        let ring_without = HashRing::new(&without);
        let mut moved = 0;
        for (k, was) in before.iter().enumerate() {
            let key = format!("k{k}");
            let skipped = owner(&ring, &key, |i| i != 2);
            let removed = &without[owner(&ring_without, &key, |_| true)].addr;
            assert_eq!(&ns[skipped].addr, removed);
            if *was == 2 {
                moved += 1;
                assert_ne!(skipped, 2);
            } else {
                assert_eq!(skipped, *was, "key {key} moved although its server stayed");
            }
        }
        // About a quarter of the keys, and only those.
        assert!((2_000..3_000).contains(&moved), "{moved}");
    }

    #[test]
    fn hashes_are_stable() {
        // Pinned: changing the hash would remap every key of every user.
        assert_eq!(key_hash(b""), fmix64(0xcbf2_9ce4_8422_2325));
        assert_eq!(key_hash(b"user-1"), 0x41a2_fca5_c684_01c5);
        assert_ne!(key_hash(b"user-1"), key_hash(b"user-2"));
    }
}
