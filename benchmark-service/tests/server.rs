//! The benchmark server end to end on loopback: start it (SQLite or PostgreSQL, both dispatch
//! modes), call every method through the typed client, check config handling and the
//! `LISTENING` protocol.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use benchmark_service::server::{
    effective_config_text, parse_listening_line, serve_until, start, ServerArgs, ShutdownCause,
    LISTENING_PREFIX,
};
use benchmark_service::store::{Message, MAX_ID, MIN_ID};
use benchmark_service::BenchmarkServiceClient;
use brisk::{Client, Dispatch, Payload, QueueKind, RpcError};
use bytes::Bytes;
use clap::Parser;

const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A unique directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "brisk-server-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Loopback, ephemeral port, SQLite and messages.json under `dir`, small pools.
fn sqlite_args(dir: &TempDir, dispatch: Dispatch) -> ServerArgs {
    ServerArgs {
        addr: Some("127.0.0.1:0".into()),
        dispatch: Some(dispatch),
        core_threads: Some(2),
        max_threads: Some(8),
        io_threads: Some(2),
        db: Some(format!(
            "sqlite:{}",
            dir.path().join("db/bench.db").display()
        )),
        data_dir: Some(dir.path().join("data")),
        ..ServerArgs::default()
    }
}

async fn client_for(addr: impl std::fmt::Display) -> BenchmarkServiceClient {
    let client = Client::builder()
        .addr(addr.to_string())
        .build()
        .await
        .expect("client");
    BenchmarkServiceClient::new(client)
}

/// Calls every method and checks every answer.
async fn check_every_method(client: &BenchmarkServiceClient) {
    client.do_nothing().await.expect("do_nothing");
    for id in MIN_ID..=MAX_ID {
        let want = Message::seed(id);
        assert_eq!(client.get_message_from_cache(id).await.unwrap(), want);
        assert_eq!(client.get_message_from_file(id).await.unwrap(), want);
        assert_eq!(client.get_message_from_db(id).await.unwrap(), want);
    }
    for result in [
        client.get_message_from_cache(11).await,
        client.get_message_from_file(11).await,
        client.get_message_from_db(11).await,
    ] {
        match result {
            Err(RpcError::Status(status)) => {
                assert_eq!(status.code(), brisk::Code::NotFound, "{status}");
                assert!(status.message().contains("11"), "{status}");
            }
            other => panic!("expected a handler error naming id 11, got {other:?}"),
        }
    }
    let payload: Bytes = (0..100 * 1024).map(|i| (i % 251) as u8).collect();
    let back = client.echo(Payload(payload.clone())).await.unwrap();
    assert_eq!(back.into_bytes(), payload);
    let empty = client.echo(Payload::default()).await.unwrap();
    assert!(empty.is_empty());
}

async fn every_method_in(dispatch: Dispatch) {
    let dir = TempDir::new(dispatch.name());
    let args = sqlite_args(&dir, dispatch);
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = start(&args).await.expect("start");
        assert_eq!(server.config().dispatch.mode(), dispatch);
        assert!(dir.path().join("data/messages.json").exists());
        let text = effective_config_text(&server);
        // Direct dispatch has no pool: its lines say so instead of the flags' values.
        let pool_lines: [&str; 2] = match dispatch {
            Dispatch::Pool => ["transfer", "core 2, max 8"],
            Dispatch::Direct => [
                "transfer  (unused: direct dispatch)",
                "(unused: direct dispatch)",
            ],
        };
        for needle in [
            &server.local_addr().to_string(),
            dispatch.name(),
            pool_lines[0],
            pool_lines[1],
            "io threads       2",
            "max frame size",
            "bench.db",
            &dir.path().join("data").display().to_string(),
        ] {
            assert!(text.contains(needle), "{needle:?} missing in:\n{text}");
        }
        let client = client_for(server.local_addr()).await;
        check_every_method(&client).await;
        let requests = server.handle.stats().requests;
        assert!(requests >= 35, "{requests}");
        let report = server.shutdown().await;
        assert!(report.drained);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_pool_dispatch_serves_every_method() {
    every_method_in(Dispatch::Pool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_direct_dispatch_serves_every_method() {
    every_method_in(Dispatch::Direct).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_pool_follows_the_threads_that_may_query() {
    let dir = TempDir::new("dbpool");
    tokio::time::timeout(TEST_TIMEOUT, async {
        let args = sqlite_args(&dir, Dispatch::Pool);
        let server = start(&args).await.unwrap();
        assert_eq!(server.store.db.pool_size(), 8); // max threads
        server.shutdown().await;

        let args = sqlite_args(&dir, Dispatch::Direct);
        let server = start(&args).await.unwrap();
        assert_eq!(server.store.db.pool_size(), 2); // io threads
        server.shutdown().await;

        let args = ServerArgs {
            db_pool_size: Some(3),
            ..sqlite_args(&dir, Dispatch::Pool)
        };
        let server = start(&args).await.unwrap();
        assert_eq!(server.store.db.pool_size(), 3);
        server.shutdown().await;
    })
    .await
    .expect("test timed out");
}

/// A `Write` that forwards each write to a channel, so the test sees the output live.
struct ChannelWriter(tokio::sync::mpsc::UnboundedSender<String>);

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.send(String::from_utf8_lossy(buf).into_owned());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_until_prints_listening_then_the_shutdown_report() {
    let dir = TempDir::new("serve");
    let args = sqlite_args(&dir, Dispatch::Pool);
    let (out_tx, mut out_rx) = tokio::sync::mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::time::timeout(TEST_TIMEOUT, async {
        let serve = serve_until(&args, ChannelWriter(out_tx), async {
            let _ = stop_rx.await;
            ShutdownCause::Requested
        });
        let drive = async {
            let mut text = String::new();
            let addr = loop {
                text.push_str(&out_rx.recv().await.expect("server output"));
                if let Some(addr) = text.lines().find_map(parse_listening_line) {
                    break addr;
                }
            };
            assert!(text.contains("brisk benchmark server"), "{text}");
            assert_eq!(
                text.lines()
                    .filter(|l| l.starts_with(LISTENING_PREFIX))
                    .count(),
                1
            );
            let client = client_for(addr).await;
            client.do_nothing().await.unwrap();
            assert_eq!(
                client.get_message_from_db(4).await.unwrap(),
                Message::seed(4)
            );
            let _ = stop_tx.send(());
        };
        let (report, ()) = tokio::join!(serve, drive);
        assert!(report.expect("serve_until").drained);
        let mut rest = String::new();
        while let Ok(chunk) = out_rx.try_recv() {
            rest.push_str(&chunk);
        }
        assert!(rest.contains("stopped (shutdown requested)"), "{rest}");
        assert!(rest.contains("requests         2"), "{rest}");
    })
    .await
    .expect("test timed out");
}

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    args: ServerArgs,
}

fn parse(argv: &[String]) -> Result<ServerArgs, clap::Error> {
    Cli::try_parse_from(std::iter::once("server".to_owned()).chain(argv.iter().cloned()))
        .map(|cli| cli.args)
}

#[test]
fn to_argv_round_trips_through_clap() {
    let empty = ServerArgs::default();
    assert!(empty.to_argv().is_empty());
    assert_eq!(parse(&empty.to_argv()).unwrap(), empty);

    let full = ServerArgs {
        addr: Some("0.0.0.0:9081".into()),
        http_addr: Some("0.0.0.0:9082".into()),
        dispatch: Some(Dispatch::Direct),
        queue: Some(QueueKind::Blocking),
        core_threads: Some(20),
        max_threads: Some(800),
        queue_size: Some(100_000_000),
        keep_alive_ms: Some(1234),
        io_threads: Some(3),
        db: Some("postgres://u:p@127.0.0.1:5432/db?application_name=x y".into()),
        db_pool_size: Some(5),
        data_dir: Some(PathBuf::from("/tmp/some dir/data")),
        config: Some(PathBuf::from("/etc/brisk/server.toml")),
        registry: Some("etcd://127.0.0.1:2379/brisk?ttl_ms=3000".into()),
        advertise_addr: Some("10.0.0.5".into()),
        weight: Some(200),
        player: Some(benchmark_service::players::Player::Tonic),
        volo_transport: Some(benchmark_service::players::volo::Transport::Mux),
        cpus: Some("0,2-3".parse().unwrap()),
        exit_on_stdin_eof: true,
    };
    let argv = full.to_argv();
    assert!(argv.contains(&"--exit-on-stdin-eof".to_owned()), "{argv:?}");
    assert_eq!(parse(&argv).unwrap(), full);

    for (i, partial) in [
        ServerArgs {
            dispatch: Some(Dispatch::Pool),
            ..ServerArgs::default()
        },
        ServerArgs {
            queue: Some(QueueKind::Transfer),
            keep_alive_ms: Some(0),
            ..ServerArgs::default()
        },
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(parse(&partial.to_argv()).unwrap(), partial, "case {i}");
    }
}

#[test]
fn flags_parse_case_insensitively_and_reject_bad_values() {
    let args = parse(&[
        "--dispatch".into(),
        "DIRECT".into(),
        "--queue".into(),
        "blocking".into(),
    ])
    .unwrap();
    assert_eq!(args.dispatch, Some(Dispatch::Direct));
    assert_eq!(args.queue, Some(QueueKind::Blocking));
    let err = parse(&["--dispatch".into(), "threads".into()]).unwrap_err();
    assert!(err.to_string().contains("direct, pool"), "{err}");
    let err = parse(&["--queue".into(), "ring".into()]).unwrap_err();
    assert!(err.to_string().contains("blocking"), "{err}");
}

fn write_file(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn config_key_of(err: &RpcError) -> &str {
    match err {
        RpcError::Config { key, .. } => key,
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn config_file_then_flags() {
    let dir = TempDir::new("config");
    let toml = write_file(
        &dir,
        "server.toml",
        "addr = \"127.0.0.1:7001\"\nmax_connections = 77\n\n\
         [dispatch]\ntype = \"pool\"\ncore_threads = 3\nmax_threads = 6\nqueue = \"blocking\"\nkeep_alive_ms = 500\n",
    );
    let from_file = ServerArgs {
        config: Some(toml.clone()),
        ..ServerArgs::default()
    }
    .server_config()
    .unwrap();
    assert_eq!(from_file.addr, "127.0.0.1:7001");
    assert_eq!(from_file.dispatch.mode(), Dispatch::Pool);
    assert_eq!(from_file.max_connections, 77);
    assert_eq!(
        from_file
            .dispatch
            .pool()
            .expect("pool dispatch")
            .core_threads,
        3
    );
    assert_eq!(
        from_file.dispatch.pool().expect("pool dispatch").queue,
        QueueKind::Blocking
    );
    assert_eq!(
        from_file.dispatch.pool().expect("pool dispatch").keep_alive,
        Duration::from_millis(500)
    );

    let overridden = ServerArgs {
        config: Some(toml),
        addr: Some("127.0.0.1:0".into()),
        queue: Some(QueueKind::Transfer),
        max_threads: Some(12),
        queue_size: Some(50),
        keep_alive_ms: Some(9000),
        ..ServerArgs::default()
    }
    .server_config()
    .unwrap();
    assert_eq!(overridden.addr, "127.0.0.1:0");
    assert_eq!(overridden.dispatch.mode(), Dispatch::Pool);
    assert_eq!(overridden.max_connections, 77); // from the file
    assert_eq!(
        overridden
            .dispatch
            .pool()
            .expect("pool dispatch")
            .core_threads,
        3
    ); // from the file
    assert_eq!(
        overridden
            .dispatch
            .pool()
            .expect("pool dispatch")
            .max_threads,
        12
    );
    assert_eq!(
        overridden.dispatch.pool().expect("pool dispatch").queue,
        QueueKind::Transfer
    );
    assert_eq!(
        overridden
            .dispatch
            .pool()
            .expect("pool dispatch")
            .queue_size,
        50
    );
    assert_eq!(
        overridden
            .dispatch
            .pool()
            .expect("pool dispatch")
            .keep_alive,
        Duration::from_millis(9000)
    );

    let yaml = write_file(
        &dir,
        "server.yaml",
        "dispatch:\n  type: pool\n  queue_size: 9\n",
    );
    let from_yaml = ServerArgs {
        config: Some(yaml),
        ..ServerArgs::default()
    }
    .server_config()
    .unwrap();
    assert_eq!(from_yaml.dispatch.mode(), Dispatch::Pool);
    assert_eq!(
        from_yaml.dispatch.pool().expect("pool dispatch").queue_size,
        9
    );

    // A flag switches a pool file to direct dispatch: the pool's settings go with it.
    let direct = ServerArgs {
        config: Some(dir.path().join("server.toml")),
        dispatch: Some(Dispatch::Direct),
        ..ServerArgs::default()
    }
    .server_config()
    .unwrap();
    assert_eq!(direct.dispatch, brisk::DispatchConfig::Direct);
}

#[test]
fn a_single_thread_bound_flag_moves_the_other_bound() {
    let lowered = ServerArgs {
        core_threads: None,
        max_threads: Some(1),
        ..ServerArgs::default()
    }
    .server_config()
    .unwrap();
    assert_eq!(
        (
            lowered.dispatch.pool().expect("pool dispatch").core_threads,
            lowered.dispatch.pool().expect("pool dispatch").max_threads
        ),
        (1, 1)
    );

    let raised = ServerArgs {
        core_threads: Some(100_000),
        ..ServerArgs::default()
    }
    .server_config()
    .unwrap();
    assert_eq!(
        raised.dispatch.pool().expect("pool dispatch").max_threads,
        100_000
    );

    let both = ServerArgs {
        core_threads: Some(5),
        max_threads: Some(4),
        ..ServerArgs::default()
    }
    .server_config()
    .unwrap_err();
    assert_eq!(config_key_of(&both), "dispatch");
    assert!(both.to_string().contains("core_threads"), "{both}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_config_values_are_errors_naming_the_key() {
    let dir = TempDir::new("badconfig");
    tokio::time::timeout(TEST_TIMEOUT, async {
        let cases = [
            (
                "queue.toml",
                "[dispatch]\ntype = \"pool\"\nqueue = \"ring\"\n",
                "dispatch",
            ),
            ("dispatch.yaml", "dispatch:\n  type: threads\n", "dispatch"),
            (
                "type.toml",
                "max_connections = \"lots\"\n",
                "max_connections",
            ),
            (
                "unknown.toml",
                "[dispatch]\ntype = \"pool\"\nthreads = 4\n",
                "dispatch",
            ),
            ("zero.toml", "max_connections = 0\n", "max_connections"),
        ];
        for (name, text, key) in cases {
            let args = ServerArgs {
                config: Some(write_file(&dir, name, text)),
                ..sqlite_args(&dir, Dispatch::Pool)
            };
            let err = args.server_config().unwrap_err();
            assert!(config_key_of(&err).starts_with(key), "{name}: {err}");
            // and start() refuses with the same message, before opening anything
            let err = start(&args).await.unwrap_err();
            assert!(
                err.to_string().contains(&format!("`{key}")),
                "{name}: {err}"
            );
        }

        // flags are validated too
        for (args, key) in [
            (
                ServerArgs {
                    queue_size: Some(0),
                    ..sqlite_args(&dir, Dispatch::Pool)
                },
                "dispatch",
            ),
            (
                ServerArgs {
                    io_threads: Some(0),
                    ..sqlite_args(&dir, Dispatch::Pool)
                },
                "io-threads",
            ),
            (
                ServerArgs {
                    db_pool_size: Some(0),
                    ..sqlite_args(&dir, Dispatch::Pool)
                },
                "db-pool-size",
            ),
        ] {
            let err = start(&args).await.unwrap_err();
            assert!(err.to_string().contains(&format!("`{key}`")), "{err}");
        }

        // a file that is not there, or has the wrong extension
        let args = ServerArgs {
            config: Some(dir.path().join("missing.toml")),
            ..ServerArgs::default()
        };
        let err = args.server_config().unwrap_err();
        assert!(err.to_string().contains("missing.toml"), "{err}");
        let args = ServerArgs {
            config: Some(write_file(&dir, "server.ini", "x=1")),
            ..ServerArgs::default()
        };
        assert!(args.server_config().is_err());
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_and_bind_failures_are_clear() {
    let dir = TempDir::new("failures");
    tokio::time::timeout(TEST_TIMEOUT, async {
        let args = ServerArgs {
            db: Some("mysql://root@127.0.0.1/bench".into()),
            ..sqlite_args(&dir, Dispatch::Pool)
        };
        let err = start(&args).await.unwrap_err();
        assert!(
            err.to_string().contains("unsupported database URL"),
            "{err}"
        );

        let first = start(&sqlite_args(&dir, Dispatch::Pool)).await.unwrap();
        let taken = ServerArgs {
            addr: Some(first.local_addr().to_string()),
            ..sqlite_args(&dir, Dispatch::Pool)
        };
        let err = start(&taken).await.unwrap_err();
        assert!(
            err.to_string().contains(&first.local_addr().to_string()),
            "{err}"
        );
        first.shutdown().await;
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_db_scenario() {
    let url = match std::env::var("BRISK_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => {
            eprintln!(
                "note: BRISK_TEST_POSTGRES_URL is not set; skipping the PostgreSQL server test \
                 (e.g. BRISK_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:55433/postgres)"
            );
            return;
        }
    };
    let dir = TempDir::new("postgres");
    tokio::time::timeout(TEST_TIMEOUT, async {
        for dispatch in [Dispatch::Pool, Dispatch::Direct] {
            let args = ServerArgs {
                db: Some(url.clone()),
                ..sqlite_args(&dir, dispatch)
            };
            let server = start(&args).await.expect("start with PostgreSQL");
            let text = effective_config_text(&server);
            assert!(text.contains("postgresql"), "{text}");
            let client = client_for(server.local_addr()).await;
            for id in MIN_ID..=MAX_ID {
                assert_eq!(
                    client.get_message_from_db(id).await.unwrap(),
                    Message::seed(id)
                );
            }
            match client.get_message_from_db(11).await {
                Err(RpcError::Status(status)) => {
                    assert_eq!(status.code(), brisk::Code::NotFound, "{status}");
                    assert!(status.message().contains("11"), "{status}");
                }
                other => panic!("expected a handler error naming id 11, got {other:?}"),
            }
            assert!(server.shutdown().await.drained);
        }
    })
    .await
    .expect("test timed out");
}
