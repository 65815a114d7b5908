//! How a settings file spells the values of a [`Settings`](super::Settings) layer: the serde
//! `deserialize_with` functions its fields name.
//!
//! The rule is "the same words as the command line": names (players, scenarios, call modes,
//! connect types, write modes, serializers, dispatches, queues, volo transports, `C:N:P` load
//! points) go through the same `FromStr` as the flags, so they accept the same spellings and
//! fail with the same message; sizes and counts are integers or the flags' text forms (`"10k"`,
//! `"100KiB"`); durations are numbers in the unit their key names (`scene_secs`, `warmup_ms`).
//! Every error is a serde custom error, so the TOML reader puts the file's line and column in
//! front of it.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use super::{cpus, parse_bytes, parse_count, Scenario};

/// A list of names, each read by `T`'s `FromStr` (surrounding spaces ignored).
pub(super) fn names<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|text| text.trim().parse().map_err(de::Error::custom))
        .collect::<Result<_, _>>()
        .map(Some)
}

/// A number of seconds, integer or fractional, between 0 and 3600 (0 = count mode).
pub(super) fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let secs = f64::deserialize(d)?;
    if secs.is_finite() && (0.0..=3600.0).contains(&secs) {
        Ok(Some(Duration::from_secs_f64(secs)))
    } else {
        Err(de::Error::custom(format!(
            "`{secs}` is not a number of seconds between 0 and 3600"
        )))
    }
}

/// A whole number of milliseconds.
pub(super) fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    u64::deserialize(d).map(|ms| Some(Duration::from_millis(ms)))
}

/// One count: an integer or [`parse_count`]'s text (`"20k"`).
pub(super) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Amount::deserialize(d)?
        .read(parse_count)
        .map(Some)
        .map_err(de::Error::custom)
}

/// A list of counts (see [`count`]).
pub(super) fn counts<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u64>>, D::Error> {
    read_all(Vec::<Amount>::deserialize(d)?, parse_count)
        .map(Some)
        .map_err(de::Error::custom)
}

/// A list of byte sizes: integers or [`parse_bytes`]'s text (`"10k"`, `"100KiB"`).
pub(super) fn byte_sizes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u64>>, D::Error> {
    read_all(Vec::<Amount>::deserialize(d)?, parse_bytes)
        .map(Some)
        .map_err(de::Error::custom)
}

/// A list of caller counts: integers, or `"cpus"` for the machine's logical CPUs ([`cpus`]),
/// read when the file is.
pub(super) fn concurrency<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u32>>, D::Error> {
    let read = |text: &str| -> Result<u64, String> {
        if text.trim().eq_ignore_ascii_case("cpus") {
            Ok(u64::from(cpus()))
        } else {
            Err(format!(
                "`{text}` is not a concurrency (an integer, or \"cpus\" for the logical CPUs)"
            ))
        }
    };
    read_all(Vec::<Amount>::deserialize(d)?, read)
        .map_err(de::Error::custom)?
        .into_iter()
        .map(|n| {
            u32::try_from(n).map_err(|_| de::Error::custom(format!("concurrency {n} is too large")))
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// A table of request counts per scenario, e.g. `{ nth = [20000], db = ["5k"] }`.
pub(super) fn counts_by_scenario<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<Scenario, Vec<u64>>>, D::Error> {
    BTreeMap::<String, Vec<Amount>>::deserialize(d)?
        .into_iter()
        .map(|(name, amounts)| {
            let scenario = name.trim().parse().map_err(de::Error::custom)?;
            let counts = read_all(amounts, parse_count).map_err(de::Error::custom)?;
            Ok((scenario, counts))
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// A size or count as the file gives it: a non-negative integer, or text for a parser.
enum Amount {
    Whole(u64),
    Text(String),
}

impl Amount {
    fn read(self, parse: impl Fn(&str) -> Result<u64, String>) -> Result<u64, String> {
        match self {
            Amount::Whole(n) => Ok(n),
            Amount::Text(text) => parse(&text),
        }
    }
}

fn read_all(
    amounts: Vec<Amount>,
    parse: impl Fn(&str) -> Result<u64, String>,
) -> Result<Vec<u64>, String> {
    amounts.into_iter().map(|a| a.read(&parse)).collect()
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AmountVisitor)
    }
}

struct AmountVisitor;

impl Visitor<'_> for AmountVisitor {
    type Value = Amount;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-negative integer or a string such as \"10k\"")
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Amount, E> {
        Ok(Amount::Whole(n))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Amount, E> {
        u64::try_from(n)
            .map(Amount::Whole)
            .map_err(|_| E::custom(format!("{n} is negative")))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Amount, E> {
        Ok(Amount::Text(text.to_owned()))
    }
}
