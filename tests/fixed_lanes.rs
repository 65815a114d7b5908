//! Where a fixed set of connections gathers calls made together on several
//! threads. In a test binary of its own: lanes are numbered per process as
//! threads first call, and this test's two calling threads must be the
//! first two.

mod common;

use std::sync::Arc;
use std::time::Duration;

use brisk::{Client, Connect, Dispatch, QueueKind, Server};
use common::*;

/// Calls made together on two threads gather on two connections, one per
/// thread, not on one that both threads' calls would lock in turn. The
/// client's runtime is not running while the threads make their calls, so
/// no write is taken in between: each thread's burst is "made together".
#[test]
fn fixed_connections_gather_each_calling_threads_calls_on_its_own_connection() {
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let peers = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let server = server_rt.block_on(async {
        Server::builder()
            .config(server_config(Dispatch::Direct, QueueKind::Transfer))
            .service(CalcServer::new(Arc::new(CalcImpl::default())))
            .interceptor(PeerLog(peers.clone()))
            .start()
            .await
            .unwrap()
    });
    let addr = server.local_addr().to_string();
    let calc = client_rt.block_on(async {
        CalcClient::new(
            Client::builder()
                .addr(addr)
                .connect(Connect::Fixed {
                    connections: 4,
                    coalesce_calls: 16,
                })
                .build()
                .await
                .expect("client connects"),
        )
    });
    // Each thread starts 8 calls (one poll queues them all) and hands them back.
    let start_burst = |calc: CalcClient| {
        std::thread::spawn(move || {
            let calls = (0..8i64).map(move |i| {
                let calc = calc.clone();
                async move { (i, calc.add(i, 1).await) }
            });
            let mut burst = Box::pin(futures::future::join_all(calls));
            let waker = futures::task::noop_waker();
            let polled = std::future::Future::poll(
                burst.as_mut(),
                &mut std::task::Context::from_waker(&waker),
            );
            assert!(polled.is_pending(), "nothing can be answered yet");
            burst
        })
        .join()
        .expect("calling thread")
    };
    let first = start_burst(calc.clone());
    let second = start_burst(calc.clone());
    client_rt.block_on(async {
        let answers = tokio::time::timeout(Duration::from_secs(30), async {
            let mut all = first.await;
            all.extend(second.await);
            all
        })
        .await
        .expect("answered in time");
        assert_eq!(answers.len(), 16);
        for (i, answer) in answers {
            assert_eq!(answer.unwrap(), i + 1, "every call answered correctly");
        }
    });
    assert_eq!(calls_per_connection(&peers.lock()), vec![8, 8]);
    drop(calc);
    server_rt.block_on(server.shutdown());
}
