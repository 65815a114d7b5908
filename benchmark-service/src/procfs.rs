//! What the runner reads about a process from `/proc`: its CPU time (user + system) — the
//! per-call CPU figure of every scene, for every player, read the same way from outside the
//! process so that no framework needs a hook.
//!
//! It is a cumulative counter: a scene reads it at the start and the end of its measured window
//! and divides the difference by the calls completed in it. CPU time comes in clock ticks
//! (10 ms), so it means something over windows of a second or more.
//!
//! The reading and parsing of `/proc/<pid>/stat` is the `procfs` crate's; this module only
//! turns its tick counts into seconds. Off Linux there is no `/proc`, and every reading is
//! `None`.

/// CPU time (user + system, in seconds) the process `pid` has used, from `/proc/<pid>/stat`;
/// `None` when it cannot be read (not Linux, or the process is gone).
///
/// The clock-tick rate is `sysconf(_SC_CLK_TCK)` (read from the auxiliary vector, no libc
/// needed); should it read 0, 100 Hz — the value on every mainstream Linux configuration — is
/// assumed.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        let pid = i32::try_from(pid).ok()?;
        let stat = ::procfs::process::Process::new(pid).ok()?.stat().ok()?;
        Some(cpu_ticks(&stat) as f64 / clock_ticks_per_second() as f64)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// utime + stime: the ticks the process ran in user and in kernel mode (its children excluded).
#[cfg(target_os = "linux")]
fn cpu_ticks(stat: &::procfs::process::Stat) -> u64 {
    stat.utime.saturating_add(stat.stime)
}

#[cfg(target_os = "linux")]
fn clock_ticks_per_second() -> u64 {
    match ::procfs::ticks_per_second() {
        0 => 100,
        hz => hz,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn stat_parsing_handles_odd_command_names() {
        use ::procfs::FromRead;
        let parse_stat_cpu_ticks = |text: &str| {
            ::procfs::process::Stat::from_read(text.as_bytes())
                .ok()
                .map(|s| cpu_ticks(&s))
        };
        // Fields 1–21 as the kernel prints them, then starttime … cnswap (22–36), the ones
        // every kernel since 2.1 has.
        let stat = "1234 (my (odd) prog) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 \
                    100 200 300 400 500 600 700 800 900 1000 1100 1200 1300 1400 1500 1600";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(300));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn own_cpu_time_is_readable_on_linux() {
        #[cfg(target_os = "linux")]
        {
            let hz = clock_ticks_per_second();
            assert!(hz > 0);
            let secs = process_cpu_seconds(std::process::id()).unwrap();
            assert!(secs >= 0.0);
        }
        assert_eq!(process_cpu_seconds(u32::MAX), None);
    }
}
