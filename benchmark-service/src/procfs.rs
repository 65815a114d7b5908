//! What the runner reads about a process from `/proc`: its CPU time (user + system) — the
//! per-call CPU figure of every scene, for every player, read the same way from outside the
//! process so that no framework needs a hook.
//!
//! It is a cumulative counter: a scene reads it at the start and the end of its measured window
//! and divides the difference by the calls completed in it. CPU time comes in clock ticks
//! (10 ms), so it means something over windows of a second or more.

/// CPU time (user + system, in seconds) the process `pid` has used, from `/proc/<pid>/stat`;
/// `None` when it cannot be read (not Linux, or the process is gone).
///
/// The clock-tick rate comes from the process's auxiliary vector (`AT_CLKTCK` in
/// `/proc/self/auxv`, the value `sysconf(_SC_CLK_TCK)` returns) so no libc binding is needed;
/// when that cannot be read, 100 Hz — the value on every mainstream Linux configuration — is
/// assumed.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let ticks = parse_stat_cpu_ticks(&stat)?;
    Some(ticks as f64 / clock_ticks_per_second() as f64)
}

/// utime + stime from the text of `/proc/<pid>/stat`. The command name (field 2) is in
/// parentheses and may contain spaces or parentheses, so fields are counted after the last `)`:
/// there, field 3 (state) is index 0, utime (field 14) index 11, stime (field 15) index 12.
fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks_per_second() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::fs::read("/proc/self/auxv")
            .ok()
            .and_then(|auxv| auxv_value(&auxv, AT_CLKTCK))
            .filter(|&hz| hz > 0)
            .unwrap_or(100)
    })
}

/// `AT_CLKTCK` in `<elf.h>`: the frequency of `times()`, i.e. `sysconf(_SC_CLK_TCK)`.
const AT_CLKTCK: u64 = 17;

/// Looks `key` up in an auxiliary vector: native-endian (type, value) pairs of `usize`.
fn auxv_value(auxv: &[u8], key: u64) -> Option<u64> {
    const WORD: usize = std::mem::size_of::<usize>();
    auxv.chunks_exact(2 * WORD).find_map(|pair| {
        let (k, v) = pair.split_at(WORD);
        let word = |bytes: &[u8]| -> Option<u64> {
            let array: [u8; WORD] = bytes.try_into().ok()?;
            Some(usize::from_ne_bytes(array) as u64)
        };
        (word(k)? == key).then(|| word(v)).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_handles_odd_command_names() {
        let stat = "1234 (my (odd) prog) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(300));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn own_cpu_time_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            let hz = clock_ticks_per_second();
            assert!(hz > 0);
            let secs = process_cpu_seconds(std::process::id()).unwrap();
            assert!(secs >= 0.0);
        }
        assert_eq!(process_cpu_seconds(u32::MAX), None);
    }

    #[test]
    fn auxv_lookup() {
        let mut v = Vec::new();
        for (k, val) in [(6usize, 4096usize), (17, 100), (0, 0)] {
            v.extend_from_slice(&k.to_ne_bytes());
            v.extend_from_slice(&val.to_ne_bytes());
        }
        assert_eq!(auxv_value(&v, 17), Some(100));
        assert_eq!(auxv_value(&v, 99), None);
    }
}
