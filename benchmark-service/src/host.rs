//! Facts about the machine the suite runs on, read once where a default depends on them (the
//! server's I/O and worker threads, the runner's concurrency and client threads), and the one
//! thing it may change about it: which CPUs a process runs on ([`pin_process`]).
//!
//! # Why pinning
//!
//! The seeds measured client and server on separate hosts. On one small machine both share
//! every core, and the scheduler's placement of their threads moves the numbers: on 2 cores,
//! brisk's pool dispatch at 10:100 ran in two modes a scene apart, 2.0 or 2.5 µs of server CPU
//! a call (BENCHMARKS.md). `--client-cpus` and `--server-cpus` give each side CPUs of its own,
//! as separate hosts would; every default that counts CPUs then counts only those.
//!
//! A leaf: it depends on nothing in the crate, so any module may ask it.

use std::fmt;
use std::str::FromStr;

/// Logical CPUs this process may use (`std::thread::available_parallelism`), at least 1: when
/// the count cannot be determined, 1 is assumed.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// CPUs by number, written as `taskset -c` takes them: `1`, `0-1`, `0,2-3`.
///
/// ```
/// use benchmark_service::host::CpuList;
///
/// let list: CpuList = "0,2-3".parse().unwrap();
/// assert_eq!(list.cpus(), &[0, 2, 3]);
/// assert_eq!(list.to_string(), "0,2,3");
/// assert!("3-1".parse::<CpuList>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(Vec<usize>);

impl CpuList {
    /// The largest CPU number a list may name (the kernel's affinity mask size).
    pub const MAX_CPU: usize = 1023;

    /// The CPUs, ascending, each once.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }
}

impl FromStr for CpuList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let number = |n: &str| -> Result<usize, String> {
            let n = n.trim();
            let cpu: usize = n.parse().map_err(|_| {
                format!("`{n}` is not a CPU number (write CPUs as `1`, `0-1` or `0,2-3`)")
            })?;
            if cpu > Self::MAX_CPU {
                return Err(format!(
                    "CPU {cpu} is beyond the largest, {}",
                    Self::MAX_CPU
                ));
            }
            Ok(cpu)
        };
        let mut cpus = Vec::new();
        for part in s.split(',') {
            match part.split_once('-') {
                Some((first, last)) => {
                    let (first, last) = (number(first)?, number(last)?);
                    if first > last {
                        return Err(format!("`{}`: a range runs from low to high", part.trim()));
                    }
                    cpus.extend(first..=last);
                }
                None => cpus.push(number(part)?),
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for cpu in &self.0 {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{cpu}")?;
        }
        Ok(())
    }
}

/// Runs this process on `list`'s CPUs only: the calling thread, and every thread it starts
/// afterwards (they inherit it). Call it first thing, before any runtime or thread exists.
/// Linux only; elsewhere an `Unsupported` error.
pub fn pin_process(list: &CpuList) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: an all-zero `cpu_set_t` is the empty set; `CPU_SET` writes inside it for
        // every CPU below `CPU_SETSIZE` (1024), which `CpuList` guarantees (`MAX_CPU`); the
        // kernel reads `size_of::<cpu_set_t>()` bytes of it.
        let set = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &cpu in list.cpus() {
                libc::CPU_SET(cpu, &mut set);
            }
            set
        };
        // SAFETY: `set` is a valid, initialised `cpu_set_t` of the size passed; 0 is this thread.
        let rc =
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = list;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "pinning to CPUs is supported on Linux only",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_least_one_cpu() {
        assert!(super::cpus() >= 1);
    }

    #[test]
    fn cpu_lists_read_as_taskset_writes_them_and_bad_ones_say_why() {
        let list: CpuList = " 3, 0-1 ,1".parse().unwrap();
        assert_eq!(list.cpus(), &[0, 1, 3]);
        assert_eq!(list.to_string(), "0,1,3");
        assert_eq!(list.to_string().parse::<CpuList>().unwrap(), list);
        for (bad, says) in [
            ("", "not a CPU number"),
            ("a", "not a CPU number"),
            ("1,", "not a CPU number"),
            ("2-1", "low to high"),
            ("1024", "beyond the largest"),
            ("-1", "not a CPU number"),
        ] {
            let err = bad.parse::<CpuList>().unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_process_counts_only_its_cpus() {
        // Run in a thread of its own: pinning applies to the calling thread (and the ones it
        // starts), so the test harness's other threads keep their CPUs.
        let first = std::thread::spawn(|| {
            let allowed = cpus();
            pin_process(&"0".parse().unwrap()).map(|()| (allowed, cpus()))
        })
        .join()
        .unwrap();
        let (before, after) = first.expect("CPU 0 exists on every machine");
        assert!(before >= 1);
        assert_eq!(after, 1, "available_parallelism sees the pinned set");
        let nowhere = std::thread::spawn(|| pin_process(&"1023".parse().unwrap()))
            .join()
            .unwrap();
        assert!(nowhere.is_err(), "a CPU the machine lacks is an error");
    }
}
