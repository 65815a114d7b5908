//! [`Registration`]: a server's entries, kept alive by a background task.
//!
//! Two ways to end it, on purpose with different effects:
//! - [`Registration::deregister`] — graceful shutdown: the entries are removed at
//!   once (etcd: the lease is revoked), so clients stop sending new calls before
//!   the server stops answering;
//! - dropping it — what a crash looks like: the keep-alive task is aborted and
//!   nothing is removed; a registry with leases lets the entries expire after
//!   their TTL, exactly as it would if the process had died.

use std::future::Future;
use std::time::Duration;

use rpc_core::RpcError;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::ServiceInstance;

/// Resolves when [`Registration::deregister`] is called. Handed to the task a
/// registry runs for a registration.
pub struct StopSignal(oneshot::Receiver<()>);

impl StopSignal {
    /// Waits for a graceful deregistration request. Returns `true` when one came;
    /// `false` when the [`Registration`] went away without asking (its task is
    /// being aborted anyway).
    pub async fn requested(&mut self) -> bool {
        (&mut self.0).await.is_ok()
    }
}

/// Keeps a server's instances registered; see the module docs for how it ends.
pub struct Registration {
    instances: Vec<ServiceInstance>,
    describe: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), RpcError>>>,
}

impl Registration {
    /// How long [`deregister`](Self::deregister) waits for the registry.
    pub const DEREGISTER_TIMEOUT: Duration = Duration::from_secs(5);

    /// Starts `run` as the registration's task on the current runtime. `run`
    /// keeps the entries alive and, when its [`StopSignal`] fires, removes them
    /// and returns. If the registration is dropped instead, the task is aborted.
    pub fn spawn<F, Fut>(instances: Vec<ServiceInstance>, describe: String, run: F) -> Registration
    where
        F: FnOnce(StopSignal) -> Fut,
        Fut: Future<Output = Result<(), RpcError>> + Send + 'static,
    {
        let (stop, rx) = oneshot::channel();
        let task = tokio::spawn(run(StopSignal(rx)));
        Registration {
            instances,
            describe,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// The registered instances.
    pub fn instances(&self) -> &[ServiceInstance] {
        &self.instances
    }

    /// Where they are registered (`etcd://…`).
    pub fn registry(&self) -> &str {
        &self.describe
    }

    /// Removes the entries now and stops keeping them alive (bounded by
    /// [`DEREGISTER_TIMEOUT`](Self::DEREGISTER_TIMEOUT)).
    pub async fn deregister(mut self) -> Result<(), RpcError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(mut task) = self.task.take() else {
            return Ok(());
        };
        match tokio::time::timeout(Self::DEREGISTER_TIMEOUT, &mut task).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => Err(RpcError::Io {
                context: format!("deregistering from {}", self.describe),
                reason: join.to_string(),
                source: Some(rpc_core::Cause::new(join)),
            }),
            Err(_) => {
                task.abort();
                Err(RpcError::io_msg(
                    format!("deregistering from {}", self.describe),
                    format!(
                        "no answer within {:?}; the entries expire with their lease",
                        Self::DEREGISTER_TIMEOUT
                    ),
                ))
            }
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("registry", &self.describe)
            .field("instances", &self.instances)
            .finish()
    }
}
