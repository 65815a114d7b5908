//! [`Scenario`]: one method of the benchmark service (jkbenchmark's "action"), the unit every
//! player implements and every scene names. It lives on its own so that the players, the plan
//! and the reports can all name it without depending on each other.

use strum::{Display, EnumString, IntoStaticStr, VariantNames};

/// A benchmark service method (jkbenchmark's "action").
///
/// Its names (`nth`, `cache`, `file`, `db`, `echo`, `stream`, `pingpong`; `nothing` for `nth`,
/// `ping-pong` for `pingpong`) come from the derives:
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
    /// `stream_items`: one server stream of [`STREAM_ITEMS`] items of `payload` bytes, every
    /// one read and checked (count and size) before the call counts as done.
    Stream,
    /// `ping_pong`: one bidirectional stream making [`STREAM_ITEMS`] round trips — one item of
    /// `payload` bytes sent, its echo read, then the next — then closed by the caller.
    #[strum(to_string = "pingpong", serialize = "ping-pong")]
    PingPong,
}

/// Items one call of a streaming scenario moves from the server to the caller (`stream`: items
/// of the server stream; `pingpong`: round trips, each one item each way). Fixed, so that a
/// call's cost is comparable across players and runs; the reports multiply calls/s by it for
/// messages/s. 100 items make the stream's set-up (one open, one end) a small part of a call
/// while a call still lasts well under a window.
pub const STREAM_ITEMS: u32 = 100;

fn unknown_scenario(s: &str) -> String {
    crate::names::unknown::<Scenario>("scenario", s)
}

impl Scenario {
    /// Every scenario: the unary ones from the least to the most blocking (echo last), then
    /// the streaming ones.
    pub const ALL: [Scenario; 7] = [
        Scenario::Nth,
        Scenario::Cache,
        Scenario::File,
        Scenario::Db,
        Scenario::Echo,
        Scenario::Stream,
        Scenario::PingPong,
    ];

    /// The unary scenarios (one request, one answer): what every player implements but raw.
    pub const UNARY: [Scenario; 5] = [
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

    /// Whether a call of this scenario is a stream (`stream`, `pingpong`).
    pub fn is_stream(self) -> bool {
        matches!(self, Scenario::Stream | Scenario::PingPong)
    }

    /// Whether the scenario carries `payload` bytes (echo and the streams); the others
    /// ignore the payload dimension.
    pub fn uses_payload(self) -> bool {
        matches!(self, Scenario::Echo | Scenario::Stream | Scenario::PingPong)
    }

    /// Messages one call moves from the server to the caller: [`STREAM_ITEMS`] for the
    /// streams, 1 for a unary call. Calls/s × this is messages/s.
    pub fn messages_per_call(self) -> u64 {
        if self.is_stream() {
            u64::from(STREAM_ITEMS)
        } else {
            1
        }
    }

    /// Application bytes one call of `payload` bytes moves, both ways: echo sends and
    /// receives the payload once, `stream` receives it [`STREAM_ITEMS`] times, `pingpong`
    /// sends and receives it [`STREAM_ITEMS`] times; 0 for the scenarios without a payload.
    pub fn payload_bytes_per_call(self, payload: u64) -> u64 {
        match self {
            Scenario::Echo => payload * 2,
            Scenario::Stream => payload * u64::from(STREAM_ITEMS),
            Scenario::PingPong => payload * 2 * u64::from(STREAM_ITEMS),
            _ => 0,
        }
    }
}
