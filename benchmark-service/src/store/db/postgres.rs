//! The PostgreSQL backend: a deadpool pool of tokio-postgres clients.
//!
//! Queries truly await; [`PgStore::get_blocking`] blocks on them for callers on plain threads.
//!
//! Invariants:
//! * Every connection's task runs on the runtime the store was opened on (its handle is kept),
//!   not on whichever runtime a caller happens to poll from, so connections outlive callers'
//!   short-lived runtimes. That runtime must outlive the store and be a multi-thread runtime (or
//!   otherwise be driven) for queries to make progress.
//! * All `pool_size` connections are opened at start, so a wrong URL or a refused connection
//!   fails the start with a typed [`StoreError::Postgres`], not the first query. The table is
//!   created and seeded on the first of them under a transaction-scoped advisory lock, so
//!   several servers may start at once; each has the select prepared (kept in the client's
//!   statement cache) and its columns checked against [`Message`].
//! * The pool heals: a client found closed at checkout is discarded (deadpool's fast recycling),
//!   and a query that fails because its connection is gone (server restart, admin termination,
//!   network drop) discards that connection and is retried on another — at most `pool_size + 1`
//!   attempts, enough to drain a pool whose connections all died at once and still reach a
//!   fresh one.
//! * The URL's password never leaves: errors and logs carry the redacted URL.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::{
    Connect, Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use futures::future::BoxFuture;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_postgres::types::Type;
use tokio_postgres::NoTls;

use super::limits::CHECKOUT_TIMEOUT;
use super::url::redact_url;
use crate::store::error::StoreError;
use crate::store::message::{seed_messages, Message};

/// The scenario's query, PostgreSQL placeholder syntax.
const SELECT_SQL: &str = "select id, from_uid, to_uid, content from message where id = $1";

const CREATE_SQL: &str = "create table if not exists message (\
     id bigint primary key, \
     from_uid bigint not null, \
     to_uid bigint not null, \
     content text not null)";

const SEED_SQL: &str = "insert into message (id, from_uid, to_uid, content) \
     values ($1, $2, $3, $4) \
     on conflict (id) do update set \
     from_uid = excluded.from_uid, to_uid = excluded.to_uid, content = excluded.content";

/// Key of the transaction-scoped advisory lock serialising concurrent seeding ("brisk\0\0\x01").
const SEED_LOCK_KEY: i64 = 0x6272_6973_6b00_0001;

/// Connect timeout applied to URLs that do not set `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `application_name` applied to URLs that do not set one.
const APPLICATION_NAME: &str = "brisk-benchmark";

/// The `message` table in one PostgreSQL database, behind a bounded pool of clients.
pub(super) struct PgStore {
    pool: Pool,
    /// The runtime the connection tasks run on; `get_blocking` drives queries through it.
    handle: Handle,
    /// `postgresql host:port/db`
    label: String,
    /// The URL with the password redacted, for error messages.
    target: String,
    /// Connections opened over the pool's life (for logs and tests).
    connects: Arc<AtomicUsize>,
}

fn pg_err(target: &str, action: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    let target = target.to_string();
    move |source| StoreError::Postgres {
        target,
        action,
        source,
    }
}

impl PgStore {
    /// Connects `pool_size` clients to the database at `url`, creating and seeding the table
    /// when needed. Must run inside the tokio runtime the connections are to live on.
    pub(super) async fn open(url: &str, pool_size: usize) -> Result<PgStore, StoreError> {
        let target = redact_url(url);
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(pg_err(&target, "parse the PostgreSQL URL"))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name(APPLICATION_NAME);
        }
        let handle = Handle::try_current().map_err(|_| {
            StoreError::InvalidConfig(format!(
                "the PostgreSQL database {target} must be opened from inside a tokio runtime"
            ))
        })?;
        let label = pg_label(&config);
        let connects = Arc::new(AtomicUsize::new(0));
        let connector = Connector {
            handle: handle.clone(),
            target: target.clone(),
            connects: connects.clone(),
        };
        let manager = Manager::from_connect(
            config,
            connector,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CHECKOUT_TIMEOUT))
            .build()
            .map_err(|source| StoreError::Pool {
                target: target.clone(),
                source: Box::new(source),
            })?;
        let store = PgStore {
            pool,
            handle,
            label,
            target,
            connects,
        };

        let mut first = store.checkout().await?;
        store.seed(&mut first).await?;
        store.check_select(&first).await?;
        let mut held = vec![first];
        for _ in 1..pool_size {
            let client = store.checkout().await?;
            store.check_select(&client).await?;
            held.push(client);
        }
        Ok(store)
    }

    /// A client of the pool (connecting one when none is idle), waiting up to
    /// [`CHECKOUT_TIMEOUT`] when all are busy.
    async fn checkout(&self) -> Result<Object, StoreError> {
        let start = Instant::now();
        self.pool.get().await.map_err(|error| match error {
            PoolError::Backend(source) => StoreError::Postgres {
                target: self.target.clone(),
                action: "connect",
                source,
            },
            PoolError::Timeout(_) => StoreError::PoolTimeout {
                target: self.target.clone(),
                pool_size: self.pool_size(),
                waited: start.elapsed(),
            },
            other => StoreError::Pool {
                target: self.target.clone(),
                source: Box::new(other),
            },
        })
    }

    async fn seed(&self, client: &mut Object) -> Result<(), StoreError> {
        let err = || pg_err(&self.target, "create and seed table message");
        let tx = client.transaction().await.map_err(err())?;
        // Several servers starting at once would otherwise race on `create table if not exists`.
        tx.execute("select pg_advisory_xact_lock($1)", &[&SEED_LOCK_KEY])
            .await
            .map_err(err())?;
        tx.batch_execute(CREATE_SQL).await.map_err(err())?;
        let insert = tx
            .prepare_typed(SEED_SQL, &[Type::INT8, Type::INT8, Type::INT8, Type::TEXT])
            .await
            .map_err(err())?;
        for m in seed_messages() {
            tx.execute(&insert, &[&m.id, &m.from_uid, &m.to_uid, &m.content])
                .await
                .map_err(err())?;
        }
        tx.commit().await.map_err(err())
    }

    /// Prepares the select on `client` (into its statement cache) and checks that the table's
    /// columns have the types [`Message`] needs.
    async fn check_select(&self, client: &Object) -> Result<(), StoreError> {
        let select = client
            .prepare_typed_cached(SELECT_SQL, &[Type::INT8])
            .await
            .map_err(pg_err(&self.target, "prepare the select on table message"))?;
        let bad: Vec<String> = select
            .columns()
            .iter()
            .zip([Type::INT8, Type::INT8, Type::INT8, Type::TEXT])
            .filter(|(col, want)| {
                let ty = col.type_();
                !(ty == want || (*want == Type::TEXT && *ty == Type::VARCHAR))
            })
            .map(|(col, _)| format!("{} is {}", col.name(), col.type_()))
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(StoreError::SchemaMismatch {
                target: self.target.clone(),
                detail: bad.join(", "),
            })
        }
    }

    /// The record with `id`, or [`StoreError::NotFound`].
    pub(super) async fn get(&self, id: i64) -> Result<Message, StoreError> {
        let mut attempts_left = self.pool_size() + 1;
        loop {
            attempts_left -= 1;
            let client = self.checkout().await?;
            match query_message(&client, id).await {
                Ok(found) => return found.ok_or(StoreError::NotFound(id)),
                Err(error)
                    if attempts_left > 0 && (client.is_closed() || is_connection_lost(&error)) =>
                {
                    let connects = self.connects.load(Ordering::Relaxed);
                    tracing::info!(db = %self.target, %error, connects, "PostgreSQL connection lost; reconnecting");
                    // Out of the pool for good: its slot is free for a fresh connection.
                    drop(Object::take(client));
                }
                Err(error) => return Err(pg_err(&self.target, "query table message by id")(error)),
            }
        }
    }

    /// [`get`](PgStore::get) for callers that cannot await: from a plain OS thread via the
    /// store's runtime handle, from a multi-thread runtime's thread via `block_in_place`; on a
    /// current-thread runtime [`StoreError::BlockingInRuntime`] instead of a deadlock.
    pub(super) fn get_blocking(&self, id: i64) -> Result<Message, StoreError> {
        use tokio::runtime::RuntimeFlavor;
        match Handle::try_current() {
            // A plain OS thread (e.g. a worker-pool thread): drive the future here; the
            // connection tasks keep running on the store's runtime.
            Err(_) => self.handle.block_on(self.get(id)),
            Ok(current) if current.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.handle.block_on(self.get(id)))
            }
            Ok(_) => Err(StoreError::BlockingInRuntime {
                target: self.target.clone(),
            }),
        }
    }

    /// Number of pooled clients.
    pub(super) fn pool_size(&self) -> usize {
        self.pool.status().max_size
    }

    /// `postgresql host:port/db`.
    pub(super) fn label(&self) -> &str {
        &self.label
    }

    /// Connections opened over the pool's life.
    #[cfg(test)]
    pub(super) fn connects(&self) -> usize {
        self.connects.load(Ordering::Relaxed)
    }
}

/// Opens connections for the pool without TLS, spawning each connection's task on the store's
/// runtime and counting it.
struct Connector {
    handle: Handle,
    target: String,
    connects: Arc<AtomicUsize>,
}

impl Connect for Connector {
    fn connect(
        &self,
        config: &tokio_postgres::Config,
    ) -> BoxFuture<'_, Result<(tokio_postgres::Client, JoinHandle<()>), tokio_postgres::Error>>
    {
        let config = config.clone();
        Box::pin(async move {
            let (client, connection) = config.connect(NoTls).await?;
            self.connects.fetch_add(1, Ordering::Relaxed);
            let target = self.target.clone();
            let task = self.handle.spawn(async move {
                if let Err(error) = connection.await {
                    tracing::warn!(db = %target, %error, "PostgreSQL connection closed with an error; the pool will reconnect");
                }
            });
            Ok((client, task))
        })
    }
}

async fn query_message(client: &Object, id: i64) -> Result<Option<Message>, tokio_postgres::Error> {
    let select = client
        .prepare_typed_cached(SELECT_SQL, &[Type::INT8])
        .await?;
    let Some(row) = client.query_opt(&select, &[&id]).await? else {
        return Ok(None);
    };
    Ok(Some(Message {
        id: row.try_get(0)?,
        from_uid: row.try_get(1)?,
        to_uid: row.try_get(2)?,
        content: row.try_get(3)?,
    }))
}

/// The connection is gone: closed, or the server is shutting it down (SQLSTATE class 57P:
/// admin_shutdown, crash_shutdown, cannot_connect_now).
fn is_connection_lost(error: &tokio_postgres::Error) -> bool {
    error.is_closed() || error.code().is_some_and(|c| c.code().starts_with("57P"))
}

fn pg_label(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("postgresql {host}:{port}/{db}")
}
