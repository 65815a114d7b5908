//! The values of the option dimensions that are the plan's own — [`CallMode`] and the whole
//! load point [`LoadShape`] — and the text forms of sizes and counts ([`parse_bytes`],
//! [`parse_count`]) that the command line and the settings files share.
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
