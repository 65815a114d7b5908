//! A lone caller's answers are busy-polled for by its connection's reader:
//! against a server on a thread of its own (as in another process) that
//! answers at once, on a runtime with two workers, the poll reads answers
//! from the socket itself (the worker blocked in `epoll_wait` is not the one
//! polling); with the poll off, none; every call is answered either way.

#[path = "support/blocking_echo.rs"]
mod blocking_echo;

use std::sync::Arc;
use std::time::Duration;

use blocking_echo::{echo_call, echo_server};
use rpc_transport::{ClientTransport, Connection};

/// A connection to a fresh echo server, polling for answers up to
/// `busy_poll`, after `calls` calls made one after another.
async fn after_lone_calls(busy_poll: Duration, calls: u64) -> Arc<Connection> {
    let (addr, _) = echo_server(1);
    let transport = ClientTransport {
        busy_poll,
        ..ClientTransport::default()
    };
    let conn = rpc_transport::connect(&addr, &transport).await.unwrap();
    for i in 0..calls {
        echo_call(&conn, i).await;
    }
    conn
}

/// Makes `calls` calls one after another; returns the answers the reader's
/// poll read itself.
async fn lone_calls(busy_poll: Duration, calls: u64) -> u64 {
    let conn = after_lone_calls(busy_poll, calls).await;
    let polled = conn.busy_poll_reads();
    conn.close("done");
    polled
}

/// What `attempt` counts on the first of up to five fresh connections that
/// counts any: which runtime thread a reader lands on, and whether a loaded
/// machine kept a caller in rhythm, can leave one connection at zero.
async fn on_one_of_five<F: std::future::Future<Output = u64>>(
    mut attempt: impl FnMut() -> F,
) -> u64 {
    let mut counted = 0;
    for _ in 0..5 {
        counted = attempt().await;
        if counted > 0 {
            break;
        }
    }
    counted
}

/// On one worker the yield polls the I/O driver itself, so the answers come
/// through the usual read; they all come, poll or not.
#[tokio::test]
async fn a_lone_callers_answers_all_come_with_the_poll_on_or_off() {
    lone_calls(Duration::from_millis(1), 500).await;
    assert_eq!(lone_calls(Duration::ZERO, 200).await, 0, "off: never");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_callers_answers_are_read_by_the_poll_on_two_workers() {
    // The longest poll allowed: a loaded test machine still answers within it.
    // Which worker the reader's task lands on is the runtime's choice: on
    // the one that holds the I/O driver, its yield polls the driver and the
    // answers come through the usual read (as on one worker), which happens
    // to a whole run now and then. So a few fresh connections, one of which
    // must show the poll reading for itself.
    let polled = on_one_of_five(|| lone_calls(Duration::from_millis(1), 500)).await;
    assert!(polled > 0, "the poll read answers from the socket itself");
    assert_eq!(lone_calls(Duration::ZERO, 200).await, 0, "off: never");
}

/// Makes `calls` calls one after another, then waits past the poll's limit;
/// returns the turns on which the reader's poll offered its thread's core,
/// checking that no more come once the limit has passed.
async fn core_offers(busy_poll: Duration, calls: u64) -> u64 {
    let conn = after_lone_calls(busy_poll, calls).await;
    tokio::time::sleep(busy_poll + Duration::from_millis(20)).await;
    let offers = conn.busy_poll_core_offers();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        conn.busy_poll_core_offers(),
        offers,
        "no offers once the limit has passed"
    );
    conn.close("done");
    offers
}

/// Between a lone caller's calls (none in flight) the poll offers its
/// thread's core at each turn, until the limit ends the poll; with the poll
/// off, never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_call_in_flight_the_poll_offers_its_core_until_its_limit() {
    // The wait after the last answer is polled for once the caller is in
    // rhythm (its answers came within the limit): a loaded machine may
    // miss that on one connection, not on five.
    let offers = on_one_of_five(|| core_offers(Duration::from_millis(1), 50)).await;
    assert!(
        offers > 0,
        "the wait after the last answer offered the core"
    );
    assert_eq!(core_offers(Duration::ZERO, 50).await, 0, "off: never");
}
