//! [`Scenario`]: one method of the benchmark service (jkbenchmark's "action"), the unit every
//! player implements and every scene names. It lives on its own so that the players, the plan
//! and the reports can all name it without depending on each other.

use std::fmt;
use std::str::FromStr;

/// A benchmark service method (jkbenchmark's "action").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scenario {
    /// `do_nothing`.
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
        match self {
            Scenario::Nth => "nth",
            Scenario::Cache => "cache",
            Scenario::File => "file",
            Scenario::Db => "db",
            Scenario::Echo => "echo",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "nth" | "nothing" => Ok(Scenario::Nth),
            "cache" => Ok(Scenario::Cache),
            "file" => Ok(Scenario::File),
            "db" => Ok(Scenario::Db),
            "echo" => Ok(Scenario::Echo),
            other => Err(format!(
                "unknown scenario `{other}` (expected nth, cache, file, db or echo)"
            )),
        }
    }
}
