//! What the charts of a run show when the settings do not say: the option a chart compares
//! ([`Plan::chart_compare_by`]) and its x axis ([`Plan::chart_x_by`]), both read off the
//! plan's scenes so that a preset needs no chart settings unless it wants an unusual view.

use super::{dedup, Plan, Player, Scene};

impl Plan {
    /// The option the charts compare: `compare_by` if set; else `player` when several players
    /// run, joined by `+` with the first of connect_type, dispatch, queue, write_mode,
    /// serializer, compression, connections, payload_kind that takes more than one value among
    /// brisk's scenes; else that option alone; else `call_mode`; then `+volo_transport` when
    /// volo runs on more than one transport (each its own series, as brisk's dispatches are).
    /// (Unless compared, each payload kind gets charts of its own: see the report's matrices.)
    pub fn chart_compare_by(&self) -> String {
        if let Some(c) = &self.compare_by {
            return c.clone();
        }
        let scenes = self.scenes();
        let distinct = |f: SceneKey| {
            let mut v: Vec<String> = scenes.iter().map(f).collect();
            v.sort();
            v.dedup();
            v.len()
        };
        let brisk: Vec<Scene> = scenes
            .iter()
            .filter(|s| s.player == Player::Brisk)
            .cloned()
            .collect();
        let distinct_brisk = |f: SceneKey| {
            let mut v: Vec<String> = brisk.iter().map(f).collect();
            v.sort();
            v.dedup();
            v.len()
        };
        let candidates: [(&str, SceneKey); 7] = [
            ("connect_type", |s| s.connect.to_string()),
            ("dispatch", |s| {
                s.server.map(|c| c.dispatch.to_string()).unwrap_or_default()
            }),
            ("queue", |s| {
                s.server.map(|c| c.queue_name()).unwrap_or_default()
            }),
            ("write_mode", |s| s.write_mode.to_string()),
            ("serializer", |s| s.serializer.to_string()),
            ("compression", |s| s.compression.to_string()),
            ("connections", |s| s.connections.to_string()),
        ];
        // The payload kind counts among the scenes that carry a payload only.
        let kinds = dedup(
            brisk
                .iter()
                .filter(|s| s.scenario.uses_payload())
                .map(|s| s.payload_kind)
                .collect(),
        );
        let setting = candidates
            .iter()
            .find(|(_, f)| distinct_brisk(*f) > 1)
            .map(|(name, _)| *name)
            .or((kinds.len() > 1).then_some("payload_kind"));
        let players = distinct(|s| s.player.to_string()) > 1;
        let volo_transports = dedup(scenes.iter().filter_map(|s| s.volo_transport).collect());
        let volo = (volo_transports.len() > 1).then_some("volo_transport");
        let compared: Vec<&str> = [players.then_some("player"), setting, volo]
            .into_iter()
            .flatten()
            .collect();
        if compared.is_empty() {
            "call_mode".to_owned()
        } else {
            compared.join("+")
        }
    }

    /// The charts' x axis: `x_by` if set, else `payload` when several payloads are swept at
    /// a single concurrency, else `concurrency`.
    pub fn chart_x_by(&self) -> String {
        if let Some(x) = &self.x_by {
            return x.clone();
        }
        // A payload sweep needs a scenario that carries one (echo, the streams).
        let echo = self.scenarios.iter().any(|s| s.uses_payload());
        if let Some(configs) = &self.configs {
            let payloads = dedup(configs.iter().map(|c| c.payload).collect());
            return if echo && payloads.len() == configs.len() {
                "payload".to_owned()
            } else {
                "concurrency".to_owned()
            };
        }
        if echo
            && dedup(self.payloads.clone()).len() > 1
            && dedup(self.concurrency.clone()).len() == 1
        {
            "payload".to_owned()
        } else {
            "concurrency".to_owned()
        }
    }
}

/// One option of a scene as text.
type SceneKey = fn(&Scene) -> String;
