//! Tests of [`MessageDb`] on both backends: URL parsing and redaction, opening, seeding,
//! concurrency, pool exhaustion and clear errors on SQLite; the same plus reconnection on
//! PostgreSQL, which runs only when `BRISK_TEST_POSTGRES_URL` names a server (CI starts one).

use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres::NoTls;

use super::url::{parse_url, redact_url, DbTarget};
use super::*;
use crate::store::message::{MAX_ID, MIN_ID};
use crate::store::test_util::TempDir;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn sqlite_url(dir: &TempDir, name: &str) -> String {
    format!("sqlite:{}", dir.path().join(name).display())
}

fn assert_all_found(db: &MessageDb) {
    for id in MIN_ID..=MAX_ID {
        assert_eq!(db.get_blocking(id).unwrap(), Message::seed(id));
    }
    assert!(matches!(db.get_blocking(11), Err(StoreError::NotFound(11))));
    assert!(matches!(db.get_blocking(0), Err(StoreError::NotFound(0))));
}

#[test]
fn url_parsing() {
    let file = |p: &str| Ok(DbTarget::SqliteFile(PathBuf::from(p)));
    assert_eq!(parse_url("sqlite:/tmp/a.db"), file("/tmp/a.db"));
    assert_eq!(parse_url("sqlite:///tmp/a.db"), file("/tmp/a.db"));
    assert_eq!(parse_url("sqlite://rel/a.db?mode=rwc"), file("rel/a.db"));
    assert_eq!(parse_url("SQLITE:a.db"), file("a.db"));
    assert_eq!(parse_url(" /var/x.db "), file("/var/x.db"));
    assert_eq!(parse_url("x.db"), file("x.db"));
    assert_eq!(parse_url("sqlite::memory:"), Ok(DbTarget::SqliteMemory));
    assert_eq!(parse_url("sqlite://:memory:"), Ok(DbTarget::SqliteMemory));
    assert_eq!(parse_url(":memory:"), Ok(DbTarget::SqliteMemory));
    assert_eq!(
        parse_url("postgres://u@h/db"),
        Ok(DbTarget::Postgres("postgres://u@h/db".into()))
    );
    assert_eq!(
        parse_url("postgresql://u@h/db"),
        Ok(DbTarget::Postgres("postgresql://u@h/db".into()))
    );
    assert!(matches!(parse_url(""), Err(StoreError::InvalidConfig(_))));
    assert!(matches!(
        parse_url("sqlite:"),
        Err(StoreError::InvalidConfig(_))
    ));
    let err = parse_url("mysql://root:hunter2@db:3306/bench").unwrap_err();
    assert!(matches!(err, StoreError::UnsupportedUrl { .. }));
    let msg = err.to_string();
    assert!(msg.contains("mysql://root:***@db:3306/bench"), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");
}

impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

#[test]
fn redaction() {
    assert_eq!(
        redact_url("postgres://user:s3cret@host:5432/db"),
        "postgres://user:***@host:5432/db"
    );
    assert_eq!(
        redact_url("postgres://user:p@ss@host/db?password=x&sslmode=disable"),
        "postgres://user:***@host/db?password=***&sslmode=disable"
    );
    assert_eq!(
        redact_url("postgres://user@host/db"),
        "postgres://user@host/db"
    );
    assert_eq!(
        redact_url("postgres://host/db?user=u&PASSWORD=x"),
        "postgres://host/db?user=u&PASSWORD=***"
    );
    assert_eq!(redact_url("/tmp/a.db"), "/tmp/a.db");
}

#[test]
fn default_url_is_sqlite_in_temp_dir() {
    let url = MessageDb::default_url();
    assert!(url.starts_with("sqlite:"));
    assert!(url.ends_with("brisk-bench.db"));
    assert_eq!(
        parse_url(&url),
        Ok(DbTarget::SqliteFile(
            std::env::temp_dir().join("brisk-bench.db")
        ))
    );
}

#[test]
fn fresh_sqlite_db_is_created_and_seeded() {
    let dir = TempDir::new("db-fresh");
    let path = dir.path().join("nested/dir/bench.db");
    let url = format!("sqlite:{}", path.display());
    let db = rt().block_on(MessageDb::open(&url, 2)).unwrap();
    assert!(path.exists());
    assert_eq!(db.kind(), DbKind::Sqlite);
    assert!(db.is_blocking());
    assert_eq!(db.pool_size(), 2);
    assert_eq!(db.describe(), format!("sqlite {} (pool 2)", path.display()));
    assert!(format!("{db:?}").contains("sqlite"));
    assert_all_found(&db);

    let check = rusqlite::Connection::open(&path).unwrap();
    let mode: String = check
        .query_row("pragma journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn plain_path_and_memory_urls_work() {
    let dir = TempDir::new("db-plain");
    let path = dir.path().join("plain.db");
    let rt = rt();
    let db = rt
        .block_on(MessageDb::open(&path.display().to_string(), 1))
        .unwrap();
    assert_all_found(&db);

    // every pooled connection sees the one seeded in-memory database
    let mem = rt.block_on(MessageDb::open("sqlite::memory:", 3)).unwrap();
    assert_eq!(mem.describe(), "sqlite :memory: (pool 3)");
    let held: Vec<_> = match &*mem.inner {
        Backend::Sqlite(store) => (0..3)
            .map(|_| store.checkout(Duration::from_secs(1)).unwrap())
            .collect(),
        Backend::Postgres(_) => unreachable!(),
    };
    for c in &held {
        let n: i64 = c
            .query_row("select count(*) from message", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 10);
    }
    drop(held);
    assert_all_found(&mem);
    // a second memory database is a separate one
    let other = rt.block_on(MessageDb::open(":memory:", 1)).unwrap();
    assert_all_found(&other);
}

#[test]
fn reopen_is_idempotent() {
    let dir = TempDir::new("db-reopen");
    let url = sqlite_url(&dir, "bench.db");
    let rt = rt();
    let first = rt.block_on(MessageDb::open(&url, 2)).unwrap();
    // tamper with a row and add one; reopening restores the seed rows and keeps the extra
    {
        let c = rusqlite::Connection::open(dir.path().join("bench.db")).unwrap();
        c.execute("update message set content = 'tampered' where id = 4", [])
            .unwrap();
        c.execute(
            "insert into message (id, from_uid, to_uid, content) values (42, 1, 2, 'extra')",
            [],
        )
        .unwrap();
    }
    // reopen while the first pool is still open, then again after it is gone
    let second = rt.block_on(MessageDb::open(&url, 3)).unwrap();
    assert_all_found(&second);
    assert_all_found(&first);
    drop(first);
    drop(second);
    let third = rt.block_on(MessageDb::open(&url, 1)).unwrap();
    assert_all_found(&third);
    assert_eq!(third.get_blocking(42).unwrap().content, "extra");
    let c = rusqlite::Connection::open(dir.path().join("bench.db")).unwrap();
    let n: i64 = c
        .query_row(
            "select count(*) from message where id between 1 and 10",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 10);
}

#[test]
fn concurrent_gets_from_8_threads_through_a_pool_of_2() {
    let dir = TempDir::new("db-concurrent");
    let rt = rt();
    let db = rt
        .block_on(MessageDb::open(&sqlite_url(&dir, "bench.db"), 2))
        .unwrap();
    let handle = rt.handle().clone();
    let threads: Vec<_> = (0..8i64)
        .map(|t| {
            let db = db.clone();
            let handle = handle.clone();
            std::thread::spawn(move || {
                for i in 0..300i64 {
                    let id = (i + t) % 10 + 1;
                    // alternate the blocking call and the async call driven by block_on
                    let m = if i % 2 == 0 {
                        db.get_blocking(id)
                    } else {
                        handle.block_on(db.get(id))
                    };
                    assert_eq!(m.unwrap().id, id);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // every connection went back to the pool
    if let Backend::Sqlite(store) = &*db.inner {
        assert_eq!(store.idle_connections(), 2);
    }
}

#[test]
fn gets_from_inside_tokio_tasks() {
    let dir = TempDir::new("db-tasks");
    let rt = rt();
    let db = rt
        .block_on(MessageDb::open(&sqlite_url(&dir, "bench.db"), 2))
        .unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..16i64)
            .map(|t| {
                let db = db.clone();
                tokio::spawn(async move {
                    for i in 0..50i64 {
                        let id = (i + t) % 10 + 1;
                        assert_eq!(db.get(id).await.unwrap().id, id);
                    }
                    let db2 = db.clone();
                    tokio::task::spawn_blocking(move || db2.get_blocking(t % 10 + 1))
                        .await
                        .unwrap()
                        .unwrap()
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    // and on a current-thread runtime
    let ct = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(ct.block_on(db.get(5)).unwrap(), Message::seed(5));
}

#[test]
fn exhausted_pool_times_out_with_a_clear_error() {
    let dir = TempDir::new("db-timeout");
    let db = rt()
        .block_on(MessageDb::open(&sqlite_url(&dir, "bench.db"), 1))
        .unwrap();
    let Backend::Sqlite(store) = &*db.inner else {
        unreachable!()
    };
    let held = store.checkout(Duration::from_secs(1)).unwrap();
    let err = store.checkout(Duration::from_millis(50)).err().unwrap();
    assert!(
        matches!(err, StoreError::PoolTimeout { pool_size: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("bench.db"), "{err}");
    drop(held);
    assert!(store.checkout(Duration::from_millis(50)).is_ok());
}

#[test]
fn bad_configs_are_clear_errors() {
    let rt = rt();
    let dir = TempDir::new("db-bad");
    let err = rt
        .block_on(MessageDb::open(&sqlite_url(&dir, "x.db"), 0))
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidConfig(_)), "{err}");

    // a regular file where the database directory should be
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, b"x").unwrap();
    let path = blocker.join("x.db");
    let err = rt
        .block_on(MessageDb::open(&path.display().to_string(), 1))
        .unwrap_err();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );

    // not a database
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'j'; 4096]).unwrap();
    let err = rt
        .block_on(MessageDb::open(&junk.display().to_string(), 1))
        .unwrap_err();
    assert!(matches!(err, StoreError::Sqlite { .. }), "{err}");
    assert!(
        err.to_string().contains(&junk.display().to_string()),
        "{err}"
    );

    // a table with other columns
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("create table message (id integer primary key, body text)")
        .unwrap();
    let err = rt
        .block_on(MessageDb::open(&other.display().to_string(), 1))
        .unwrap_err();
    assert!(matches!(err, StoreError::Sqlite { .. }), "{err}");

    // PostgreSQL nobody listens on: fails fast, names the URL, hides the password
    let err = rt
        .block_on(MessageDb::open(
            "postgres://bench:hunter2@127.0.0.1:1/bench",
            1,
        ))
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            StoreError::Postgres {
                action: "connect",
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains("postgres://bench:***@127.0.0.1:1/bench"),
        "{msg}"
    );
    assert!(!msg.contains("hunter2"), "{msg}");
}

// --- PostgreSQL, only when BRISK_TEST_POSTGRES_URL is set ---------------------------------

fn postgres_url() -> Option<String> {
    match std::env::var("BRISK_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            eprintln!(
                "note: BRISK_TEST_POSTGRES_URL is not set; skipping the PostgreSQL test \
                 (e.g. BRISK_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:15432/postgres)"
            );
            None
        }
    }
}

#[test]
fn postgres_open_get_concurrent_and_reconnect() {
    let Some(url) = postgres_url() else { return };
    // a test-specific application_name, so the reconnect check below terminates only the
    // connections of this pool
    let app = format!("brisk-test-{}-reconnect", std::process::id());
    let sep = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{sep}application_name={app}");
    let rt = rt();
    let db = rt.block_on(MessageDb::open(&url, 2)).unwrap();
    assert_eq!(db.kind(), DbKind::Postgres);
    assert!(!db.is_blocking());
    let desc = db.describe();
    assert!(
        desc.starts_with("postgresql ") && desc.ends_with("(pool 2)"),
        "{desc}"
    );
    println!("opened {desc}");

    // from a non-runtime OS thread: blocking and block_on(get)
    assert_all_found(&db);
    for id in MIN_ID..=MAX_ID {
        assert_eq!(rt.block_on(db.get(id)).unwrap(), Message::seed(id));
    }

    // reopen is idempotent (and concurrent opens do not race on create table)
    rt.block_on(async {
        let (a, b) = tokio::join!(MessageDb::open(&url, 1), MessageDb::open(&url, 1));
        assert_all_found_async(&a.unwrap()).await;
        assert_all_found_async(&b.unwrap()).await;
    });

    // 8 OS threads through a pool of 2, mixing get_blocking and Handle::block_on(get)
    let handle = rt.handle().clone();
    let threads: Vec<_> = (0..8i64)
        .map(|t| {
            let db = db.clone();
            let handle = handle.clone();
            std::thread::spawn(move || {
                for i in 0..100i64 {
                    let id = (i + t) % 10 + 1;
                    let m = if i % 2 == 0 {
                        db.get_blocking(id)
                    } else {
                        handle.block_on(db.get(id))
                    };
                    assert_eq!(m.unwrap().id, id);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }

    // 32 tokio tasks, some also calling get_blocking on runtime threads (block_in_place)
    rt.block_on(async {
        let tasks: Vec<_> = (0..32i64)
            .map(|t| {
                let db = db.clone();
                tokio::spawn(async move {
                    for i in 0..20i64 {
                        let id = (i + t) % 10 + 1;
                        assert_eq!(db.get(id).await.unwrap().id, id);
                    }
                    assert!(db.get(11).await.unwrap_err().is_not_found());
                    let db2 = db.clone();
                    tokio::task::spawn_blocking(move || db2.get_blocking(t % 10 + 1))
                        .await
                        .unwrap()
                        .unwrap();
                    db.get_blocking(t % 10 + 1).unwrap()
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });

    // the server drops our connections: the pool reconnects instead of failing forever
    let Backend::Postgres(store) = &*db.inner else {
        unreachable!()
    };
    let before = store.connects();
    rt.block_on(async {
        let admin_config: tokio_postgres::Config = url.parse().unwrap();
        let (client, conn) = admin_config.connect(NoTls).await.unwrap();
        tokio::spawn(conn);
        client
            .execute(
                "select pg_terminate_backend(pid) from pg_stat_activity \
                 where application_name = $1 and pid <> pg_backend_pid()",
                &[&app],
            )
            .await
            .unwrap();
        // straight away: idle connections may not know yet that they are dead, so this
        // exercises the discard-and-retry-on-a-lost-connection path
        assert_all_found_async(&db).await;
    });
    assert!(store.connects() > before);
}

async fn assert_all_found_async(db: &MessageDb) {
    for id in MIN_ID..=MAX_ID {
        assert_eq!(db.get(id).await.unwrap(), Message::seed(id));
    }
    assert!(matches!(db.get(11).await, Err(StoreError::NotFound(11))));
}

#[test]
fn postgres_incompatible_existing_table_is_a_clear_error() {
    let Some(url) = postgres_url() else { return };
    let schema = format!("brisk_test_schema_{}", std::process::id());
    let rt = rt();
    let admin_config: tokio_postgres::Config = url.parse().unwrap();
    let admin = rt.block_on(async {
        let (client, conn) = admin_config.connect(NoTls).await.unwrap();
        tokio::spawn(conn);
        client
            .batch_execute(&format!(
                "drop schema if exists {schema} cascade; create schema {schema}; \
                 create table {schema}.message (id integer primary key, \
                 from_uid integer not null, to_uid integer not null, content text not null)"
            ))
            .await
            .unwrap();
        client
    });
    let sep = if url.contains('?') { '&' } else { '?' };
    let scoped = format!("{url}{sep}options=-c%20search_path%3D{schema}");
    let result = rt.block_on(MessageDb::open(&scoped, 1));
    rt.block_on(admin.batch_execute(&format!("drop schema {schema} cascade")))
        .unwrap();
    let err = result.unwrap_err();
    assert!(matches!(err, StoreError::SchemaMismatch { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("id is int4"), "{msg}");
    assert!(msg.contains("drop the table"), "{msg}");
}

#[test]
fn postgres_get_blocking_on_current_thread_runtime_is_an_error_not_a_deadlock() {
    let Some(url) = postgres_url() else { return };
    let rt = rt();
    let db = rt.block_on(MessageDb::open(&url, 1)).unwrap();
    let ct = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = ct.block_on(async { db.get_blocking(1) }).unwrap_err();
    assert!(matches!(err, StoreError::BlockingInRuntime { .. }), "{err}");
}
