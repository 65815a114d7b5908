//! [`RegistryUrl`]: how a config file names a registry.
//!
//! ```text
//! etcd://HOST:PORT[,HOST:PORT…][/ROOT][?ttl_ms=N&timeout_ms=N]
//! ```
//!
//! - `HOST:PORT…` — the etcd cluster's client endpoints (plain HTTP);
//! - `ROOT` — the key prefix under which brisk keeps its entries (default `/brisk`);
//! - `ttl_ms` — lease TTL of a server's entries (default 10000, at least 1000,
//!   rounded up to whole seconds because etcd counts leases in seconds): how long
//!   a crashed server stays listed;
//! - `timeout_ms` — bound on connecting and on each registry request
//!   (default 3000): an unreachable etcd is an error after this, never a hang.
//!
//! Parsing needs no etcd support compiled in, so a config naming etcd can be
//! validated anywhere; connecting does.

use std::time::Duration;

/// A parsed registry URL.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryUrl {
    /// `etcd://…`
    Etcd(EtcdOptions),
}

/// Where an etcd registry is and how it behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdOptions {
    /// Client endpoints, `host:port`.
    pub endpoints: Vec<String>,
    /// Key prefix of brisk's entries, without a trailing slash (`/brisk`).
    pub root: String,
    /// Lease TTL of registered entries.
    pub ttl: Duration,
    /// Bound on connecting and on each request.
    pub timeout: Duration,
}

impl EtcdOptions {
    /// Default root prefix.
    pub const DEFAULT_ROOT: &'static str = "/brisk";
    /// Default lease TTL.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
    /// Default connect/request timeout.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

    /// Options for an etcd at `endpoints` with the defaults.
    pub fn new<I, S>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        EtcdOptions {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            root: Self::DEFAULT_ROOT.into(),
            ttl: Self::DEFAULT_TTL,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// Sets the root prefix (a leading `/` is added, a trailing one removed).
    pub fn with_root(mut self, root: &str) -> Self {
        self.root = normalize_root(root);
        self
    }

    /// Sets the lease TTL.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets the connect/request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The lease TTL in whole seconds, as etcd wants it (rounded up, at least 1).
    pub fn ttl_secs(&self) -> i64 {
        let ms = self.ttl.as_millis().max(1);
        ms.div_ceil(1000).min(i64::MAX as u128) as i64
    }

    /// The URL these options would be parsed from.
    pub fn url(&self) -> String {
        format!(
            "etcd://{}{}?ttl_ms={}&timeout_ms={}",
            self.endpoints.join(","),
            self.root,
            self.ttl.as_millis(),
            self.timeout.as_millis()
        )
    }

    /// The URL without the query, for messages.
    pub fn short_url(&self) -> String {
        format!("etcd://{}{}", self.endpoints.join(","), self.root)
    }
}

fn normalize_root(root: &str) -> String {
    let trimmed = root.trim_matches('/');
    if trimmed.is_empty() {
        EtcdOptions::DEFAULT_ROOT.into()
    } else {
        format!("/{trimmed}")
    }
}

impl RegistryUrl {
    /// Parses a registry URL; the error says what is wrong and what is expected.
    pub fn parse(url: &str) -> Result<RegistryUrl, String> {
        let url = url.trim();
        let Some(rest) = url.strip_prefix("etcd://") else {
            return Err(format!(
                "`{url}` is not a registry URL: expected etcd://HOST:PORT[,HOST:PORT…][/ROOT][?ttl_ms=N&timeout_ms=N]"
            ));
        };
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (hosts, root) = match rest.split_once('/') {
            Some((h, r)) => (h, normalize_root(r)),
            None => (rest, EtcdOptions::DEFAULT_ROOT.to_string()),
        };
        let mut endpoints = Vec::new();
        for host in hosts.split(',').map(str::trim) {
            let valid = host
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !valid {
                return Err(format!(
                    "`{host}` in `{url}` is not an etcd endpoint HOST:PORT"
                ));
            }
            endpoints.push(host.to_owned());
        }
        let mut options = EtcdOptions::new(endpoints).with_root(&root);
        for pair in query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter(|p| !p.is_empty())
        {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let ms = |min: u64| -> Result<Duration, String> {
                match value.parse::<u64>() {
                    Ok(v) if v >= min => Ok(Duration::from_millis(v)),
                    _ => Err(format!(
                        "`{name}={value}` in `{url}`: expected a number of milliseconds ≥ {min}"
                    )),
                }
            };
            match name {
                "ttl_ms" => options.ttl = ms(1000)?,
                "timeout_ms" => options.timeout = ms(1)?,
                other => {
                    return Err(format!(
                        "unknown parameter `{other}` in `{url}` (known: ttl_ms, timeout_ms)"
                    ))
                }
            }
        }
        Ok(RegistryUrl::Etcd(options))
    }
}

impl std::str::FromStr for RegistryUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RegistryUrl::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn etcd(url: &str) -> EtcdOptions {
        match RegistryUrl::parse(url).unwrap() {
            RegistryUrl::Etcd(o) => o,
        }
    }

    #[test]
    fn defaults_and_full_form() {
        let o = etcd("etcd://127.0.0.1:2379");
        assert_eq!(o.endpoints, ["127.0.0.1:2379"]);
        assert_eq!(o.root, "/brisk");
        assert_eq!(o.ttl, EtcdOptions::DEFAULT_TTL);
        assert_eq!(o.timeout, EtcdOptions::DEFAULT_TIMEOUT);

        let o = etcd("etcd://a:1,b:2/apps/brisk/?ttl_ms=3000&timeout_ms=250");
        assert_eq!(o.endpoints, ["a:1", "b:2"]);
        assert_eq!(o.root, "/apps/brisk");
        assert_eq!(o.ttl, Duration::from_secs(3));
        assert_eq!(o.timeout, Duration::from_millis(250));
        assert_eq!(etcd(&o.url()), o);
        assert_eq!(o.short_url(), "etcd://a:1,b:2/apps/brisk");
    }

    #[test]
    fn ttl_rounds_up_to_seconds() {
        assert_eq!(etcd("etcd://a:1?ttl_ms=1000").ttl_secs(), 1);
        assert_eq!(etcd("etcd://a:1?ttl_ms=2500").ttl_secs(), 3);
    }

    #[test]
    fn errors_say_what_is_expected() {
        for (url, needle) in [
            ("http://a:1", "etcd://HOST:PORT"),
            ("etcd://", "not an etcd endpoint"),
            ("etcd://a", "not an etcd endpoint"),
            ("etcd://a:x", "not an etcd endpoint"),
            ("etcd://a:1?ttl_ms=10", "ttl_ms=10"),
            ("etcd://a:1?timeout_ms=0", "timeout_ms=0"),
            ("etcd://a:1?color=red", "unknown parameter `color`"),
        ] {
            let err = RegistryUrl::parse(url).unwrap_err();
            assert!(err.contains(needle), "{url}: {err}");
        }
    }
}
