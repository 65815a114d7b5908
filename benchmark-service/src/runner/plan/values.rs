//! The values of the option dimensions that are the plan's own — [`CallMode`], what the
//! payload holds ([`PayloadKind`]) and the whole load point [`LoadShape`] — and the text forms
//! of sizes and counts ([`parse_bytes`], [`parse_count`]) that the command line and the
//! settings files share.
//!
//! Every parser here returns a `String` error that names the rejected text and shows an
//! accepted example, because the same message reaches a user through clap and through a
//! settings file.

use std::str::FromStr;

use strum::{Display, EnumString, IntoStaticStr, VariantNames};

/// How callers wait for their calls; named `sync` / `async` in any ASCII case.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Display, EnumString, IntoStaticStr, VariantNames,
)]
#[strum(
    serialize_all = "lowercase",
    ascii_case_insensitive,
    parse_err_ty = String,
    parse_err_fn = unknown_call_mode
)]
pub enum CallMode {
    /// Each caller waits for its response before the next call.
    Sync,
    /// Callers fire calls without waiting and only record completions.
    Async,
}

fn unknown_call_mode(s: &str) -> String {
    crate::names::unknown::<CallMode>("call mode", s)
}

impl CallMode {
    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// What the bytes of an echo payload (and of each stream item) are; named `fill`, `text`,
/// `random` in any ASCII case. It matters to a compressed body: `fill` shrinks to almost
/// nothing, `text` about as much as a real JSON body, `random` not at all.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Display, EnumString, IntoStaticStr, VariantNames,
)]
#[strum(
    serialize_all = "lowercase",
    ascii_case_insensitive,
    parse_err_ty = String,
    parse_err_fn = unknown_payload_kind
)]
pub enum PayloadKind {
    /// `b'x'` repeated: the suite's payload before kinds existed (the default).
    Fill,
    /// JSON-like text: a record of a dozen fields repeated with varying numbers and names, a
    /// line each — compressible about as much as real API traffic (zstd's fast level:
    /// 3–6×).
    Text,
    /// Bytes of a fast deterministic generator (splitmix64): incompressible.
    Random,
}

fn unknown_payload_kind(s: &str) -> String {
    crate::names::unknown::<PayloadKind>("payload kind", s)
}

impl PayloadKind {
    /// Every kind.
    pub const ALL: [PayloadKind; 3] = [PayloadKind::Fill, PayloadKind::Text, PayloadKind::Random];

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// `len` bytes of this kind. Deterministic: the same kind and length give the same bytes
    /// on every run, so runs compare.
    pub fn bytes(self, len: usize) -> Vec<u8> {
        let mut rng = SplitMix64(0x5eed_b215_c0de_0001);
        match self {
            PayloadKind::Fill => vec![b'x'; len],
            PayloadKind::Random => {
                let mut out = Vec::with_capacity(len + 8);
                while out.len() < len {
                    out.extend_from_slice(&rng.next().to_le_bytes());
                }
                out.truncate(len);
                out
            }
            PayloadKind::Text => {
                let mut out = Vec::with_capacity(len + 256);
                let mut id = 100_000 + rng.below(900_000);
                while out.len() < len {
                    id += 1 + rng.below(7);
                    text_record(&mut out, id, &mut rng);
                }
                out.truncate(len);
                out
            }
        }
    }
}

/// One line of [`PayloadKind::Text`]: a JSON object whose keys repeat from line to line and
/// whose values vary (names and words from short lists, numbers from `rng`).
fn text_record(out: &mut Vec<u8>, id: u64, rng: &mut SplitMix64) {
    use std::io::Write as _;
    const NAMES: [&str; 8] = [
        "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
    ];
    const STATUS: [&str; 4] = ["active", "pending", "suspended", "closed"];
    const CITIES: [&str; 6] = ["Berlin", "Lisbon", "Osaka", "Austin", "Nairobi", "Lima"];
    let mut pick = |n: usize| rng.below(n as u64) as usize;
    let (name, status, city) = (NAMES[pick(8)], STATUS[pick(4)], CITIES[pick(6)]);
    let user = pick(10_000);
    let (score, cents, orders) = (pick(100), pick(100), pick(500));
    let (month, day, hour, minute, second) =
        (1 + pick(12), 1 + pick(28), pick(24), pick(60), pick(60));
    let verified = pick(2) == 0;
    // Writing to a Vec cannot fail.
    let _ = writeln!(
        out,
        "{{\"id\":{id},\"user\":\"{name}{user}\",\"email\":\"{name}.{user}@example.com\",\
         \"status\":\"{status}\",\"verified\":{verified},\"city\":\"{city}\",\
         \"score\":{score}.{cents:02},\"orders\":{orders},\
         \"updated\":\"2024-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z\"}},"
    );
}

/// splitmix64 (Steele, Lea, Flood): a fast generator whose output passes for random; the
/// payloads need nothing more than "does not compress".
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0; the modulo's bias does not matter here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Parses a size like `1024`, `1k`, `1KiB`, `50KB`, `1m` into bytes (k = 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (digits, mult) = if let Some(d) = t
        .strip_suffix("kib")
        .or_else(|| t.strip_suffix("kb"))
        .or_else(|| t.strip_suffix('k'))
    {
        (d, 1024)
    } else if let Some(d) = t
        .strip_suffix("mib")
        .or_else(|| t.strip_suffix("mb"))
        .or_else(|| t.strip_suffix('m'))
    {
        (d, 1024 * 1024)
    } else {
        (t.strip_suffix('b').unwrap_or(&t), 1)
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is not a byte size (e.g. 1024, 1k, 100KiB)"))
}

/// Parses a count like `20000`, `20k`, `1m`, `100_000`.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase().replace('_', "");
    let (digits, mult) = match t.strip_suffix('k') {
        Some(d) => (d.to_owned(), 1000),
        None => match t.strip_suffix('m') {
            Some(d) => (d.to_owned(), 1_000_000),
            None => (t.clone(), 1),
        },
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is not a count (e.g. 20000 or 20k)"))
}

/// One load point given whole, `C:N:P`: C connections, N calls in flight (sync callers), P
/// bytes of echo payload (the `peers` preset; replaces the connections × concurrency × payload
/// cross product).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadShape {
    /// Connections (C).
    pub connections: u32,
    /// Calls in flight (N): the scene's concurrency.
    pub in_flight: u32,
    /// Echo payload bytes (P).
    pub payload: u64,
}

impl LoadShape {
    /// `C:N:P`.
    pub fn label(&self) -> String {
        format!("{}:{}:{}", self.connections, self.in_flight, self.payload)
    }
}

impl FromStr for LoadShape {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.trim().split(':').collect();
        let [c, n, p] = parts[..] else {
            return Err(format!(
                "config `{s}` is not C:N:P (connections : calls in flight : payload bytes)"
            ));
        };
        let positive = |v: &str, what: &str| match v.trim().parse::<u32>() {
            Ok(x) if x > 0 => Ok(x),
            _ => Err(format!("config `{s}`: {what} must be a positive integer")),
        };
        Ok(LoadShape {
            connections: positive(c, "C (connections)")?,
            in_flight: positive(n, "N (calls in flight)")?,
            payload: parse_bytes(p).map_err(|e| format!("config `{s}`: {e}"))?,
        })
    }
}
