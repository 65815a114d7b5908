//! [`StopSignals`]: the process signals a server stops on — SIGINT (Ctrl-C)
//! and SIGTERM (what `kill`, systemd, Docker and Kubernetes send) on unix,
//! Ctrl-C elsewhere.
//!
//! [`ServerHandle::shutdown_on_signals`](crate::ServerHandle::shutdown_on_signals)
//! waits for one and shuts down gracefully. Programs that wait on more than
//! signals (the benchmark server also stops at the end of its stdin) install
//! [`StopSignals`] up front and race [`StopSignals::wait`] against the rest.
//!
//! Invariants: handlers are registered by [`StopSignals::install`], so a signal
//! that arrives after it (right after a "listening" line, say) is caught, not
//! fatal. A handler that cannot be registered is logged and never fires; the
//! other one still does (with neither, `wait` never completes and the signal
//! kills the process as it would without brisk).

use std::fmt;

use tracing::warn;

/// Which signal asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT, or Ctrl-C on a terminal.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl fmt::Display for StopSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        })
    }
}

/// Registered stop-signal handlers; [`wait`](Self::wait) for the first signal.
pub struct StopSignals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    /// Registers the handlers now. Must be called inside a tokio runtime.
    pub fn install() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let register = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(s) => Some(s),
                Err(e) => {
                    warn!(error = %e, "cannot handle {name}; it will stop the process without a graceful shutdown");
                    None
                }
            };
            StopSignals {
                interrupt: register(SignalKind::interrupt(), "SIGINT"),
                terminate: register(SignalKind::terminate(), "SIGTERM"),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// Completes when the first stop signal arrives.
    #[cfg_attr(not(unix), allow(unused_mut))]
    pub async fn wait(mut self) -> StopSignal {
        #[cfg(unix)]
        {
            async fn next(signal: Option<&mut tokio::signal::unix::Signal>) {
                match signal {
                    Some(s) => {
                        // `None`: the handler is gone; never fire.
                        if s.recv().await.is_none() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending().await,
                }
            }
            tokio::select! {
                _ = next(self.interrupt.as_mut()) => StopSignal::Interrupt,
                _ = next(self.terminate.as_mut()) => StopSignal::Terminate,
            }
        }
        #[cfg(not(unix))]
        {
            if let Err(e) = tokio::signal::ctrl_c().await {
                warn!(error = %e, "cannot handle Ctrl-C; stopping only when the process is killed");
                std::future::pending::<()>().await;
            }
            StopSignal::Interrupt
        }
    }
}
