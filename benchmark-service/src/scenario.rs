//! [`Scenario`]: one method of the benchmark service (jkbenchmark's "action"), the unit every
//! player implements and every scene names. It lives on its own so that the players, the plan
//! and the reports can all name it without depending on each other.

use strum::{Display, EnumString, IntoStaticStr, VariantNames};

/// A benchmark service method (jkbenchmark's "action").
///
/// Its names (`nth`, `cache`, `file`, `db`, `echo`; `nothing` for `nth`) come from the derives:
/// [`Display`](std::fmt::Display) and [`name`](Self::name) print them, [`FromStr`](std::str::FromStr)
/// reads them in any ASCII case.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Display,
    EnumString,
    IntoStaticStr,
    VariantNames,
)]
#[strum(
    serialize_all = "lowercase",
    ascii_case_insensitive,
    parse_err_ty = String,
    parse_err_fn = unknown_scenario
)]
pub enum Scenario {
    /// `do_nothing`.
    #[strum(to_string = "nth", serialize = "nothing")]
    Nth,
    /// `get_message_from_cache`.
    Cache,
    /// `get_message_from_file`.
    File,
    /// `get_message_from_db`.
    Db,
    /// `echo` with `payload` bytes.
    Echo,
}

fn unknown_scenario(s: &str) -> String {
    crate::names::unknown::<Scenario>("scenario", s)
}

impl Scenario {
    /// Every scenario, from the least to the most blocking (echo last).
    pub const ALL: [Scenario; 5] = [
        Scenario::Nth,
        Scenario::Cache,
        Scenario::File,
        Scenario::Db,
        Scenario::Echo,
    ];

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        self.into()
    }
}
