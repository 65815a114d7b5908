//! The cross product of a [`Plan`]: which servers run ([`Plan::servers`]), and the scenes
//! grouped into points ([`Plan::points`]).
//!
//! Invariants the engine and the reports rely on: every list is taken in the order given with
//! repeats dropped (the first occurrence wins), so a run is reproducible from its settings; a
//! point holds exactly the scenes that share scenario, call mode, requests, concurrency,
//! payload and payload kind; a dimension that does not apply to a scene collapses to one value instead of
//! multiplying identical scenes.

use brisk::{Compression, Dispatch, SerializerKind, WriteMode};

use super::{dedup, ConnectKind, PayloadKind, Plan, Player, Scene, ServerChoice, ServerKey};

impl Plan {
    /// The servers to run, in order: dispatch × queue, with `direct` taken once (its
    /// queue is unused).
    pub fn servers(&self) -> Vec<ServerChoice> {
        let mut out = Vec::new();
        for &dispatch in &self.dispatches {
            match dispatch {
                Dispatch::Direct => out.push(ServerChoice {
                    dispatch,
                    queue: None,
                }),
                Dispatch::Pool => out.extend(self.queues.iter().map(|&q| ServerChoice {
                    dispatch,
                    queue: Some(q),
                })),
            }
        }
        dedup(out)
    }

    /// The cross product as a flat list, point by point (see [`points`](Self::points)).
    pub fn scenes(&self) -> Vec<Scene> {
        self.points().into_iter().flatten().collect()
    }

    /// The cross product grouped into *points*: the scenes that share scenario, call mode,
    /// requests, concurrency, payload and payload kind — one x of one chart — and differ only
    /// in player, in brisk's options (compression among them) and in volo's transport. The
    /// runner interleaves a point's scenes round by round, so a slow moment of the machine
    /// lands on every variant instead of on whichever ran then.
    ///
    /// Dimensions that do not apply collapse: payload and payload kind are used by echo and the
    /// streams only (the kind is the outermost of the load dimensions); the connection count by
    /// pooled and fixed only; a player skips scenarios it does not
    /// implement (raw all but echo, tarpc and volo the streams); the
    /// peers take none of brisk's options (one server each, their own connections, as many as
    /// the scene's `connections`), volo runs once per transport (a server each, its own
    /// variants as brisk's dispatches are). With `configs` the `C:N:P` triples replace connections ×
    /// concurrency × payload.
    pub fn points(&self) -> Vec<Vec<Scene>> {
        let mut out = Vec::new();
        for &scenario in &dedup(self.scenarios.clone()) {
            let kinds = if scenario.uses_payload() {
                dedup(self.payload_kinds.clone())
            } else {
                vec![PayloadKind::Fill]
            };
            // (concurrency, connections if fixed by a config, payload), payload outermost.
            let loads: Vec<(u32, Option<u32>, u64)> = match &self.configs {
                Some(configs) => configs
                    .iter()
                    .map(|c| {
                        let payload = if scenario.uses_payload() {
                            c.payload
                        } else {
                            0
                        };
                        (c.in_flight, Some(c.connections), payload)
                    })
                    .collect(),
                None => {
                    let payloads = if scenario.uses_payload() {
                        dedup(self.payloads.clone())
                    } else {
                        vec![0]
                    };
                    let concurrency = dedup(self.concurrency.clone());
                    payloads
                        .iter()
                        .flat_map(|&p| concurrency.iter().map(move |&c| (c, None, p)))
                        .collect()
                }
            };
            // Each load for each payload kind, the kind outermost.
            let shapes: Vec<(u32, Option<u32>, u64, PayloadKind)> = kinds
                .iter()
                .flat_map(|&k| loads.iter().map(move |&(c, n, p)| (c, n, p, k)))
                .collect();
            let requests = match self.scene_secs {
                Some(_) => vec![0],
                None => dedup(self.requests_for(scenario).to_vec()),
            };
            for &call_mode in &dedup(self.call_modes.clone()) {
                for &requests in &requests {
                    for &(concurrency, fixed_conns, payload, payload_kind) in &shapes {
                        let base = Scene {
                            player: Player::Brisk,
                            scenario,
                            concurrency,
                            requests,
                            call_mode,
                            connect: ConnectKind::Fixed,
                            connections: 1,
                            write_mode: WriteMode::Async,
                            serializer: SerializerKind::MsgPack,
                            compression: Compression::None,
                            payload,
                            payload_kind,
                            server: None,
                            volo_transport: None,
                        };
                        let point = self.variants(&base, fixed_conns);
                        if !point.is_empty() {
                            out.push(point);
                        }
                    }
                }
            }
        }
        out
    }

    /// Every player × brisk option (× volo transport) of one point.
    fn variants(&self, base: &Scene, fixed_conns: Option<u32>) -> Vec<Scene> {
        let conns_for = |connect: ConnectKind| match fixed_conns {
            _ if !connect.uses_connection_count() => vec![1],
            Some(c) => vec![c],
            None => dedup(self.connections.clone()),
        };
        let mut point = Vec::new();
        for &player in &dedup(self.players.clone()) {
            if !player.supports(base.scenario) {
                continue;
            }
            if player != Player::Brisk {
                let transports = match player {
                    Player::Volo => dedup(self.volo_transports.clone())
                        .into_iter()
                        .map(Some)
                        .collect(),
                    _ => vec![None],
                };
                for volo_transport in transports {
                    for connections in conns_for(ConnectKind::Fixed) {
                        point.push(Scene {
                            player,
                            connections,
                            volo_transport,
                            ..base.clone()
                        });
                    }
                }
                continue;
            }
            for server in self.servers() {
                for &connect in &dedup(self.connect_types.clone()) {
                    for connections in conns_for(connect) {
                        for &write_mode in &dedup(self.write_modes.clone()) {
                            for &serializer in &dedup(self.serializers.clone()) {
                                for &compression in &dedup(self.compressions.clone()) {
                                    point.push(Scene {
                                        player,
                                        connect,
                                        connections,
                                        write_mode,
                                        serializer,
                                        compression,
                                        server: Some(server),
                                        ..base.clone()
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
        point
    }

    /// The servers the plan's scenes run against, in order of first use.
    pub fn server_keys(&self) -> Vec<ServerKey> {
        dedup(self.scenes().iter().map(Scene::server_key).collect())
    }
}
