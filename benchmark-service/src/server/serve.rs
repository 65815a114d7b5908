//! Serving until told to stop, and the stdout protocol of a serving process: the effective
//! configuration, the `LISTENING` line(s) ([`listening`](super::listening) owns their format),
//! and after the shutdown signal the shutdown report.
//!
//! [`run`] is the blocking entry point (its own runtime, the process signals, stdout);
//! [`serve_until`] is the same on the caller's runtime with any writer and any shutdown future,
//! for tests. Writes after start-up ignore errors ([`say`]): a parent that closes its end of the
//! pipe must not crash the server.

use std::future::Future;
use std::io::Write;
use std::time::Duration;

use brisk::server::ShutdownReport;
use brisk::{Dispatch, PoolConfig};
use tracing::{info, warn};

use crate::players::Player;

use super::args::ServerArgs;
use super::error::BenchError;
use super::listening::{LISTENING_HTTP_PREFIX, LISTENING_PREFIX};
use super::shutdown::{shutdown_text, ShutdownCause, ShutdownSignals};
use super::start::{start, start_peer, StartedServer};

/// How long [`run`] lets the runtime finish leftover tasks after the graceful shutdown.
const RUNTIME_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The blocking entry point of the benchmark server: builds a multi-thread tokio runtime with
/// `--io-threads` workers, starts, prints the effective configuration and `LISTENING <ip:port>`
/// on stdout, waits for Ctrl-C, SIGTERM or (with `--exit-on-stdin-eof`) the end of stdin, then
/// shuts down gracefully and prints the shutdown report.
pub fn run(args: ServerArgs) -> Result<(), BenchError> {
    // First: every thread started below inherits it, and the thread counts count its CPUs.
    if let Some(list) = &args.cpus {
        crate::host::pin_process(list).map_err(|source| BenchError::Io {
            context: format!("cannot run the server on CPUs {list} (--cpus)"),
            source,
        })?;
    }
    let io_threads = args.effective_io_threads()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(io_threads)
        .thread_name("brisk-io")
        .enable_all()
        .build()
        .map_err(|source| BenchError::Io {
            context: format!("cannot start the tokio runtime with {io_threads} I/O threads"),
            source,
        })?;
    let result = runtime.block_on(async {
        let signals = ShutdownSignals::install(args.exit_on_stdin_eof);
        match args.player {
            Some(player) if player != Player::Brisk => {
                serve_peer_until(&args, player, signals.wait()).await
            }
            _ => serve_until(&args, std::io::stdout(), signals.wait())
                .await
                .map(drop),
        }
    });
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_TIMEOUT);
    result
}

/// Starts the server ([`start`]), prints the effective configuration and the
/// `LISTENING <ip:port>` line to `out`, waits for `shutdown`, shuts down gracefully and prints
/// the shutdown report. [`run`] is this with stdout and the process signals.
pub async fn serve_until<W, F>(
    args: &ServerArgs,
    mut out: W,
    shutdown: F,
) -> Result<ShutdownReport, BenchError>
where
    W: Write,
    F: Future<Output = ShutdownCause>,
{
    let server = start(args).await?;
    say(&mut out, &effective_config_text(&server));
    say(
        &mut out,
        &format!("{LISTENING_PREFIX}{}", server.local_addr()),
    );
    if let Some(http) = server.http_addr() {
        say(&mut out, &format!("{LISTENING_HTTP_PREFIX}{http}"));
    }
    let cause = shutdown.await;
    info!(%cause, "benchmark server shutting down");
    let stats = server.handle.stats();
    let pool_stats = server.handle.pool_stats();
    let report = server.shutdown().await;
    let mut text = shutdown_text(cause, &report, &stats);
    if let Some(pool) = pool_stats {
        text.push_str(&format!(
            "\n  worker pool      {} tasks completed, {} rejected, largest size {} threads",
            pool.completed, pool.rejected, pool.largest_pool_size
        ));
    }
    say(&mut out, &text);
    Ok(report)
}

/// [`run`] for a peer: starts it, prints `LISTENING <ip:port>`, serves until `shutdown` (or the
/// accept loop fails, which is an error).
async fn serve_peer_until<F>(
    args: &ServerArgs,
    player: Player,
    shutdown: F,
) -> Result<(), BenchError>
where
    F: Future<Output = ShutdownCause>,
{
    let mut peer = start_peer(args, player).await?;
    let mut out = std::io::stdout();
    say(
        &mut out,
        &format!(
            "{player} benchmark server\n  address          {}\n  settings         {}\n  data             {}",
            peer.addr,
            match player {
                Player::Volo => args.volo_transport.unwrap_or_default().settings(),
                _ => player.settings(),
            },
            peer.store_description
        ),
    );
    say(&mut out, &format!("{LISTENING_PREFIX}{}", peer.addr));
    tokio::select! {
        cause = shutdown => {
            say(&mut out, &format!("{player} benchmark server stopped ({cause})"));
            Ok(())
        }
        ended = &mut peer.task => {
            let why = match ended {
                Ok(Ok(())) => "the accept loop ended".to_owned(),
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            };
            Err(BenchError::Io {
                context: format!("{player} server stopped serving"),
                source: std::io::Error::other(why),
            })
        }
    }
}

/// What the server's `busy_poll` is (plain TCP and Unix sockets are read
/// while polling on any number of I/O threads; this server has no TLS).
fn busy_poll_text(limit: Duration) -> String {
    match limit.as_micros() {
        0 => "off".to_owned(),
        us => format!("{us} µs"),
    }
}

/// The block printed at start: address, dispatch, queue, core/max threads, queue size,
/// keep-alive, I/O threads, busy poll, max frame size, database and data directory.
pub fn effective_config_text(server: &StartedServer) -> String {
    let config = server.config();
    let default_pool = PoolConfig::default();
    let pool = config.dispatch.pool().unwrap_or(&default_pool);
    let unused = if config.dispatch.mode() == Dispatch::Direct {
        "  (unused: direct dispatch)"
    } else {
        ""
    };
    let frame = config.transport.max_frame_size;
    let lines = [
        "brisk benchmark server".to_owned(),
        format!(
            "  address          {} (configured {})",
            server.local_addr(),
            config.addr
        ),
        format!("  dispatch         {}", config.dispatch.mode()),
        format!("  queue            {}{unused}", pool.queue),
        format!(
            "  worker threads   core {}, max {}{unused}",
            pool.core_threads, pool.max_threads
        ),
        format!("  queue size       {}{unused}", pool.queue_size),
        format!(
            "  keep-alive       {} ms{unused}",
            pool.keep_alive.as_millis()
        ),
        format!("  io threads       {}", server.io_threads),
        format!("  busy poll        {}", busy_poll_text(config.busy_poll)),
        format!(
            "  max frame size   {frame} bytes ({:.1} MiB)",
            frame as f64 / (1024.0 * 1024.0)
        ),
        format!("  db               {}", server.store.db.describe()),
        format!("  data dir         {}", server.data_dir.display()),
    ];
    let mut text = lines.join("\n");
    if let Some(http) = server.http_addr() {
        text.push_str(&format!("\n  http/json        {http}"));
    }
    if let Some(registration) = server.handle.registration() {
        let addr = registration
            .instances()
            .first()
            .map(|i| i.addr.as_str())
            .unwrap_or("?");
        text.push_str(&format!(
            "\n  registry         {} as {addr} (weight {})",
            registration.registry(),
            config.weight
        ));
    }
    text
}

/// Writes `text` and a newline, then flushes; errors are logged, not returned (a parent that
/// stopped reading must not bring the server down).
fn say(out: &mut impl Write, text: &str) {
    let result = writeln!(out, "{text}").and_then(|()| out.flush());
    if let Err(e) = result {
        warn!(error = %e, "could not write to the server's output");
    }
}
