//! Unix domain sockets: `unix:/path` on both sides, every connect type and
//! dispatch mode, the same framing as TCP (a large payload, errors, a
//! deadline), and what goes wrong — a path that exists, a directory that
//! does not, a registry for a host-local socket — failing `start()` clearly.
//! The socket file goes when the server stops.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use brisk::{
    Client, Code, ConnectType, Context, Dispatch, QueueKind, RpcError, Server, ServerConfig,
    Status, WriteMode,
};
use common::{bounded, dispatch_variants, server_config, CalcClient, CalcImpl, CalcServer};
use futures::StreamExt;

/// Says who called.
#[brisk::service]
trait Who {
    /// The caller's address as the server saw it.
    async fn peer(&self, cx: &Context) -> Result<Option<String>, Status>;
    /// `0..n`, as a stream of `size`-byte items (each filled with its index).
    async fn count(
        &self,
        cx: &Context,
        n: u32,
        size: u32,
    ) -> Result<impl brisk::Stream<Item = Result<Vec<u8>, Status>> + Send, Status>;
}

struct WhoImpl;

impl Who for WhoImpl {
    async fn peer(&self, cx: &Context) -> Result<Option<String>, Status> {
        Ok(cx.peer().map(|p| p.to_string()))
    }

    async fn count(
        &self,
        _cx: &Context,
        n: u32,
        size: u32,
    ) -> Result<impl brisk::Stream<Item = Result<Vec<u8>, Status>> + Send, Status> {
        Ok(futures::stream::iter(0..n).map(move |i| Ok(vec![i as u8; size as usize])))
    }
}

/// A directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("brisk-unix-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn sock(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn unix_addr(path: &Path) -> String {
    format!("unix:{}", path.display())
}

fn unix_config(path: &Path, dispatch: Dispatch, queue: QueueKind) -> ServerConfig {
    ServerConfig {
        addr: unix_addr(path),
        ..server_config(dispatch, queue)
    }
}

async fn start_unix(config: ServerConfig) -> brisk::ServerHandle {
    Server::builder()
        .config(config)
        .service(CalcServer::new(Arc::new(CalcImpl::default())))
        .service(WhoServer::new(WhoImpl))
        .start()
        .await
        .expect("server starts on the socket")
}

async fn client(addr: &str, connect_type: ConnectType, write_mode: WriteMode) -> Client {
    Client::builder()
        .addr(addr)
        .connect(brisk::Connect::sized(connect_type, 3))
        .write_mode(write_mode)
        .request_timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("client connects over the socket")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connect_type_and_dispatch_mode_works_over_a_unix_socket() {
    bounded(120, async {
        let dir = TempDir::new("modes");
        for (name, dispatch, queue) in dispatch_variants() {
            let path = dir.sock(&format!("{name}.sock"));
            let server = start_unix(unix_config(&path, dispatch, queue)).await;
            assert_eq!(server.listen_addr().to_string(), unix_addr(&path));
            assert!(path.exists(), "{name}: the socket file is there");
            for connect_type in ConnectType::ALL {
                for write_mode in WriteMode::ALL {
                    let label = format!("{name}/{connect_type}/{write_mode}");
                    let raw = client(
                        &server.listen_addr().to_string(),
                        *connect_type,
                        *write_mode,
                    )
                    .await;
                    let calc = CalcClient::new(raw.clone());
                    let tasks: Vec<_> = (0..16i64)
                        .map(|t| {
                            let calc = calc.clone();
                            tokio::spawn(async move { (t, calc.add(t, 1000).await) })
                        })
                        .collect();
                    for task in tasks {
                        let (t, r) = task.await.expect("task");
                        assert_eq!(r.expect("call"), t + 1000, "{label}");
                    }
                    // The same framing as TCP: a large body, a handler's error.
                    let big = vec![7u8; 1 << 20];
                    let echoed = calc.blob(big.clone().into()).await.expect("1 MiB echo");
                    assert_eq!(&echoed[..], &big[..], "{label}");
                    let err = calc.fail("boom".into()).await.expect_err("handler error");
                    assert_eq!(err.code(), Code::Handler, "{label}: {err}");
                    // A Unix socket has no peer address.
                    let who = WhoClient::new(raw);
                    assert_eq!(who.peer().await.expect("peer"), None, "{label}");
                    // A server stream, past the credit window and the socket's buffer.
                    let mut items = who.count(300, 4096).await.expect("stream opens");
                    let mut n = 0u32;
                    while let Some(item) = items.next().await {
                        let item = item.expect("item");
                        assert_eq!((item.len(), item[0]), (4096, n as u8), "{label}");
                        n += 1;
                    }
                    assert_eq!(n, 300, "{label}: every item, in order");
                }
            }
            server.shutdown().await;
            assert!(
                !path.exists(),
                "{name}: the socket file is removed at shutdown"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_and_a_dropped_server_behave_as_over_tcp() {
    bounded(30, async {
        let dir = TempDir::new("deadline");
        let path = dir.sock("calc.sock");
        let server = start_unix(unix_config(&path, Dispatch::Direct, QueueKind::Transfer)).await;
        let raw = Client::builder()
            .addr(unix_addr(&path))
            .request_timeout(Duration::from_millis(200))
            .build()
            .await
            .expect("client");
        let calc = CalcClient::new(raw);
        let err = calc.sleep_ms(5_000).await.expect_err("over the deadline");
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
        assert_eq!(calc.add(1, 2).await.expect("the connection goes on"), 3);
        drop(server);
        // The server is gone: calls fail (with a transport error), none hangs.
        let mut failed = false;
        for _ in 0..50 {
            match calc.add(1, 2).await {
                Err(e) => {
                    assert!(e.code().is_transport(), "{e}");
                    failed = true;
                    break;
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        assert!(failed, "calls fail once the server is dropped");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_that_exists_or_cannot_be_created_fails_start_clearly() {
    bounded(30, async {
        let dir = TempDir::new("bad-paths");
        // A file that is there already (another server's socket, a leftover).
        let taken = dir.sock("taken.sock");
        std::fs::write(&taken, b"").expect("file");
        let err = Server::builder()
            .config(unix_config(&taken, Dispatch::Direct, QueueKind::Transfer))
            .start()
            .await
            .err()
            .expect("a path that exists is refused");
        assert!(matches!(err, RpcError::Config { .. }), "{err:?}");
        assert!(err.to_string().contains("exists already"), "{err}");
        assert!(taken.exists(), "the file is left alone");
        // A live server's socket: the second server is refused, the first carries on.
        let live = dir.sock("live.sock");
        let first = start_unix(unix_config(&live, Dispatch::Direct, QueueKind::Transfer)).await;
        let err = Server::builder()
            .config(unix_config(&live, Dispatch::Direct, QueueKind::Transfer))
            .start()
            .await
            .err()
            .expect("a live socket is not taken over");
        assert!(err.to_string().contains("exists already"), "{err}");
        let calc =
            CalcClient::new(client(&unix_addr(&live), ConnectType::Fixed, WriteMode::Async).await);
        assert_eq!(calc.add(2, 2).await.expect("the first still serves"), 4);
        // A directory that does not exist.
        let nowhere = dir.sock("no/such/dir/calc.sock");
        let err = Server::builder()
            .config(unix_config(&nowhere, Dispatch::Direct, QueueKind::Transfer))
            .start()
            .await
            .err()
            .expect("no directory");
        assert!(
            err.to_string().contains("does its directory exist"),
            "{err}"
        );
        // `unix:` with no path.
        let err = Server::builder()
            .addr("unix:")
            .start()
            .await
            .err()
            .expect("no path");
        assert!(err.to_string().contains("needs a socket path"), "{err}");
        // A host-local socket is not put in a registry.
        let err = Server::builder()
            .config(unix_config(
                &dir.sock("reg.sock"),
                Dispatch::Direct,
                QueueKind::Transfer,
            ))
            .registry_url("etcd://127.0.0.1:1/brisk")
            .start()
            .await
            .err()
            .expect("no registry for a unix socket");
        assert!(
            matches!(&err, RpcError::Config { key, .. } if key == "registry"),
            "{err:?}"
        );
        assert!(!dir.sock("reg.sock").exists(), "nothing was bound");
        // The client: nothing listening on the path.
        let err = Client::builder()
            .addr(unix_addr(&dir.sock("nobody.sock")))
            .build()
            .await
            .err()
            .expect("nobody listens");
        assert_eq!(err.code(), Code::ConnectFailed, "{err}");
        assert!(err.to_string().contains("nobody.sock"), "{err}");
        first.shutdown().await;
        // Once stopped, the path is free for the next server.
        let again = start_unix(unix_config(&live, Dispatch::Direct, QueueKind::Transfer)).await;
        again.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_connections_count_against_max_connections_not_the_per_ip_cap() {
    bounded(30, async {
        let dir = TempDir::new("limits");
        let path = dir.sock("calc.sock");
        let mut config = unix_config(&path, Dispatch::Direct, QueueKind::Transfer);
        config.max_connections_per_ip = Some(1);
        let server = start_unix(config).await;
        // Three connections, none with an IP: the per-IP cap of 1 does not apply.
        let calc =
            CalcClient::new(client(&unix_addr(&path), ConnectType::Fixed, WriteMode::Async).await);
        let clients: Vec<_> = (0..3)
            .map(|_| {
                let addr = unix_addr(&path);
                async move {
                    Client::builder()
                        .addr(addr)
                        .connect(brisk::Connect::fixed(1))
                        .build()
                        .await
                }
            })
            .collect();
        let mut kept = Vec::new();
        for c in futures::future::join_all(clients).await {
            let each = CalcClient::new(c.expect("connects"));
            assert_eq!(each.add(1, 1).await.expect("served"), 2);
            kept.push(each);
        }
        assert_eq!(calc.add(1, 2).await.expect("served"), 3);
        let stats = server.stats();
        // The first client's 3 connections and one each for the others.
        assert_eq!(
            (stats.open_connections, stats.refused_connections),
            (6, 0),
            "{stats:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_refused_at_max_connections_is_told_why_over_the_socket() {
    bounded(30, async {
        let dir = TempDir::new("refused");
        let path = dir.sock("calc.sock");
        let mut config = unix_config(&path, Dispatch::Direct, QueueKind::Transfer);
        config.max_connections = 1;
        let server = start_unix(config).await;
        let busy = CalcClient::new(
            Client::builder()
                .addr(unix_addr(&path))
                .connect(brisk::Connect::fixed(1))
                .build()
                .await
                .expect("the first connects"),
        );
        // The only connection is in a call: nothing to evict.
        let holding = tokio::spawn(async move { busy.sleep_ms(1_000).await });
        tokio::time::sleep(Duration::from_millis(150)).await;
        let refused = async {
            let client = Client::builder()
                .addr(unix_addr(&path))
                .connect(brisk::Connect::fixed(1))
                .max_try_count(1)
                .build()
                .await?;
            CalcClient::new(client).add(1, 1).await
        };
        let err = refused.await.expect_err("over max_connections");
        assert!(
            matches!(&err, RpcError::TooManyConnections { limit, max: 1, .. } if limit == "max_connections"),
            "{err:?}"
        );
        assert_eq!(holding.await.expect("task").expect("the first call ends"), 1_000);
        // At least that one (a client may try its connection again).
        assert!(server.stats().refused_connections >= 1, "{:?}", server.stats());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_server_leaves_another_servers_socket_at_its_path_alone() {
    bounded(30, async {
        let dir = TempDir::new("replaced");
        let path = dir.sock("calc.sock");
        let old = start_unix(unix_config(&path, Dispatch::Direct, QueueKind::Transfer)).await;
        // Someone removes the old server's file and a new server takes the path.
        std::fs::remove_file(&path).expect("remove");
        let new = start_unix(unix_config(&path, Dispatch::Direct, QueueKind::Transfer)).await;
        old.shutdown().await;
        assert!(path.exists(), "the new server's socket stays");
        let calc =
            CalcClient::new(client(&unix_addr(&path), ConnectType::Fixed, WriteMode::Async).await);
        assert_eq!(calc.add(3, 4).await.expect("the new server serves"), 7);
        new.shutdown().await;
        assert!(!path.exists(), "its own file goes with it");
    })
    .await;
}
