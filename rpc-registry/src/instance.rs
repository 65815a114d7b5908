//! [`ServiceInstance`] and how it is laid out in a key-value registry.
//!
//! The layout is part of brisk's contract with operators (they may inspect it
//! with `etcdctl get --prefix /brisk/services/`):
//!
//! ```text
//! <root>/services/<Service>/<host:port>  =  {"addr":"<host:port>","weight":<n>}
//! ```
//!
//! The service name and address are in the key so that a server's entries are
//! unique per service and address; the value repeats the address and adds the
//! weight, so a value alone describes the instance. The helpers here are public
//! so that another key-value registry can use the same layout.

use serde::{Deserialize, Serialize};

/// The service name of an instance that serves every service (a plain address
/// in a static list does).
pub const ANY_SERVICE: &str = "*";

/// The weight of an instance that does not say otherwise.
pub const DEFAULT_WEIGHT: u32 = 100;

/// One server of one service.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServiceInstance {
    /// The service name as the server's router knows it (`Hello`), or
    /// [`ANY_SERVICE`].
    pub service: String,
    /// `host:port` that clients connect to.
    pub addr: String,
    /// Relative share of the load among the service's instances (at least 1).
    pub weight: u32,
}

impl ServiceInstance {
    /// An instance of `service` at `addr` with the default weight.
    pub fn new(service: impl Into<String>, addr: impl Into<String>) -> Self {
        ServiceInstance {
            service: service.into(),
            addr: addr.into(),
            weight: DEFAULT_WEIGHT,
        }
    }

    /// An instance serving every service at `addr` (a static list entry).
    pub fn any(addr: impl Into<String>) -> Self {
        ServiceInstance::new(ANY_SERVICE, addr)
    }

    /// The same instance with another weight (0 is raised to 1).
    pub fn with_weight(mut self, weight: u32) -> Self {
        self.weight = weight.max(1);
        self
    }

    /// True when this instance answers calls to `service`.
    pub fn serves(&self, service: &str) -> bool {
        self.service == service || self.service == ANY_SERVICE
    }
}

/// The JSON value stored under an instance's key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InstanceValue {
    pub addr: String,
    #[serde(default = "default_weight")]
    pub weight: u32,
}

fn default_weight() -> u32 {
    DEFAULT_WEIGHT
}

/// `<root>/services/` — the prefix under which every service lives.
pub fn services_prefix(root: &str) -> String {
    format!("{}/services/", root.trim_end_matches('/'))
}

/// `<root>/services/<service>/` — the prefix of one service's instances.
pub fn service_prefix(root: &str, service: &str) -> String {
    format!("{}{service}/", services_prefix(root))
}

/// The key of one instance.
pub fn instance_key(root: &str, instance: &ServiceInstance) -> String {
    format!(
        "{}{}",
        service_prefix(root, &instance.service),
        instance.addr
    )
}

/// The JSON value of one instance.
pub fn instance_value(instance: &ServiceInstance) -> String {
    let value = InstanceValue {
        addr: instance.addr.clone(),
        weight: instance.weight,
    };
    // Serializing two plain fields cannot fail; fall back to a literal anyway.
    serde_json::to_string(&value).unwrap_or_else(|_| {
        format!(
            "{{\"addr\":\"{}\",\"weight\":{}}}",
            value.addr, value.weight
        )
    })
}

/// Reads an instance back from its key and value. `None` (with the reason) when
/// the key is not under `<root>/services/` or the value is not brisk's JSON:
/// registry content comes from the network and is never trusted to be well formed.
pub fn parse_instance(root: &str, key: &[u8], value: &[u8]) -> Result<ServiceInstance, String> {
    let key = std::str::from_utf8(key).map_err(|_| "key is not UTF-8".to_string())?;
    let prefix = services_prefix(root);
    let rest = key
        .strip_prefix(&prefix)
        .ok_or_else(|| format!("key {key} is not under {prefix}"))?;
    let (service, key_addr) = rest
        .split_once('/')
        .filter(|(s, a)| !s.is_empty() && !a.is_empty())
        .ok_or_else(|| format!("key {key} is not {prefix}<Service>/<host:port>"))?;
    let value: InstanceValue = serde_json::from_slice(value)
        .map_err(|e| format!("value of {key} is not {{\"addr\",\"weight\"}} JSON: {e}"))?;
    let addr = if value.addr.is_empty() {
        key_addr.to_owned()
    } else {
        value.addr
    };
    Ok(ServiceInstance {
        service: service.to_owned(),
        addr,
        weight: value.weight.max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip() {
        let i = ServiceInstance::new("Hello", "10.0.0.1:9000").with_weight(250);
        let key = instance_key("/brisk", &i);
        assert_eq!(key, "/brisk/services/Hello/10.0.0.1:9000");
        let value = instance_value(&i);
        assert_eq!(value, r#"{"addr":"10.0.0.1:9000","weight":250}"#);
        assert_eq!(
            parse_instance("/brisk", key.as_bytes(), value.as_bytes()).unwrap(),
            i
        );
        // A trailing slash on the root changes nothing.
        assert_eq!(instance_key("/brisk/", &i), key);
    }

    #[test]
    fn bad_entries_are_reported_not_trusted() {
        assert!(parse_instance("/brisk", b"/other/x", b"{}").is_err());
        assert!(parse_instance("/brisk", b"/brisk/services/Hello", b"{}").is_err());
        assert!(parse_instance("/brisk", b"/brisk/services/Hello/a:1", b"not json").is_err());
        assert!(parse_instance("/brisk", &[0xff, 0xfe], b"{}").is_err());
        // A missing weight defaults; weight 0 becomes 1; an empty addr comes from the key.
        let i = parse_instance("/brisk", b"/brisk/services/S/a:1", br#"{"addr":""}"#).unwrap();
        assert_eq!((i.addr.as_str(), i.weight), ("a:1", DEFAULT_WEIGHT));
        let i = parse_instance(
            "/brisk",
            b"/brisk/services/S/a:1",
            br#"{"addr":"a:1","weight":0}"#,
        )
        .unwrap();
        assert_eq!(i.weight, 1);
    }

    #[test]
    fn any_serves_everything() {
        assert!(ServiceInstance::any("a:1").serves("Hello"));
        assert!(ServiceInstance::new("Hello", "a:1").serves("Hello"));
        assert!(!ServiceInstance::new("Hello", "a:1").serves("Other"));
    }
}
