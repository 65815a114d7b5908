//! TLS (feature `tls`): calls over TLS with every connect type, a client that
//! trusts another CA, a plain client against a TLS server (and the server
//! serving TLS clients afterwards), a TLS client against a plain server.
//! Certificates are generated per test with `rcgen`.
#![cfg(feature = "tls")]

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use brisk::tls::{rustls, TlsClientConfig, TlsServerConfig};
use brisk::{Client, ClientConfig, ConnectType, Dispatch, QueueKind, RpcError};
use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;

/// A CA and a server certificate for `localhost` signed by it, as PEM files.
struct Pki {
    dir: PathBuf,
    ca_path: PathBuf,
    cert_path: PathBuf,
    key_path: PathBuf,
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

    let pki = Pki {
        ca_path: dir.join("ca.pem"),
        cert_path: dir.join("server.pem"),
        key_path: dir.join("server.key"),
        dir,
    };
    std::fs::write(&pki.ca_path, ca.pem()).expect("write CA");
    std::fs::write(&pki.cert_path, cert.pem()).expect("write cert");
    std::fs::write(&pki.key_path, key.serialize_pem()).expect("write key");
    pki
}

fn tls_server_config(pki: &Pki, dispatch: Dispatch, queue: QueueKind) -> brisk::ServerConfig {
    let mut config = server_config(dispatch, queue);
    config.tls = Some(TlsServerConfig {
        cert_path: pki.cert_path.clone(),
        key_path: pki.key_path.clone(),
    });
    config
}

fn tls_client_config(pki: &Pki, addr: std::net::SocketAddr, ct: ConnectType) -> ClientConfig {
    ClientConfig {
        addr: addr.to_string(),
        connect_type: ct,
        connections: 2,
        request_timeout: Duration::from_secs(5),
        tls: Some(TlsClientConfig {
            ca_path: pki.ca_path.clone(),
            server_name: "localhost".into(),
        }),
        ..Default::default()
    }
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
        }
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
    config.tls = Some(TlsServerConfig {
        cert_path: "/nonexistent/server.pem".into(),
        key_path: "/nonexistent/server.key".into(),
    });
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
        config.transport.connect_timeout = Duration::from_millis(300);
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
    assert_eq!(
        s.tls,
        Some(TlsServerConfig {
            cert_path: "s.pem".into(),
            key_path: "s.key".into()
        })
    );
    assert_eq!(
        c.tls,
        Some(TlsClientConfig {
            ca_path: "ca.pem".into(),
            server_name: "localhost".into()
        })
    );
}
