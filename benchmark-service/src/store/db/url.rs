//! Database URLs: which backend a URL names, and the same URL with its password hidden.
//!
//! [`parse_url`] is the only place that decides between SQLite and PostgreSQL, so every
//! accepted spelling is listed (and tested) here. [`redact_url`] is applied to every URL before
//! it reaches a log line, an error or [`MessageDb::describe`](super::MessageDb::describe): a
//! password never leaves this process.

use std::path::PathBuf;

use crate::store::error::StoreError;

/// The database a URL names.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum DbTarget {
    /// A SQLite file (created, with its parent directories, when missing).
    SqliteFile(PathBuf),
    /// A private in-memory SQLite database.
    SqliteMemory,
    /// A PostgreSQL server; the URL as given (tokio-postgres parses it).
    Postgres(String),
}

/// The URL used when none is configured: `sqlite:<temp dir>/brisk-bench.db`.
pub(super) fn default_url() -> String {
    format!(
        "sqlite:{}",
        std::env::temp_dir().join("brisk-bench.db").display()
    )
}

/// Which database `url` names; see [`MessageDb::open`](super::MessageDb::open) for the
/// accepted spellings.
pub(super) fn parse_url(url: &str) -> Result<DbTarget, StoreError> {
    let url = url.trim();
    if url.is_empty() {
        return Err(StoreError::InvalidConfig(format!(
            "the database URL is empty; leave it unset for the default {}",
            default_url()
        )));
    }
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        return Ok(DbTarget::Postgres(url.to_string()));
    }
    let path = if lower.starts_with("sqlite:") {
        let rest = &url["sqlite:".len()..];
        let rest = rest.strip_prefix("//").unwrap_or(rest);
        rest.split('?').next().unwrap_or(rest)
    } else if lower.contains("://") {
        return Err(StoreError::UnsupportedUrl {
            url: redact_url(url),
        });
    } else {
        url
    };
    match path {
        "" => Err(StoreError::InvalidConfig(format!(
            "the SQLite URL {url} has no path; use sqlite:PATH or sqlite::memory:"
        ))),
        ":memory:" => Ok(DbTarget::SqliteMemory),
        p => Ok(DbTarget::SqliteFile(PathBuf::from(p))),
    }
}

/// `url` with any password replaced by `***` (userinfo `user:pw@` and `password=` parameters).
pub(super) fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let auth_start = scheme_end + 3;
        let rest = &out[auth_start..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                out.replace_range(auth_start + colon + 1..auth_start + at, "***");
            }
        }
    }
    if let Some(q) = out.find('?') {
        let (base, query) = out.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        out = format!("{base}{}", query.join("&"));
    }
    out
}
