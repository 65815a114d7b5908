//! A lone caller on `fixed` connections (the default connect type): its
//! calls stay on one connection, whose reader busy-polls for the answers,
//! instead of taking turns over every connection, where no reader would see
//! two answers in a row. Against a blocking server on a thread of its own
//! (as in another process), on a runtime with two workers (the worker in
//! `epoll_wait` is not the one polling). Strict round-robin
//! (`coalesce_calls = 1`) still spreads the same calls over both
//! connections; every call is answered either way.

#[path = "../../rpc-transport/tests/support/blocking_echo.rs"]
mod blocking_echo;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use blocking_echo::{echo_call, echo_server};
use rpc_client::connections::FixedConnections;
use rpc_client::ClientConfig;

/// `calls` calls one after another over two fixed connections taking
/// `coalesce_calls` calls per write; returns the requests each server
/// connection carried and the answers the client's readers polled for.
async fn lone_calls(coalesce_calls: usize, calls: u64) -> (Vec<u64>, u64) {
    let (addr, per_connection) = echo_server(2);
    let config = ClientConfig {
        addr,
        // The longest poll allowed: a loaded test machine still answers
        // within it.
        busy_poll: Duration::from_millis(1),
        ..ClientConfig::default()
    };
    let transport = config.client_transport();
    let fixed = FixedConnections::new(&config, &transport, 2, coalesce_calls)
        .await
        .unwrap();
    let mut used = Vec::new();
    for i in 0..calls {
        let conn = fixed.acquire().await.unwrap();
        echo_call(&conn, i).await;
        if !used.iter().any(|c| Arc::ptr_eq(c, &conn)) {
            used.push(conn);
        }
    }
    let polled = used.iter().map(|c| c.busy_polled_frames()).sum();
    fixed.close();
    let carried = per_connection
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    (carried, polled)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_caller_stays_on_one_fixed_connection_and_is_polled_for() {
    let default_cap = rpc_client::Connect::DEFAULT_COALESCE_CALLS;
    let (carried, polled) = lone_calls(default_cap, 500).await;
    assert_eq!(carried, vec![500, 0], "every call on the first connection");
    assert!(polled > 0, "its reader polled for the answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_round_robin_spreads_a_lone_callers_calls() {
    let (carried, _) = lone_calls(1, 200).await;
    assert_eq!(carried, vec![100, 100], "the calls take turns");
}
