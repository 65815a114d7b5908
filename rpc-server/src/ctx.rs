//! [`ServerCtx`]: what every task of one server shares, and the [`Dispatcher`]
//! that says where its calls run.
//!
//! One `ServerCtx` is built at start and shared (`Arc`) by the accept loops,
//! every connection task, the HTTP gateway and every pooled job. Everything in
//! it is fixed once the server runs, except what is made to be shared: the
//! [`StopState`], the counters and metrics, the frame budget.
//!
//! The dispatch mode is decided once, here: the [`Dispatcher`] either has no
//! pool or owns the one pool, so code that runs a call matches one value and
//! cannot find a pool mode without its pool.

use std::sync::Arc;

use rpc_core::{Dispatch, Interceptor, RpcError};

use crate::config::DispatchConfig;
use crate::metrics::Metrics;
use crate::pool::WorkerPool;
use crate::router::Router;
use crate::stats::ServerStats;
use crate::stop::StopState;
use crate::ServerConfig;

/// Where the server runs its calls.
pub(crate) enum Dispatcher {
    /// On the task that read the call (a connection task, an HTTP connection).
    Direct,
    /// On the worker pool's threads.
    Pool(Arc<WorkerPool>),
}

impl Dispatcher {
    /// The dispatcher `config.dispatch` asks for; pool mode starts the pool
    /// (its threads named `brisk-worker` unless the config names them, and
    /// inside `runtime`, where handlers run).
    pub fn for_config(
        config: &ServerConfig,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Dispatcher, RpcError> {
        match &config.dispatch {
            DispatchConfig::Direct => Ok(Dispatcher::Direct),
            DispatchConfig::Pool(pool_config) => {
                let mut pool_config = pool_config.clone();
                if pool_config.name.is_empty() {
                    pool_config.name = "brisk-worker".into();
                }
                let pool = WorkerPool::in_runtime(pool_config, runtime.clone())
                    .map_err(|e| RpcError::config("pool", e.to_string()))?;
                Ok(Dispatcher::Pool(Arc::new(pool)))
            }
        }
    }

    /// The worker pool, in pool mode.
    pub fn pool(&self) -> Option<&Arc<WorkerPool>> {
        match self {
            Dispatcher::Direct => None,
            Dispatcher::Pool(pool) => Some(pool),
        }
    }

    /// The mode, as configured.
    pub fn mode(&self) -> Dispatch {
        match self {
            Dispatcher::Direct => Dispatch::Direct,
            Dispatcher::Pool(_) => Dispatch::Pool,
        }
    }
}

/// Everything a connection task needs, shared by all of them.
pub(crate) struct ServerCtx {
    pub router: Router,
    pub interceptors: Vec<Arc<dyn Interceptor>>,
    /// The tower layers around the handlers, when the server has any.
    #[cfg(feature = "tower")]
    pub layers: Option<crate::layers::LayeredService>,
    pub dispatcher: Dispatcher,
    pub runtime: tokio::runtime::Handle,
    pub config: ServerConfig,
    pub stop: StopState,
    pub stats: Arc<ServerStats>,
    pub metrics: Metrics,
    /// What `/metrics` renders: the user's registry (or a new one) with
    /// brisk's collector in it.
    pub registry: prometheus_client::registry::Registry,
    /// Bytes that large request frames may hold at once, across connections
    /// (`memory.frame_budget`).
    pub frame_budget: rpc_transport::FrameBudget,
    /// The connections' busy polls: none polls while many are in rhythm
    /// (`rpc_transport::BusyPoll`).
    pub poll_group: rpc_transport::PollGroup,
}

impl ServerCtx {
    /// Whether calls pass middleware (interceptors or layers) before their
    /// handler.
    pub fn has_middleware(&self) -> bool {
        #[cfg(feature = "tower")]
        if self.layers.is_some() {
            return true;
        }
        !self.interceptors.is_empty()
    }

    /// The context of a server about to start on the current tokio runtime:
    /// its dispatcher (and pool) built from `config`, nothing stopped yet.
    pub fn new(
        config: ServerConfig,
        router: Router,
        interceptors: Vec<Arc<dyn Interceptor>>,
        mut registry: prometheus_client::registry::Registry,
    ) -> Result<ServerCtx, RpcError> {
        let runtime = tokio::runtime::Handle::current();
        let dispatcher = Dispatcher::for_config(&config, &runtime)?;
        let metrics = Metrics::for_router(&router);
        let stats = Arc::new(ServerStats::default());
        registry.register_collector(Box::new(
            metrics.collector(stats.clone(), dispatcher.pool().cloned()),
        ));
        Ok(ServerCtx {
            dispatcher,
            metrics,
            registry,
            frame_budget: rpc_transport::FrameBudget::new(config.memory.frame_budget),
            router,
            interceptors,
            #[cfg(feature = "tower")]
            layers: None,
            poll_group: rpc_transport::PollGroup::new(runtime.metrics().num_workers()),
            runtime,
            config,
            stop: StopState::new(),
            stats,
        })
    }
}
