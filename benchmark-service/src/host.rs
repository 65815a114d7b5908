//! Facts about the machine the suite runs on, read once where a default depends on them (the
//! server's I/O and worker threads, the runner's concurrency and client threads).
//!
//! A leaf: it depends on nothing in the crate, so any module may ask it.

/// Logical CPUs this process may use (`std::thread::available_parallelism`), at least 1: when
/// the count cannot be determined, 1 is assumed.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    #[test]
    fn at_least_one_cpu() {
        assert!(super::cpus() >= 1);
    }
}
