//! What unit tests across the crate share: a service whose every method
//! answers an empty body, and a server context with a connection's place
//! in its admission table.

use std::sync::Arc;
use std::time::Instant;

use rpc_core::modes::Dispatch;
use rpc_core::{Context, HandlerFuture, RpcResponse, ServiceHandler};

use crate::admission::{Admission, Admit, Ticket};
use crate::config::ServerConfig;
use crate::ctx::ServerCtx;
use crate::router::Router;

/// A server context for `dispatch` serving `router` (inside a runtime: the
/// context takes its handle), and the ticket of a first connection.
pub(crate) fn server(dispatch: Dispatch, router: Router) -> (Arc<ServerCtx>, Ticket) {
    let config = ServerConfig::default().with_dispatch(dispatch);
    let admission = Arc::new(Admission::new(&config, Default::default()));
    let ctx = ServerCtx::new(config, router, Vec::new(), Default::default()).unwrap();
    let Admit::Accepted(ticket) = admission.admit(None, Instant::now()) else {
        panic!("the first connection is let in");
    };
    (Arc::new(ctx), ticket)
}

/// A pool-dispatch server context serving `router` (inside a runtime)
/// whose pool has one thread and admits two unfinished calls: one running,
/// one queued.
pub(crate) fn one_thread_pool(router: Router) -> Arc<ServerCtx> {
    let config = ServerConfig::default().with_pool(crate::pool::PoolConfig {
        core_threads: 1,
        max_threads: 1,
        queue_size: 1,
        queue: crate::pool::QueueKind::Transfer,
        ..Default::default()
    });
    Arc::new(ServerCtx::new(config, router, Vec::new(), Default::default()).unwrap())
}

/// A service named `.0` with the methods `.1`, each answering empty.
pub(crate) struct EmptyAnswers(pub &'static str, pub &'static [&'static str]);

impl ServiceHandler for EmptyAnswers {
    fn service_name(&self) -> &'static str {
        self.0
    }

    fn method_names(&self) -> &'static [&'static str] {
        self.1
    }

    fn call(&self, _: usize, _: Context, _: bytes::Bytes) -> HandlerFuture<'_> {
        Box::pin(async { Ok(RpcResponse::default()) })
    }
}
