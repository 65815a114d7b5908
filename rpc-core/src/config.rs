//! Loading configuration files.
//!
//! Client and server configs are plain serde structs (defined in their crates,
//! each with a builder and jkrpc's defaults). This module reads them from TOML or
//! YAML — chosen by the file extension — and turns any mistake into an
//! [`RpcError::Config`] that names the offending key path (`client.connect_type`),
//! because "invalid type" without a key is useless in a 200-line file.
//!
//! Each format is a cargo feature (`toml`, `yaml`; both on in brisk's
//! defaults), so a build that configures in code pulls in neither parser. A
//! file in a format this build cannot read is a config error that names the
//! feature.

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::RpcError;

/// File formats a config can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFormat {
    /// `.toml`
    Toml,
    /// `.yaml` / `.yml`
    Yaml,
}

impl ConfigFormat {
    /// The format implied by a file name's extension (`.toml`, `.yaml`, `.yml`).
    pub fn from_path(path: &Path) -> Result<Self, RpcError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => Ok(ConfigFormat::Toml),
            Some("yaml") | Some("yml") => Ok(ConfigFormat::Yaml),
            _ => Err(RpcError::config(
                path.display().to_string(),
                "config files must end in .toml, .yaml or .yml",
            )),
        }
    }
}

/// Reads and parses a config file.
pub fn load_file<T: DeserializeOwned>(path: impl AsRef<Path>) -> Result<T, RpcError> {
    let path = path.as_ref();
    let format = ConfigFormat::from_path(path)?;
    let text = std::fs::read_to_string(path).map_err(|e| {
        RpcError::config(
            path.display().to_string(),
            format!("cannot read the config file: {e}"),
        )
    })?;
    parse_str(&text, format)
}

/// Parses config text; errors name the key path.
pub fn parse_str<T: DeserializeOwned>(text: &str, format: ConfigFormat) -> Result<T, RpcError> {
    match format {
        #[cfg(feature = "toml")]
        ConfigFormat::Toml => {
            let de = toml::Deserializer::new(text);
            // toml's Display starts with a position banner; its message is the reason.
            serde_path_to_error::deserialize(de)
                .map_err(|e| path_error(e.path(), &e.inner().message()))
        }
        #[cfg(feature = "yaml")]
        ConfigFormat::Yaml => {
            let de = serde_yaml::Deserializer::from_str(text);
            serde_path_to_error::deserialize(de).map_err(|e| path_error(e.path(), e.inner()))
        }
        #[cfg(not(all(feature = "toml", feature = "yaml")))]
        other => {
            let _ = text;
            Err(not_built(other))
        }
    }
}

/// The error for a format this build has no parser for.
#[cfg(not(all(feature = "toml", feature = "yaml")))]
fn not_built(format: ConfigFormat) -> RpcError {
    let (name, feature) = match format {
        ConfigFormat::Toml => ("TOML", "toml"),
        ConfigFormat::Yaml => ("YAML", "yaml"),
    };
    RpcError::config(
        "(config file)",
        format!(
            "this build cannot read {name}: enable brisk's `{feature}` feature (on by default), \
             or configure in code"
        ),
    )
}

#[cfg(any(feature = "toml", feature = "yaml"))]
fn path_error(path: &serde_path_to_error::Path, err: &dyn std::fmt::Display) -> RpcError {
    let key = path.to_string();
    let key = if key == "." {
        "(top level)".to_string()
    } else {
        key
    };
    // The inner message may carry its own position info; keep the first line.
    let reason = err.to_string();
    let reason = reason.lines().next().unwrap_or("").trim().to_string();
    RpcError::config(key, reason)
}

/// Parses a duration in milliseconds from a config value, rejecting zero where
/// zero makes no sense.
pub fn nonzero_ms(key: &str, ms: u64) -> Result<std::time::Duration, RpcError> {
    if ms == 0 {
        return Err(RpcError::config(key, "must be greater than 0 ms"));
    }
    Ok(std::time::Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ConnectType;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[cfg_attr(not(all(feature = "toml", feature = "yaml")), allow(dead_code))]
    struct Outer {
        client: Inner,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[cfg_attr(not(all(feature = "toml", feature = "yaml")), allow(dead_code))]
    struct Inner {
        connect_type: ConnectType,
        #[serde(default)]
        connections: usize,
    }

    #[test]
    #[cfg(all(feature = "toml", feature = "yaml"))]
    fn toml_and_yaml_parse_the_same_keys() {
        let t: Outer = parse_str(
            "[client]\nconnect_type = \"pooled\"\nconnections = 4\n",
            ConfigFormat::Toml,
        )
        .unwrap();
        assert_eq!(t.client.connect_type, ConnectType::Pooled);
        let y: Outer = parse_str(
            "client:\n  connect_type: reused\n  connections: 3\n",
            ConfigFormat::Yaml,
        )
        .unwrap();
        assert_eq!(y.client.connect_type, ConnectType::Reused);
        assert_eq!(y.client.connections, 3);
    }

    #[test]
    #[cfg(all(feature = "toml", feature = "yaml"))]
    fn a_bad_value_names_its_key() {
        for (text, fmt) in [
            ("[client]\nconnect_type = \"bogus\"\n", ConfigFormat::Toml),
            ("client:\n  connect_type: bogus\n", ConfigFormat::Yaml),
        ] {
            let err = parse_str::<Outer>(text, fmt).unwrap_err();
            match &err {
                RpcError::Config { key, reason } => {
                    assert_eq!(key, "client.connect_type", "{err}");
                    assert!(reason.contains("bogus"), "{err}");
                }
                other => panic!("{other:?}"),
            }
        }
        let err = parse_str::<Outer>(
            "[client]\nconnect_type=\"fixed\"\nconections=2\n",
            ConfigFormat::Toml,
        )
        .unwrap_err();
        assert!(err.to_string().contains("conections"), "{err}");
    }

    #[test]
    fn extension_picks_the_format() {
        assert_eq!(
            ConfigFormat::from_path(Path::new("a.yml")).unwrap(),
            ConfigFormat::Yaml
        );
        assert!(ConfigFormat::from_path(Path::new("a.ini")).is_err());
    }

    #[test]
    #[cfg(not(all(feature = "toml", feature = "yaml")))]
    fn a_format_left_out_of_the_build_names_its_feature() {
        let (format, feature) = if cfg!(feature = "toml") {
            (ConfigFormat::Yaml, "yaml")
        } else {
            (ConfigFormat::Toml, "toml")
        };
        let err = parse_str::<Outer>("", format).unwrap_err();
        assert!(
            err.to_string().contains(&format!("`{feature}` feature")),
            "{err}"
        );
    }
}

/// Serde adapter writing a `Duration` as whole milliseconds, so config keys read
/// `connect_timeout_ms = 500`. Use with `#[serde(with = "rpc_core::config::duration_ms")]`.
pub mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes as milliseconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().min(u64::MAX as u128) as u64)
    }

    /// Deserializes from milliseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// Serde adapter writing a `Duration` as whole microseconds, for the few keys
/// finer than a millisecond (`busy_poll_us = 50`). Use with
/// `#[serde(with = "rpc_core::config::duration_us")]`.
pub mod duration_us {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes as microseconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_micros().min(u64::MAX as u128) as u64)
    }

    /// Deserializes from microseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_micros)
    }
}
