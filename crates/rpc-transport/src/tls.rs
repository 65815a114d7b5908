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
}

/// Client TLS settings as written in a config file (`[tls]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsClientConfig {
    /// The CA certificates to trust (PEM bundle).
    pub ca_path: PathBuf,
    /// The name the server certificate must be valid for (DNS name or IP).
    pub server_name: String,
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

/// The accepting side of TLS: shared by every connection of a server.
#[derive(Clone)]
pub struct TlsAcceptor(tokio_rustls::TlsAcceptor);

impl fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsAcceptor")
    }
}

impl TlsAcceptor {
    /// Loads the certificate chain and key named by `config`.
    pub fn load(config: &TlsServerConfig) -> Result<Self, RpcError> {
        let certs = load_certs(&config.cert_path, "tls.cert_path")?;
        let key = PrivateKeyDer::from_pem_file(&config.key_path).map_err(|e| {
            tls_config_error(
                "tls.key_path",
                format!(
                    "reading a PEM private key from {}: {e}",
                    config.key_path.display()
                ),
            )
        })?;
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_config_error("tls", e))?
            .with_no_client_auth()
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
    /// Loads the CA bundle named by `config`.
    pub fn load(config: &TlsClientConfig) -> Result<Self, RpcError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in load_certs(&config.ca_path, "tls.ca_path")? {
            roots
                .add(cert)
                .map_err(|e| tls_config_error("tls.ca_path", format!("a CA certificate: {e}")))?;
        }
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_config_error("tls", e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
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
            })
    }
}
