//! TLS with rustls (feature `tls`): config types, PEM loading, and the client
//! and server handshakes.
//!
//! - [`TlsServerConfig`] (`cert_path`, `key_path`: PEM files) is loaded into a
//!   [`TlsAcceptor`]; [`TlsAcceptor::from_config`] takes a ready
//!   `rustls::ServerConfig` instead.
//! - [`TlsClientConfig`] (`ca_path`: a PEM bundle of trusted CAs, `server_name`:
//!   the name the server certificate must carry) is loaded into a
//!   [`TlsConnector`]; [`TlsConnector::from_config`] takes a ready
//!   `rustls::ClientConfig`.
//!
//! **Mutual TLS** is two optional settings, one per side. A server with
//! `client_ca_path` requires every client to present a certificate that chains
//! to one of those CAs (rustls' `WebPkiClientVerifier`); a client with
//! `cert_path` + `key_path` presents that certificate. Without them nothing
//! changes, and old config files still load (the new keys default to unset).
//!
//! How a refused client sees it depends on the TLS version. With TLS 1.2 the
//! server's verdict is part of the handshake, so the connect fails. With TLS 1.3
//! (the default) the client's side of the handshake is already complete when it
//! sends its certificate, so the connect succeeds and the server's alert
//! (`CertificateRequired`, `UnknownCA`, `BadCertificate`…) arrives on the first
//! read: the calls pending on that connection fail with a `ConnectionClosed`
//! error whose reason names the alert. The server logs the reason ("peer sent no
//! certificates", "invalid peer certificate: UnknownIssuer") and only that
//! connection is closed.
//!
//! Handshakes are bounded by a timeout by their callers and fail with an
//! [`RpcError::Connect`] that says "TLS handshake with … failed: …", never a hang.
//! After the handshake the stream is split with `tokio::io::split`; plain TCP
//! keeps its `into_split` path untouched.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rpc_core::RpcError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::{Deserialize, Serialize};

/// Server TLS settings as written in a config file (`[tls]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsServerConfig {
    /// The server certificate chain (PEM, leaf first).
    pub cert_path: PathBuf,
    /// The server's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_path: PathBuf,
    /// Mutual TLS: the CAs (PEM bundle) client certificates must chain to. When
    /// set, a client without a certificate, or with one these CAs did not
    /// sign, is refused in the handshake. Unset (the default): no client
    /// certificate is asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca_path: Option<PathBuf>,
}

impl TlsServerConfig {
    /// TLS with this certificate chain and key, without client certificates.
    pub fn new(cert_path: impl Into<PathBuf>, key_path: impl Into<PathBuf>) -> Self {
        TlsServerConfig {
            cert_path: cert_path.into(),
            key_path: key_path.into(),
            client_ca_path: None,
        }
    }

    /// Mutual TLS: requires client certificates signed by the CAs in `path`.
    pub fn with_client_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.client_ca_path = Some(path.into());
        self
    }
}

/// Client TLS settings as written in a config file (`[tls]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsClientConfig {
    /// The CA certificates to trust (PEM bundle).
    pub ca_path: PathBuf,
    /// The name the server certificate must be valid for (DNS name or IP).
    pub server_name: String,
    /// Mutual TLS: this client's certificate chain (PEM, leaf first), sent
    /// when the server asks for one. Set together with `key_path`, or neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_path: Option<PathBuf>,
    /// Mutual TLS: the private key of `cert_path` (PEM: PKCS#8, PKCS#1 or SEC1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_path: Option<PathBuf>,
}

impl TlsClientConfig {
    /// TLS trusting the CAs in `ca_path`, expecting `server_name` in the
    /// server certificate, without a client certificate.
    pub fn new(ca_path: impl Into<PathBuf>, server_name: impl Into<String>) -> Self {
        TlsClientConfig {
            ca_path: ca_path.into(),
            server_name: server_name.into(),
            cert_path: None,
            key_path: None,
        }
    }

    /// Mutual TLS: presents this certificate chain and key to the server.
    pub fn with_client_cert(
        mut self,
        cert_path: impl Into<PathBuf>,
        key_path: impl Into<PathBuf>,
    ) -> Self {
        self.cert_path = Some(cert_path.into());
        self.key_path = Some(key_path.into());
        self
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_config_error(key: &str, e: impl fmt::Display) -> RpcError {
    RpcError::config(key, e.to_string())
}

fn load_certs(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, RpcError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| tls_config_error(key, format!("reading {}: {e}", path.display())))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_config_error(key, format!("parsing {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(tls_config_error(
            key,
            format!("{} holds no PEM certificate", path.display()),
        ));
    }
    Ok(certs)
}

fn load_key(path: &Path, key: &str) -> Result<PrivateKeyDer<'static>, RpcError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        tls_config_error(
            key,
            format!("reading a PEM private key from {}: {e}", path.display()),
        )
    })
}

/// The CA bundle at `path` as a root store (each certificate must parse as a CA).
fn load_roots(path: &Path, key: &str) -> Result<rustls::RootCertStore, RpcError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in load_certs(path, key)? {
        roots.add(cert).map_err(|e| {
            tls_config_error(key, format!("a CA certificate in {}: {e}", path.display()))
        })?;
    }
    Ok(roots)
}

/// The accepting side of TLS: shared by every connection of a server.
#[derive(Clone)]
pub struct TlsAcceptor(tokio_rustls::TlsAcceptor);

impl fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsAcceptor")
    }
}

impl TlsAcceptor {
    /// Loads the certificate chain and key named by `config`, and with
    /// `client_ca_path` a verifier that requires client certificates signed by
    /// those CAs.
    pub fn load(config: &TlsServerConfig) -> Result<Self, RpcError> {
        let certs = load_certs(&config.cert_path, "tls.cert_path")?;
        let key = load_key(&config.key_path, "tls.key_path")?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_config_error("tls", e))?;
        let builder = match &config.client_ca_path {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let roots = load_roots(path, "tls.client_ca_path")?;
                // Anonymous clients are refused (the builder's default); no CRLs.
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                )
                .build()
                .map_err(|e| {
                    tls_config_error(
                        "tls.client_ca_path",
                        format!("client certificate verifier from {}: {e}", path.display()),
                    )
                })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let server = builder
            .with_single_cert(certs, key)
            .map_err(|e| tls_config_error("tls", format!("certificate and key: {e}")))?;
        Ok(Self::from_config(server))
    }

    /// Uses a ready rustls server config.
    pub fn from_config(config: rustls::ServerConfig) -> Self {
        TlsAcceptor(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }

    /// Runs the server handshake on `stream`.
    pub async fn accept<S>(
        &self,
        stream: S,
        peer: &str,
    ) -> Result<tokio_rustls::server::TlsStream<S>, RpcError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        self.0.accept(stream).await.map_err(|e| RpcError::Connect {
            addr: peer.to_owned(),
            reason: format!("TLS handshake with {peer} failed: {e}"),
            source: Some(rpc_core::Cause::new(e)),
        })
    }
}

/// The connecting side of TLS: the rustls client config and the server name.
#[derive(Clone)]
pub struct TlsConnector {
    connector: tokio_rustls::TlsConnector,
    server_name: ServerName<'static>,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl PartialEq for TlsConnector {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(self.connector.config(), other.connector.config())
            && self.server_name == other.server_name
    }
}

impl Eq for TlsConnector {}

impl TlsConnector {
    /// Loads the CA bundle named by `config`, and the client certificate and
    /// key when both are set. One without the other is a config error naming
    /// the missing key, checked before any file is read.
    pub fn load(config: &TlsClientConfig) -> Result<Self, RpcError> {
        let client_cert = match (&config.cert_path, &config.key_path) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some((cert, key)),
            (Some(_), None) => {
                return Err(tls_config_error(
                    "tls.key_path",
                    "tls.cert_path (a client certificate) is set but tls.key_path is not: \
                     set its private key too, or remove tls.cert_path",
                ))
            }
            (None, Some(_)) => {
                return Err(tls_config_error(
                    "tls.cert_path",
                    "tls.key_path (a client private key) is set but tls.cert_path is not: \
                     set the client certificate too, or remove tls.key_path",
                ))
            }
        };
        let roots = load_roots(&config.ca_path, "tls.ca_path")?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_config_error("tls", e))?
            .with_root_certificates(roots);
        let client = match client_cert {
            None => builder.with_no_client_auth(),
            Some((cert_path, key_path)) => {
                let certs = load_certs(cert_path, "tls.cert_path")?;
                let key = load_key(key_path, "tls.key_path")?;
                builder.with_client_auth_cert(certs, key).map_err(|e| {
                    tls_config_error("tls", format!("client certificate and key: {e}"))
                })?
            }
        };
        Self::from_config(client, &config.server_name)
    }

    /// Uses a ready rustls client config; `server_name` is what the server
    /// certificate must be valid for.
    pub fn from_config(config: rustls::ClientConfig, server_name: &str) -> Result<Self, RpcError> {
        let server_name = ServerName::try_from(server_name.to_owned())
            .map_err(|e| tls_config_error("tls.server_name", format!("{server_name:?}: {e}")))?;
        Ok(TlsConnector {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }

    /// Runs the client handshake on `stream` (connected to `addr`).
    pub async fn connect<S>(
        &self,
        stream: S,
        addr: &str,
    ) -> Result<tokio_rustls::client::TlsStream<S>, RpcError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        self.connector
            .connect(self.server_name.clone(), stream)
            .await
            .map_err(|e| RpcError::Connect {
                addr: addr.to_owned(),
                reason: format!("TLS handshake with {addr} failed: {e}"),
                source: Some(rpc_core::Cause::new(e)),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(cert: Option<&str>, key: Option<&str>) -> TlsClientConfig {
        TlsClientConfig {
            ca_path: "/nonexistent/ca.pem".into(),
            server_name: "localhost".into(),
            cert_path: cert.map(PathBuf::from),
            key_path: key.map(PathBuf::from),
        }
    }

    fn config_key(err: RpcError) -> String {
        match err {
            RpcError::Config { key, .. } => key,
            other => panic!("expected a config error, got {other}"),
        }
    }

    #[test]
    fn a_client_certificate_needs_its_key_and_the_error_names_the_missing_one() {
        let err = TlsConnector::load(&client(Some("c.pem"), None)).unwrap_err();
        assert!(err.to_string().contains("set its private key too"), "{err}");
        assert_eq!(config_key(err), "tls.key_path");
        let err = TlsConnector::load(&client(None, Some("c.key"))).unwrap_err();
        assert_eq!(config_key(err), "tls.cert_path");
    }

    #[test]
    fn without_a_client_certificate_the_ca_file_is_read_first() {
        // Neither set: the pairing check passes and the (missing) CA is reported.
        let err = TlsConnector::load(&client(None, None)).unwrap_err();
        assert_eq!(config_key(err), "tls.ca_path");
    }

    #[test]
    fn constructors_match_the_file_defaults() {
        let s = TlsServerConfig::new("s.pem", "s.key");
        assert_eq!(s.client_ca_path, None);
        assert_eq!(
            s.with_client_ca("ca.pem").client_ca_path,
            Some(PathBuf::from("ca.pem"))
        );
        let c = TlsClientConfig::new("ca.pem", "localhost").with_client_cert("c.pem", "c.key");
        assert_eq!(c, {
            let mut c = client(Some("c.pem"), Some("c.key"));
            c.ca_path = "ca.pem".into();
            c
        });
    }
}
