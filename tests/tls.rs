//! TLS (feature `tls`): calls over TLS with every connect type, a client that
//! trusts another CA, a plain client against a TLS server (and the server
//! serving TLS clients afterwards), a TLS client against a plain server, and
//! mutual TLS (client certificates: accepted, missing, signed by another CA,
//! configured without a key). Certificates are generated per test with `rcgen`.
#![cfg(feature = "tls")]

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use brisk::tls::{rustls, TlsClientConfig, TlsServerConfig};
use brisk::{Client, ClientConfig, Connect, ConnectType, Dispatch, QueueKind, RpcError};
use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;

/// A CA, a server certificate for `localhost` and a client certificate (for
/// mutual TLS), both signed by that CA, as PEM files.
struct Pki {
    dir: PathBuf,
    ca_path: PathBuf,
    cert_path: PathBuf,
    key_path: PathBuf,
    client_cert_path: PathBuf,
    client_key_path: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn new_pki() -> Pki {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("brisk-tls-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("brisk test CA {n}"));
    let ca_key = KeyPair::generate().expect("CA key");
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");

    let params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("server params");
    let key = KeyPair::generate().expect("server key");
    let cert = params
        .signed_by(&key, &ca, &ca_key)
        .expect("server certificate");

    let mut client_params = CertificateParams::new(Vec::<String>::new()).expect("client params");
    client_params
        .distinguished_name
        .push(DnType::CommonName, format!("brisk test client {n}"));
    client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().expect("client key");
    let client_cert = client_params
        .signed_by(&client_key, &ca, &ca_key)
        .expect("client certificate");

    let pki = Pki {
        ca_path: dir.join("ca.pem"),
        cert_path: dir.join("server.pem"),
        key_path: dir.join("server.key"),
        client_cert_path: dir.join("client.pem"),
        client_key_path: dir.join("client.key"),
        dir,
    };
    std::fs::write(&pki.ca_path, ca.pem()).expect("write CA");
    std::fs::write(&pki.cert_path, cert.pem()).expect("write cert");
    std::fs::write(&pki.key_path, key.serialize_pem()).expect("write key");
    std::fs::write(&pki.client_cert_path, client_cert.pem()).expect("write client cert");
    std::fs::write(&pki.client_key_path, client_key.serialize_pem()).expect("write client key");
    pki
}

fn tls_server_config(pki: &Pki, dispatch: Dispatch, queue: QueueKind) -> brisk::ServerConfig {
    let mut config = server_config(dispatch, queue);
    config.tls = Some(TlsServerConfig::new(&pki.cert_path, &pki.key_path));
    config
}

/// A server that requires client certificates signed by `pki`'s CA.
fn mtls_server_config(pki: &Pki) -> brisk::ServerConfig {
    let mut config = server_config(Dispatch::Direct, QueueKind::Transfer);
    config.tls =
        Some(TlsServerConfig::new(&pki.cert_path, &pki.key_path).with_client_ca(&pki.ca_path));
    config
}

fn tls_client_config(pki: &Pki, addr: std::net::SocketAddr, ct: ConnectType) -> ClientConfig {
    ClientConfig {
        addr: addr.to_string(),
        connect: Connect::sized(ct, 2),
        request_timeout: Duration::from_secs(5),
        tls: Some(TlsClientConfig::new(&pki.ca_path, "localhost")),
        ..Default::default()
    }
}

/// A client that trusts `server`'s CA and presents `client`'s certificate.
fn mtls_client_config(
    server: &Pki,
    client: &Pki,
    addr: std::net::SocketAddr,
    ct: ConnectType,
) -> ClientConfig {
    let mut config = tls_client_config(server, addr, ct);
    config.tls = Some(
        TlsClientConfig::new(&server.ca_path, "localhost")
            .with_client_cert(&client.client_cert_path, &client.client_key_path),
    );
    config
}

async fn exercise(calc: &CalcClient) {
    let mut tasks = Vec::new();
    for t in 0..8i64 {
        let calc = calc.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..20i64 {
                assert_eq!(calc.add(t * 100, i).await.expect("TLS call"), t * 100 + i);
            }
        }));
    }
    for t in tasks {
        t.await.expect("caller task");
    }
    // Larger than a TLS record (16 KiB): several records per frame.
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(calc.echo(data.clone()).await.expect("large echo"), data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_over_tls_succeed_with_every_connect_type() {
    bounded(60, async {
        let pki = new_pki();
        for (name, dispatch, queue) in [dispatch_variants()[0], dispatch_variants()[2]] {
            let (server, _) = start(tls_server_config(&pki, dispatch, queue)).await;
            for ct in ConnectType::ALL {
                let client = Client::builder()
                    .config(tls_client_config(&pki, server.local_addr(), *ct))
                    .build()
                    .await
                    .expect("TLS client connects");
                exercise(&CalcClient::new(client)).await;
                eprintln!("ok: {name} {ct}");
            }
            // A TLS connection's bytes go through its session: it never
            // lends its socket to the pool's workers.
            assert_eq!(server.stats().worker_writes, 0, "{name}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_works_over_a_unix_socket_too() {
    bounded(30, async {
        let pki = new_pki();
        let path = pki.dir.join("calc.sock");
        let mut config = tls_server_config(&pki, Dispatch::Direct, QueueKind::Transfer);
        config.addr = format!("unix:{}", path.display());
        let (server, _) = start(config).await;
        let mut client_config = tls_client_config(&pki, server.local_addr(), ConnectType::Fixed);
        client_config.addr = server.listen_addr().to_string();
        let client = Client::builder()
            .config(client_config)
            .build()
            .await
            .expect("TLS client connects over the socket");
        exercise(&CalcClient::new(client)).await;
        // A plain client gets no answer it can read: its call fails, the
        // server carries on.
        let plain = Client::builder()
            .addr(server.listen_addr())
            .request_timeout(Duration::from_millis(500))
            .max_try_count(1)
            .build()
            .await;
        if let Ok(plain) = plain {
            CalcClient::new(plain)
                .add(1, 1)
                .await
                .expect_err("plain over TLS fails");
        }
        server.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builder_takes_ready_rustls_configs() {
    bounded(30, async {
        let pki = new_pki();
        let pem = std::fs::read(&pki.ca_path).expect("read CA");
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            roots.add(cert.expect("CA PEM")).expect("add CA");
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let client_tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(&pki.cert_path)
            .expect("cert file")
            .collect::<Result<Vec<_>, _>>()
            .expect("cert PEM");
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&pki.key_path).expect("key PEM");
        let server_tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("server config");

        let server = brisk::Server::builder()
            .config(server_config(Dispatch::Direct, QueueKind::Transfer))
            .tls(server_tls)
            .service(CalcServer::new(std::sync::Arc::new(CalcImpl::default())))
            .start()
            .await
            .expect("server starts");
        let client = Client::builder()
            .addr(server.local_addr().to_string())
            .tls(client_tls, "localhost")
            .build()
            .await
            .expect("TLS client connects");
        assert_eq!(CalcClient::new(client).add(2, 3).await.unwrap(), 5);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusting_another_ca_fails_with_a_clear_error() {
    bounded(30, async {
        let pki = new_pki();
        let other = new_pki();
        let (server, _) = start(tls_server_config(
            &pki,
            Dispatch::Direct,
            QueueKind::Transfer,
        ))
        .await;
        let err = Client::builder()
            .config(tls_client_config(
                &other,
                server.local_addr(),
                ConnectType::Fixed,
            ))
            .build()
            .await
            .err()
            .expect("an untrusted server certificate fails the connect");
        let text = err.to_string();
        assert!(
            matches!(err, RpcError::Connect { .. }) && text.contains("TLS handshake with"),
            "{text}"
        );
        assert!(text.contains("UnknownIssuer"), "{text}");

        // Lazily connected: the error comes back from the call, not a hang.
        let mut config = tls_client_config(&other, server.local_addr(), ConnectType::Pooled);
        config.lazy_connect = true;
        let calc = CalcClient::new(Client::builder().config(config).build().await.unwrap());
        let err = calc.add(1, 2).await.expect_err("untrusted");
        assert!(err.to_string().contains("TLS handshake with"), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_client_fails_cleanly_and_the_server_keeps_serving_tls() {
    bounded(30, async {
        let pki = new_pki();
        let (server, _) = start(tls_server_config(
            &pki,
            Dispatch::Direct,
            QueueKind::Transfer,
        ))
        .await;
        let plain = Client::builder()
            .addr(server.local_addr().to_string())
            .request_timeout(Duration::from_secs(3))
            .build()
            .await
            .expect("TCP connect succeeds");
        let err = CalcClient::new(plain)
            .add(1, 2)
            .await
            .expect_err("a plain client cannot talk to a TLS server");
        eprintln!("plain client: {err}");
        assert!(
            !matches!(err, RpcError::Timeout { .. }),
            "closed promptly, not timed out: {err}"
        );

        let tls = Client::builder()
            .config(tls_client_config(
                &pki,
                server.local_addr(),
                ConnectType::Fixed,
            ))
            .build()
            .await
            .expect("TLS client connects");
        assert_eq!(CalcClient::new(tls).add(20, 22).await.unwrap(), 42);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_against_a_plain_server_fails_cleanly() {
    bounded(30, async {
        let pki = new_pki();
        let (server, _) = start(server_config(Dispatch::Direct, QueueKind::Transfer)).await;
        let err = Client::builder()
            .config(tls_client_config(
                &pki,
                server.local_addr(),
                ConnectType::Fixed,
            ))
            .build()
            .await
            .err()
            .expect("no TLS on the other end");
        assert!(err.to_string().contains("TLS handshake with"), "{err}");
    })
    .await;
}

#[tokio::test]
async fn missing_certificate_files_are_a_config_error() {
    let mut config = server_config(Dispatch::Direct, QueueKind::Transfer);
    config.tls = Some(TlsServerConfig::new(
        "/nonexistent/server.pem",
        "/nonexistent/server.key",
    ));
    let err = brisk::Server::builder()
        .config(config)
        .start()
        .await
        .err()
        .expect("missing files fail the start");
    assert!(matches!(err, RpcError::Config { .. }), "{err}");
    assert!(err.to_string().contains("tls.cert_path"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_the_handshake_fails_within_connect_timeout() {
    bounded(30, async {
        let pki = new_pki();
        // Accepts and then says nothing.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
        let mut config = tls_client_config(&pki, addr, ConnectType::Fixed);
        config.connect_timeout = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let err = Client::builder()
            .config(config)
            .build()
            .await
            .err()
            .expect("no handshake answer");
        assert!(started.elapsed() < Duration::from_secs(5), "bounded");
        assert!(err.to_string().contains("TLS handshake with"), "{err}");
        silent.abort();
    })
    .await;
}

#[test]
fn tls_keys_load_from_config_files() {
    let dir = std::env::temp_dir().join(format!("brisk-tls-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server = dir.join("server.toml");
    std::fs::write(
        &server,
        "addr = \"127.0.0.1:0\"\n[tls]\ncert_path = \"s.pem\"\nkey_path = \"s.key\"\n",
    )
    .unwrap();
    let client = dir.join("client.yaml");
    std::fs::write(
        &client,
        "addr: 127.0.0.1:1\ntls:\n  ca_path: ca.pem\n  server_name: localhost\n",
    )
    .unwrap();
    let s = brisk::ServerConfig::from_file(&server).expect("server config");
    let c = ClientConfig::from_file(&client).expect("client config");
    let _ = std::fs::remove_dir_all(&dir);
    // Files written before mutual TLS existed still load, with it off.
    assert_eq!(s.tls, Some(TlsServerConfig::new("s.pem", "s.key")));
    assert_eq!(c.tls, Some(TlsClientConfig::new("ca.pem", "localhost")));
}

// --- mutual TLS -----------------------------------------------------------------------------

#[test]
fn mtls_keys_load_from_config_files() {
    let dir = std::env::temp_dir().join(format!("brisk-mtls-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server = dir.join("server.toml");
    std::fs::write(
        &server,
        "addr = \"127.0.0.1:0\"\n[tls]\ncert_path = \"s.pem\"\nkey_path = \"s.key\"\n\
         client_ca_path = \"clients-ca.pem\"\n",
    )
    .unwrap();
    let client = dir.join("client.yaml");
    std::fs::write(
        &client,
        "addr: 127.0.0.1:1\ntls:\n  ca_path: ca.pem\n  server_name: localhost\n  \
         cert_path: c.pem\n  key_path: c.key\n",
    )
    .unwrap();
    let s = brisk::ServerConfig::from_file(&server).expect("server config");
    let c = ClientConfig::from_file(&client).expect("client config");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        s.tls,
        Some(TlsServerConfig::new("s.pem", "s.key").with_client_ca("clients-ca.pem"))
    );
    assert_eq!(
        c.tls,
        Some(TlsClientConfig::new("ca.pem", "localhost").with_client_cert("c.pem", "c.key"))
    );
}

/// One call on a fresh client built from `config`; the error of the build or of
/// the call. Lazy connect is not used: with TLS 1.3 the client-side handshake
/// completes before the server has judged the client certificate, so a refused
/// client may connect fine and fail on its first call instead.
async fn one_call(config: ClientConfig) -> Result<i64, RpcError> {
    let client = Client::builder().config(config).build().await?;
    CalcClient::new(client).add(1, 2).await
}

/// A refusal by the server's client-certificate check: a transport error (the
/// connect or the connection, depending on when the alert arrives) whose text
/// names the TLS alert, never a timeout or a hang.
fn assert_refused(err: &RpcError, alerts: &[&str]) {
    let text = err.to_string();
    assert!(
        err.is_transport() && alerts.iter().any(|a| text.contains(a)),
        "expected a transport error naming one of {alerts:?}, got: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_calls_succeed_with_every_connect_type() {
    bounded(60, async {
        let pki = new_pki();
        let (server, _) = start(mtls_server_config(&pki)).await;
        for ct in ConnectType::ALL {
            let client = Client::builder()
                .config(mtls_client_config(&pki, &pki, server.local_addr(), *ct))
                .build()
                .await
                .expect("mTLS client connects");
            exercise(&CalcClient::new(client)).await;
            eprintln!("ok: mTLS {ct}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_a_certificate_is_refused_and_the_server_keeps_serving() {
    bounded(60, async {
        let pki = new_pki();
        let (server, _) = start(mtls_server_config(&pki)).await;
        let addr = server.local_addr();
        // A well-behaved mTLS client, connected before and used after.
        let good = CalcClient::new(
            Client::builder()
                .config(mtls_client_config(&pki, &pki, addr, ConnectType::Fixed))
                .build()
                .await
                .expect("mTLS client connects"),
        );
        assert_eq!(good.add(1, 1).await.expect("mTLS call"), 2);

        for ct in [ConnectType::Fixed, ConnectType::Pooled] {
            let err = one_call(tls_client_config(&pki, addr, ct))
                .await
                .expect_err("a client without a certificate is refused");
            eprintln!("no client certificate ({ct}): {err}");
            assert_refused(&err, &["CertificateRequired"]);
        }

        assert_eq!(good.add(20, 22).await.expect("still served"), 42);
        let fresh = one_call(mtls_client_config(&pki, &pki, addr, ConnectType::Reused)).await;
        assert_eq!(fresh.expect("a new mTLS client is served"), 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_signed_by_another_ca_is_refused() {
    bounded(60, async {
        let pki = new_pki();
        let other = new_pki();
        let (server, _) = start(mtls_server_config(&pki)).await;
        let addr = server.local_addr();
        // Trusts the server, but its own certificate is from `other`'s CA.
        let err = one_call(mtls_client_config(&pki, &other, addr, ConnectType::Fixed))
            .await
            .expect_err("a client certificate from an unknown CA is refused");
        eprintln!("client certificate from another CA: {err}");
        assert_refused(&err, &["UnknownCA", "BadCertificate"]);

        let ok = one_call(mtls_client_config(&pki, &pki, addr, ConnectType::Fixed)).await;
        assert_eq!(ok.expect("the server keeps serving mTLS clients"), 3);
    })
    .await;
}

#[tokio::test]
async fn a_client_certificate_without_its_key_is_a_config_error() {
    let pki = new_pki();
    let mut tls = TlsClientConfig::new(&pki.ca_path, "localhost");
    tls.cert_path = Some(pki.client_cert_path.clone());
    let config = ClientConfig {
        addr: "127.0.0.1:1".into(),
        lazy_connect: true,
        tls: Some(tls.clone()),
        ..Default::default()
    };
    let err = Client::builder()
        .config(config.clone())
        .build()
        .await
        .err()
        .expect("a certificate without its key fails the build");
    assert!(
        matches!(&err, RpcError::Config { key, .. } if key == "tls.key_path"),
        "{err}"
    );
    assert!(err.to_string().contains("tls.cert_path"), "{err}");

    // The key without the certificate, likewise.
    tls.cert_path = None;
    tls.key_path = Some(pki.client_key_path.clone());
    let err = Client::builder()
        .config(ClientConfig {
            tls: Some(tls),
            ..config
        })
        .build()
        .await
        .err()
        .expect("a key without its certificate fails the build");
    assert!(
        matches!(&err, RpcError::Config { key, .. } if key == "tls.cert_path"),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_client_ca_file_is_a_config_error() {
    let pki = new_pki();
    let mut config = server_config(Dispatch::Direct, QueueKind::Transfer);
    config.tls = Some(
        TlsServerConfig::new(&pki.cert_path, &pki.key_path).with_client_ca("/nonexistent/ca.pem"),
    );
    let err = brisk::Server::builder()
        .config(config)
        .start()
        .await
        .err()
        .expect("a missing client CA file fails the start");
    assert!(
        matches!(&err, RpcError::Config { key, .. } if key == "tls.client_ca_path"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls12_a_client_without_a_certificate_fails_at_connect() {
    bounded(30, async {
        // TLS 1.2 puts the server's verdict on the client certificate inside the
        // handshake, so the refusal is a connect error instead of a closed
        // connection (the TLS 1.3 behaviour of the tests above).
        let pki = new_pki();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let pem = std::fs::read(&pki.ca_path).expect("read CA");
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            roots.add(cert.expect("CA PEM")).expect("add CA");
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            provider.clone(),
        )
        .build()
        .expect("client verifier");
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(&pki.cert_path)
            .expect("cert file")
            .collect::<Result<Vec<_>, _>>()
            .expect("cert PEM");
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&pki.key_path).expect("key PEM");
        let server_tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS12])
            .expect("TLS 1.2")
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .expect("server config");
        let server = brisk::Server::builder()
            .config(server_config(Dispatch::Direct, QueueKind::Transfer))
            .tls(server_tls)
            .service(CalcServer::new(std::sync::Arc::new(CalcImpl::default())))
            .start()
            .await
            .expect("server starts");
        let addr = server.local_addr();

        let err = Client::builder()
            .config(tls_client_config(&pki, addr, ConnectType::Fixed))
            .build()
            .await
            .err()
            .expect("refused in the handshake");
        eprintln!("TLS 1.2, no client certificate: {err}");
        assert!(
            matches!(err, RpcError::Connect { .. })
                && err.to_string().contains("TLS handshake with"),
            "{err}"
        );
        let ok = one_call(mtls_client_config(&pki, &pki, addr, ConnectType::Fixed)).await;
        assert_eq!(ok.expect("an mTLS client is served over TLS 1.2"), 3);
    })
    .await;
}

/// Polls `cond` every few ms until it holds or `within` passes.
async fn wait_until(within: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cond()
}

/// True when `e` is `TooManyConnections` at `limit` = `max`, as a refusal.
fn is_too_many(e: &RpcError, limit: &str, max: u64) -> bool {
    matches!(e, RpcError::TooManyConnections { limit: l, max: m, evicted: false } if l == limit && *m == max)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_are_refused_and_evicted_with_too_many_connections() {
    bounded(30, async {
        let pki = new_pki();
        // Over max_connections_per_ip: the refusal is sent over TLS.
        let mut config = tls_server_config(&pki, Dispatch::Direct, QueueKind::Transfer);
        config.max_connections_per_ip = Some(1);
        let (server, _) = start(config).await;
        let mut client_config = tls_client_config(&pki, server.local_addr(), ConnectType::Fixed);
        client_config.connect = Connect::fixed(1);
        let build = |c: ClientConfig| async move {
            Client::builder()
                .config(c)
                .build()
                .await
                .expect("TLS connect")
        };
        let first = CalcClient::new(build(client_config.clone()).await);
        assert_eq!(first.add(1, 2).await.unwrap(), 3);
        let second = CalcClient::new(build(client_config.clone()).await);
        let e = second
            .add(1, 1)
            .await
            .expect_err("over the per-address cap");
        assert!(is_too_many(&e, "max_connections_per_ip", 1), "{e:?}");
        assert_eq!(
            first.add(2, 2).await.unwrap(),
            4,
            "the admitted one is served"
        );
        server.shutdown().await;

        // At max_connections = 1: a TLS connection idle for over a second is
        // evicted for a newcomer; the newcomer, calling, is then kept.
        let mut config = tls_server_config(&pki, Dispatch::Direct, QueueKind::Transfer);
        config.max_connections = 1;
        let (server, _) = start(config).await;
        client_config.addr = server.local_addr().to_string();
        let idle_client = build(client_config.clone()).await;
        let idle = CalcClient::new(idle_client.clone());
        assert_eq!(idle.add(1, 1).await.unwrap(), 2);
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let newcomer = CalcClient::new(build(client_config.clone()).await);
        assert_eq!(newcomer.add(2, 3).await.expect("let in by eviction"), 5);
        assert!(
            wait_until(Duration::from_secs(3), || idle_client.open_connections()
                == 0)
            .await,
            "the evicted TLS connection is closed"
        );
        assert_eq!(server.stats().evicted_connections, 1);
        // The evicted client reconnects on its next call; the newcomer has just
        // called, so it is the one refused now.
        let e = idle.add(1, 1).await.expect_err("no room");
        assert!(is_too_many(&e, "max_connections", 1), "{e:?}");
        assert_eq!(newcomer.add(3, 3).await.unwrap(), 6);
        server.shutdown().await;
    })
    .await;
}
