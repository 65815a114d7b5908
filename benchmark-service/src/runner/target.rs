//! Where the benchmark server comes from: a server somebody else started
//! (`--addr`), a child process the runner spawns from its own executable (the
//! default, so client and server do not share a runtime — as jksoa-benchmark ran
//! them), or a server inside this process (tests, `--in-process`).
//!
//! The child is `<program> __serve <ServerArgs::to_argv()>` with
//! `--addr 127.0.0.1:0 --exit-on-stdin-eof` and a piped stdin: the runner reads its
//! `LISTENING <ip:port>` line (and, when the base args set `--http-addr`, the
//! `LISTENING_HTTP <ip:port>` line after it; bounded wait), and stops it by closing stdin, then
//! killing it after a grace period. Dropping a [`RunningServer`] without
//! [`RunningServer::stop`] still kills the child, so an error path never leaves a
//! server behind.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::players::Player;
use crate::server::{
    self, ListeningAddrs, ServerArgs, StartedPeer, StartedServer, SERVE_SUBCOMMAND,
};

use super::plan::ServerKey;
use super::RunError;

/// How long a spawned server may take to print `LISTENING`.
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a spawned server may take to exit after its stdin is closed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Where the server of a run comes from.
#[derive(Debug, Clone)]
pub enum ServerSource {
    /// An already running server at `host:port`; dispatch and queue are whatever it uses.
    Remote(String),
    /// Spawn `program __serve …` once per dispatch × queue, with `base`'s other settings.
    Spawn {
        /// The executable that understands the `__serve` subcommand.
        program: PathBuf,
        /// Server settings besides address, dispatch, queue (threads, db, data dir…).
        base: ServerArgs,
        /// What brisk's servers listen on.
        transport: Transport,
    },
    /// Start the server on the runner's own tokio runtime (shares the client's CPU).
    InProcess {
        /// Server settings besides address, dispatch and queue.
        base: ServerArgs,
        /// What brisk's servers listen on.
        transport: Transport,
    },
}

/// What the servers the runner starts for brisk listen on. Peers (tarpc, tonic, volo, raw)
/// always listen on loopback TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Transport {
    /// A free loopback TCP port.
    #[default]
    Tcp,
    /// A Unix domain socket in the temp directory (`unix:/tmp/brisk-bench-<pid>-<n>.sock`).
    Unix,
}

impl ServerSource {
    /// Spawn the current executable, which must handle `__serve` (see
    /// [`serve_main`](super::serve_main)).
    pub fn spawn_current_exe(base: ServerArgs, transport: Transport) -> Result<Self, RunError> {
        let program = std::env::current_exe()
            .map_err(|e| RunError::Server(format!("cannot find the current executable: {e}")))?;
        Ok(ServerSource::Spawn {
            program,
            base,
            transport,
        })
    }

    /// Whether the runner starts the server (so dispatch and queue are really applied).
    pub fn is_managed(&self) -> bool {
        !matches!(self, ServerSource::Remote(_))
    }

    /// The same source, with the started servers also serving HTTP/JSON on a free loopback
    /// port (unless the base args already name an HTTP address). A remote server is unchanged.
    pub fn with_http_listener(&self) -> Self {
        let mut source = self.clone();
        match &mut source {
            ServerSource::Remote(_) => {}
            ServerSource::Spawn { base, .. } | ServerSource::InProcess { base, .. } => {
                base.http_addr
                    .get_or_insert_with(|| "127.0.0.1:0".to_owned());
            }
        }
        source
    }
}

/// The server args for one server on a free loopback port (or, for brisk over
/// [`Transport::Unix`], a fresh socket path): brisk with its dispatch × queue (an HTTP address
/// in `base` is kept), or a peer (no HTTP listener, brisk's flags unused; volo with its
/// transport).
pub fn server_args(base: &ServerArgs, key: ServerKey, transport: Transport) -> ServerArgs {
    let mut args = base.clone();
    args.addr = Some(match (transport, key.player) {
        (Transport::Unix, Player::Brisk) => unix_socket_addr(),
        _ => "127.0.0.1:0".to_owned(),
    });
    if key.player != Player::Brisk {
        args.player = Some(key.player);
        args.http_addr = None;
    }
    if let Some(choice) = key.choice {
        args.dispatch = Some(choice.dispatch);
        if choice.queue.is_some() {
            args.queue = choice.queue;
        }
    }
    if key.volo_transport.is_some() {
        args.volo_transport = key.volo_transport;
    }
    args
}

/// A socket path no server of this process used yet, in the temp directory.
fn unix_socket_addr() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("brisk-bench-{}-{n}.sock", std::process::id()));
    format!("unix:{}", path.display())
}

/// A spawned server process.
struct ChildServer {
    child: Child,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<()>>,
}

impl ChildServer {
    fn spawn(program: &PathBuf, args: &ServerArgs) -> Result<(Self, ListeningAddrs), RunError> {
        let mut args = args.clone();
        args.exit_on_stdin_eof = true;
        let expect_http = args.http_addr.is_some();
        let argv = args.to_argv();
        let mut child = Command::new(program)
            .arg(SERVE_SUBCOMMAND)
            .args(&argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                RunError::Server(format!(
                    "cannot start the benchmark server `{} {SERVE_SUBCOMMAND} {}`: {e}",
                    program.display(),
                    argv.join(" ")
                ))
            })?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RunError::Server("the server's stdout was not piped".into()));
        };
        let (tx, rx) = mpsc::channel();
        // Reads the start-up output until LISTENING, then keeps draining (and echoing)
        // so the child never blocks on a full pipe.
        let reader = std::thread::Builder::new()
            .name("brisk-bench-server-out".into())
            .spawn(move || {
                let mut reader = BufReader::new(stdout);
                let result = server::wait_for_listening_all(&mut reader, expect_http, |line| {
                    println!("  [server] {line}");
                });
                let ok = result.is_ok();
                let _ = tx.send(result.map_err(|e| e.to_string()));
                if ok {
                    let mut line = String::new();
                    while matches!(std::io::BufRead::read_line(&mut reader, &mut line), Ok(n) if n > 0)
                    {
                        println!("  [server] {}", line.trim_end());
                        line.clear();
                    }
                }
            })
            .map_err(|e| RunError::Server(format!("cannot start the output reader: {e}")));
        let reader = match reader {
            Ok(r) => r,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        let mut server = ChildServer {
            child,
            stdin,
            reader: Some(reader),
        };
        match rx.recv_timeout(LISTEN_TIMEOUT) {
            Ok(Ok(addrs)) => Ok((server, addrs)),
            Ok(Err(msg)) => {
                let status = server.kill_and_wait();
                Err(RunError::Server(format!("{msg} (exit status: {status})")))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                server.kill_and_wait();
                Err(RunError::Server(format!(
                    "the benchmark server did not print `LISTENING <addr>` within {} s",
                    LISTEN_TIMEOUT.as_secs()
                )))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = server.kill_and_wait();
                Err(RunError::Server(format!(
                    "the benchmark server's output ended before `LISTENING` (exit status: {status})"
                )))
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin (the server shuts down gracefully), waits up to [`STOP_GRACE`], then kills.
    fn stop(mut self) {
        self.stdin.take();
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    eprintln!("benchmark server did not exit within {STOP_GRACE:?}; killing it");
                    self.kill_and_wait();
                    break;
                }
            }
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }

    fn kill_and_wait(&mut self) -> String {
        self.stdin.take();
        if let Ok(Some(status)) = self.child.try_wait() {
            return status.to_string();
        }
        let _ = self.child.kill();
        match self.child.wait() {
            Ok(s) => s.to_string(),
            Err(e) => format!("unknown ({e})"),
        }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        if self.reader.is_some() {
            self.kill_and_wait();
        }
    }
}

enum Inner {
    Remote,
    Child(ChildServer),
    InProcess(Box<StartedServer>),
    InProcessPeer(StartedPeer),
}

/// A server the scenes of one dispatch × queue choice run against.
pub struct RunningServer {
    addr: String,
    http_addr: Option<String>,
    pid: Option<u32>,
    inner: Inner,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("addr", &self.addr)
            .field("http_addr", &self.http_addr)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl RunningServer {
    /// Starts (or, for a remote server, just names) the server for `key`.
    pub async fn start(source: &ServerSource, key: ServerKey) -> Result<Self, RunError> {
        match source {
            ServerSource::Remote(addr) => Ok(RunningServer {
                addr: addr.clone(),
                http_addr: None,
                pid: None,
                inner: Inner::Remote,
            }),
            ServerSource::Spawn {
                program,
                base,
                transport,
            } => {
                let args = server_args(base, key, *transport);
                let program = program.clone();
                let (child, addrs) =
                    tokio::task::spawn_blocking(move || ChildServer::spawn(&program, &args))
                        .await
                        .map_err(|e| {
                            RunError::Server(format!("server start task failed: {e}"))
                        })??;
                Ok(RunningServer {
                    addr: addrs.addr.to_string(),
                    http_addr: addrs.http_addr.map(|a| a.to_string()),
                    pid: Some(child.pid()),
                    inner: Inner::Child(child),
                })
            }
            ServerSource::InProcess { base, transport } if key.player != Player::Brisk => {
                let args = server_args(base, key, *transport);
                let peer = server::start_peer(&args, key.player).await.map_err(|e| {
                    RunError::Server(format!(
                        "cannot start the in-process {} server: {e}",
                        key.player
                    ))
                })?;
                Ok(RunningServer {
                    addr: peer.addr.to_string(),
                    http_addr: None,
                    pid: None,
                    inner: Inner::InProcessPeer(peer),
                })
            }
            ServerSource::InProcess { base, transport } => {
                let args = server_args(base, key, *transport);
                let started = server::start(&args).await.map_err(|e| {
                    RunError::Server(format!("cannot start the in-process server: {e}"))
                })?;
                Ok(RunningServer {
                    addr: started.local_addr().to_string(),
                    http_addr: started.http_addr().map(|a| a.to_string()),
                    pid: None,
                    inner: Inner::InProcess(Box::new(started)),
                })
            }
        }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The HTTP/JSON address of a server the runner started with an HTTP listener
    /// ([`ServerSource::with_http_listener`]); `None` otherwise (and for a remote server).
    pub fn http_addr(&self) -> Option<&str> {
        self.http_addr.as_deref()
    }

    /// The server's process id when it is a child process (for its CPU time).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Stops a server the runner started; a remote server is left alone.
    pub async fn stop(self) {
        match self.inner {
            Inner::Remote => {}
            Inner::Child(child) => {
                let _ = tokio::task::spawn_blocking(move || child.stop()).await;
            }
            Inner::InProcess(started) => {
                started.shutdown().await;
            }
            Inner::InProcessPeer(peer) => peer.task.abort(),
        }
    }
}
