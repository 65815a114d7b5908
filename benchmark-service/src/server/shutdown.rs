//! How a serving run ends: the [`ShutdownCause`], the signals [`run`](super::run) waits for
//! (SIGINT, SIGTERM and optionally the end of stdin), and the report printed afterwards.
//!
//! The signal handlers are registered before the `LISTENING` line is printed, so a parent that
//! signals right after reading it gets a graceful shutdown, never the default kill.

use std::fmt;

use brisk::server::stats::StatsSnapshot;
use brisk::server::{ShutdownReport, StopSignal, StopSignals};
use tracing::warn;

/// What ended a [`serve_until`](super::serve_until) run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownCause {
    /// SIGINT / Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// stdin reached EOF (`--exit-on-stdin-eof`: the parent process went away).
    StdinEof,
    /// The caller's shutdown future completed for another reason.
    Requested,
}

impl fmt::Display for ShutdownCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShutdownCause::Interrupt => "interrupt (Ctrl-C)",
            ShutdownCause::Terminate => "SIGTERM",
            ShutdownCause::StdinEof => "stdin closed",
            ShutdownCause::Requested => "shutdown requested",
        })
    }
}

pub(super) fn shutdown_text(
    cause: ShutdownCause,
    report: &ShutdownReport,
    stats: &StatsSnapshot,
) -> String {
    format!(
        "brisk benchmark server stopped ({cause})\n  \
         drained          {} in {} ms\n  \
         requests         {} ({} errors, {} rejected as busy)\n  \
         connections      {} accepted, {} refused, {} evicted\n  \
         busy-polled      {} frames ({} read by the poll itself)\n  \
         worker writes    {} (pooled answers written by the worker, no wake-up)\n  \
         worker reads     {} (requests a worker read itself, lone and pipelining callers)\n  \
         deferred wakes   {} (batches that yielded their runtime thread before waking a parked worker)",
        if report.drained {
            "all in-flight calls"
        } else {
            "NOT all in-flight calls (grace period over)"
        },
        report.elapsed.as_millis(),
        stats.requests,
        stats.errors,
        stats.busy_rejections,
        stats.accepted_connections,
        stats.refused_connections,
        stats.evicted_connections,
        stats.busy_polled_frames,
        stats.busy_poll_reads,
        stats.worker_writes,
        stats.worker_reads,
        stats.deferred_wakes,
    )
}

/// What [`run`](super::run) stops on: SIGINT or SIGTERM (brisk's [`StopSignals`], the same
/// handlers `ServerHandle::shutdown_on_signals` uses), registered up front so that a signal
/// arriving right after the `LISTENING` line is already handled gracefully, and optionally the
/// end of stdin.
pub(super) struct ShutdownSignals {
    signals: StopSignals,
    stdin_eof: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl ShutdownSignals {
    /// Registers the handlers (inside a runtime); with `watch_stdin`, starts a thread that reads
    /// stdin to EOF.
    pub(super) fn install(watch_stdin: bool) -> ShutdownSignals {
        let stdin_eof = watch_stdin.then(|| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            // A plain thread, not tokio's stdin: a blocking read would keep the runtime from
            // shutting down. The thread is detached and ends with the process.
            let spawned = std::thread::Builder::new()
                .name("stdin-watch".into())
                .spawn(move || {
                    let mut stdin = std::io::stdin().lock();
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = std::io::Read::read(&mut stdin, &mut buf) {
                        if n == 0 {
                            break;
                        }
                    }
                    let _ = tx.send(());
                });
            if let Err(e) = spawned {
                warn!(error = %e, "cannot watch stdin; --exit-on-stdin-eof has no effect");
            }
            rx
        });
        ShutdownSignals {
            signals: StopSignals::install(),
            stdin_eof,
        }
    }

    /// Completes on the first signal.
    pub(super) async fn wait(mut self) -> ShutdownCause {
        let stdin = async {
            match self.stdin_eof.as_mut() {
                // A dropped sender (thread failed) counts as EOF too: either way stdin is gone.
                Some(rx) => {
                    let _ = rx.await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            signal = self.signals.wait() => match signal {
                StopSignal::Interrupt => ShutdownCause::Interrupt,
                StopSignal::Terminate => ShutdownCause::Terminate,
            },
            _ = stdin => ShutdownCause::StdinEof,
        }
    }
}
