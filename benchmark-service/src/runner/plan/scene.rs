//! [`Scene`]: one point of the cross product, and the server it runs against
//! ([`ServerChoice`] for brisk, [`VoloTransport`] for volo, [`ServerKey`]). A scene is plain
//! data; its names ([`Scene::name`], [`Scene::label`]) are what every report prints, so they
//! keep jkbenchmark's spelling.

use brisk::{Compression, Dispatch, QueueKind, SerializerKind, WriteMode};

use super::{CallMode, ConnectKind, PayloadKind, Player, Scenario, VoloTransport};

/// The server side of a scene group: one server per (dispatch, queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerChoice {
    /// Dispatch policy.
    pub dispatch: Dispatch,
    /// Worker-pool queue (meaningless, and `None`, for `direct`).
    pub queue: Option<QueueKind>,
}

impl ServerChoice {
    /// The queue's name, or an empty string for direct dispatch.
    pub fn queue_name(&self) -> String {
        self.queue.map(|q| q.to_string()).unwrap_or_default()
    }
}

/// One point of the cross product.
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    /// The framework under test.
    pub player: Player,
    /// Service method.
    pub scenario: Scenario,
    /// Concurrent callers.
    pub concurrency: u32,
    /// Requests in a round (count mode; 0 in time mode, where the window decides).
    pub requests: u64,
    /// Call mode.
    pub call_mode: CallMode,
    /// Connect type (brisk; peers report `fixed`: their own connections, as many as
    /// `connections`).
    pub connect: ConnectKind,
    /// Connections (1 for reused and percall).
    pub connections: u32,
    /// Write mode (brisk only).
    pub write_mode: WriteMode,
    /// Serializer (brisk only).
    pub serializer: SerializerKind,
    /// Body compression (brisk only; `none` for the peers).
    pub compression: Compression,
    /// Payload bytes of echo and of each stream item (0 for other scenarios).
    pub payload: u64,
    /// What the payload's bytes are (`fill` for scenarios without one).
    pub payload_kind: PayloadKind,
    /// The brisk server this scene runs against (`None` for the peers, which have one server
    /// each — volo one per transport).
    pub server: Option<ServerChoice>,
    /// volo's transport, on the client and on the server this scene runs against (`None` for
    /// the other players).
    pub volo_transport: Option<VoloTransport>,
}

/// The server a scene runs against: a player, for brisk its dispatch × queue, for volo its
/// transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerKey {
    /// The framework.
    pub player: Player,
    /// brisk's dispatch × queue (`None` for the peers).
    pub choice: Option<ServerChoice>,
    /// volo's transport (`None` for the other players).
    pub volo_transport: Option<VoloTransport>,
}

impl Scene {
    /// The server this scene runs against.
    pub fn server_key(&self) -> ServerKey {
        ServerKey {
            player: self.player,
            choice: self.server,
            volo_transport: self.volo_transport,
        }
    }

    /// jkbenchmark's scene name, `<player>-<action>-c<conc>-n<requests>-<sync|async>`, with
    /// `requests` the calls of the round (in time mode: those the window measured); then
    /// `-<payload kind>` unless the payload is the default `fill`, and `-<compression>` unless
    /// it is `none` (so the scenes of a run without either keep jkbenchmark's names).
    pub fn name(&self, requests: u64) -> String {
        let mut name = format!(
            "{}-{}-c{}-n{}-{}",
            self.player, self.scenario, self.concurrency, requests, self.call_mode
        );
        if self.payload_kind != PayloadKind::Fill {
            name.push_str(&format!("-{}", self.payload_kind));
        }
        if self.compression != Compression::None {
            name.push_str(&format!("-{}", self.compression));
        }
        name
    }

    /// The payload kind as the results record it: its name where the scenario carries a
    /// payload, empty where it does not (like a payload of 0).
    pub fn payload_kind_name(&self) -> &'static str {
        if self.scenario.uses_payload() {
            self.payload_kind.name()
        } else {
            ""
        }
    }

    /// The options that tell this scene apart from the others of its run, in brackets.
    pub fn options(&self) -> String {
        let mut s = String::from("[");
        match self.server {
            Some(server) => {
                s.push_str(&format!("{}", self.connect));
                if self.connect.uses_connection_count() {
                    s.push_str(&format!("/{}", self.connections));
                }
                s.push_str(&format!(
                    ", write {}, {}, {}",
                    self.write_mode, self.serializer, server.dispatch
                ));
                if let Some(q) = server.queue {
                    s.push_str(&format!("/{q}"));
                }
            }
            None => {
                if let Some(transport) = self.volo_transport {
                    s.push_str(&format!("{transport}, "));
                }
                s.push_str(&format!("{} conn", self.connections));
            }
        }
        if self.scenario.uses_payload() {
            s.push_str(&format!(", {} B", self.payload));
        }
        if self.scenario.is_stream() {
            s.push_str(&format!(
                ", {} msgs/call",
                self.scenario.messages_per_call()
            ));
        }
        s.push(']');
        s
    }

    /// [`name`](Self::name) with the scene's configured requests, then its
    /// [`options`](Self::options).
    pub fn label(&self) -> String {
        format!("{} {}", self.name(self.requests), self.options())
    }
}
