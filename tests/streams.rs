//! Streaming calls on loopback: server, client and bidirectional streams
//! with every connect type and dispatch mode; credit keeping a slow reader's
//! producer within its window; cancellation from either side; an error
//! mid-stream; deadlines; a connection dropped mid-stream; a hundred streams
//! beside unary calls on one connection with every item accounted for; and
//! the refusals (a unary call of a streaming method and the reverse, too
//! many streams).
//!
//! Timings are bounds with a margin for a loaded 2-core machine, never
//! speed targets.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brisk::rpc_core::stream::StreamConfig;
use brisk::{
    CallOptions, Client, Code, Connect, Context, Dispatch, RpcError, Server, ServerConfig,
    ServerHandle, Status, Stream, Streaming,
};
use common::{
    bounded, dispatch_variants, on_a_runtime_of_its_own, server_config, until_the_poll_reads,
    wait_until,
};
use futures::StreamExt;

/// One item: its sequence number and a payload.
type Item = (u64, Vec<u8>);

/// A feed of numbered items.
#[brisk::service]
pub trait Feed {
    /// Items `from..from + count` of `size` bytes; with `fail_after`, the
    /// stream fails `NotFound` after that many items.
    async fn numbers(
        &self,
        cx: &Context,
        from: u64,
        count: u64,
        size: usize,
        fail_after: Option<u64>,
    ) -> Result<impl Stream<Item = Result<Item, Status>> + Send, Status>;
    /// Items of `size` bytes until the caller goes away (counted in the probe).
    async fn endless(
        &self,
        cx: &Context,
        size: usize,
    ) -> Result<impl Stream<Item = Result<Item, Status>> + Send, Status>;
    /// Sums the caller's numbers; with `first`, reads only that many and
    /// stops reading.
    async fn sum(
        &self,
        cx: &Context,
        first: Option<u64>,
        numbers: Streaming<u64>,
    ) -> Result<u64, Status>;
    /// Echoes each of the caller's items back, tagged.
    async fn echo(
        &self,
        cx: &Context,
        tag: String,
        items: Streaming<Item>,
    ) -> Result<impl Stream<Item = Result<(String, Item), Status>> + Send, Status>;
    /// `count` numbers, one every `every_ms`, sent by a task of their own
    /// through a channel: a watch forwarding events from elsewhere.
    async fn ticks(
        &self,
        cx: &Context,
        count: u64,
        every_ms: u64,
    ) -> Result<impl Stream<Item = Result<u64, Status>> + Send, Status>;
    /// A unary call beside the streams.
    async fn add(&self, cx: &Context, a: u64, b: u64) -> Result<u64, Status>;
}

/// What the handlers did.
#[derive(Default)]
struct Probe {
    /// Items the `endless` streams produced.
    produced: AtomicU64,
    /// `endless` streams whose producer was dropped (the call ended).
    dropped: AtomicUsize,
    /// Items the `sum` handlers read.
    summed: AtomicU64,
}

/// Counts a producer's drop.
struct DropCount(Arc<Probe>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Clone, Default)]
struct FeedImpl(Arc<Probe>);

impl Feed for FeedImpl {
    async fn numbers(
        &self,
        _cx: &Context,
        from: u64,
        count: u64,
        size: usize,
        fail_after: Option<u64>,
    ) -> Result<impl Stream<Item = Result<Item, Status>> + Send, Status> {
        Ok(
            futures::stream::iter(0..count).map(move |i| match fail_after {
                Some(n) if i >= n => {
                    Err(Status::new(Code::NotFound, format!("no item {}", from + i)))
                }
                _ => Ok((from + i, vec![i as u8; size])),
            }),
        )
    }

    async fn endless(
        &self,
        _cx: &Context,
        size: usize,
    ) -> Result<impl Stream<Item = Result<Item, Status>> + Send, Status> {
        let probe = self.0.clone();
        let guard = DropCount(probe.clone());
        Ok(futures::stream::unfold((0u64, guard), move |(i, guard)| {
            let probe = probe.clone();
            async move {
                probe.produced.fetch_add(1, Ordering::SeqCst);
                // Yield now and then: a producer that never waits still
                // shares its runtime thread.
                if i % 64 == 0 {
                    tokio::task::yield_now().await;
                }
                Some((Ok((i, vec![7; size])), (i + 1, guard)))
            }
        }))
    }

    async fn sum(
        &self,
        _cx: &Context,
        first: Option<u64>,
        mut numbers: Streaming<u64>,
    ) -> Result<u64, Status> {
        let mut total = 0;
        let mut read = 0;
        while let Some(n) = numbers.message().await? {
            total += n;
            read += 1;
            self.0.summed.fetch_add(1, Ordering::SeqCst);
            if first.is_some_and(|first| read >= first) {
                break;
            }
        }
        Ok(total)
    }

    async fn echo(
        &self,
        _cx: &Context,
        tag: String,
        items: Streaming<Item>,
    ) -> Result<impl Stream<Item = Result<(String, Item), Status>> + Send, Status> {
        Ok(items.map(move |item| item.map(|item| (tag.clone(), item))))
    }

    async fn ticks(
        &self,
        _cx: &Context,
        count: u64,
        every_ms: u64,
    ) -> Result<impl Stream<Item = Result<u64, Status>> + Send, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            for i in 0..count {
                tokio::time::sleep(Duration::from_millis(every_ms)).await;
                if tx.send(Ok(i)).await.is_err() {
                    break;
                }
            }
        });
        Ok(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        }))
    }

    async fn add(&self, _cx: &Context, a: u64, b: u64) -> Result<u64, Status> {
        Ok(a + b)
    }
}

async fn start(config: ServerConfig) -> (ServerHandle, Arc<Probe>) {
    let imp = FeedImpl::default();
    let probe = imp.0.clone();
    let server = Server::builder()
        .config(config)
        .service(FeedServer::new(imp))
        .start()
        .await
        .expect("server starts");
    (server, probe)
}

async fn client_of(server: &ServerHandle, connect: Connect, window: u32) -> FeedClient {
    client_at(server.local_addr().to_string(), connect, window).await
}

async fn client_at(addr: String, connect: Connect, window: u32) -> FeedClient {
    let config = brisk::ClientConfig {
        addr,
        connect,
        stream_window: window,
        ..brisk::ClientConfig::default()
    };
    FeedClient::new(
        Client::builder()
            .config(config)
            .build()
            .await
            .expect("client"),
    )
}

/// Asserts that the one `endless` stream's producer was dropped and the
/// call counted cancelled.
async fn endless_was_cancelled(server: &ServerHandle, probe: &Probe, name: &str) {
    let dropped = || probe.dropped.load(Ordering::SeqCst) == 1;
    assert!(
        wait_until(Duration::from_secs(5), dropped).await,
        "{name}: the server dropped the producer"
    );
    let counted = || {
        server
            .metrics_text()
            .contains("brisk_calls_cancelled_total{service=\"Feed\",method=\"endless\"} 1")
    };
    assert!(
        wait_until(Duration::from_secs(5), counted).await,
        "{name}: counted cancelled:\n{}",
        server.metrics_text()
    );
}

/// A client with one connection (`fixed`, 1): every call and stream share it.
async fn one_connection(server: &ServerHandle, window: u32) -> FeedClient {
    let connect = Connect::Fixed {
        connections: 1,
        coalesce_calls: 1,
    };
    client_of(server, connect, window).await
}

fn connect_types() -> Vec<Connect> {
    vec![
        Connect::Reused,
        Connect::Fixed {
            connections: 2,
            coalesce_calls: 1,
        },
        Connect::pooled(1, 4),
    ]
}

#[tokio::test]
async fn every_kind_of_stream_keeps_order_on_every_connect_type_and_dispatch() {
    bounded(60, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, _probe) = start(server_config(dispatch, queue)).await;
            for connect in connect_types() {
                let feed = client_of(&server, connect.clone(), 16).await;
                let what = format!("{name} / {connect:?}");
                // Server stream.
                let items: Vec<Item> = feed
                    .numbers(100, 300, 64, None)
                    .await
                    .unwrap()
                    .map(|item| item.expect("an item"))
                    .collect()
                    .await;
                assert_eq!(items.len(), 300, "{what}");
                assert!(
                    items
                        .iter()
                        .enumerate()
                        .all(|(i, (n, p))| *n == 100 + i as u64 && p.len() == 64),
                    "{what}: in order"
                );
                // Client stream.
                let total = feed
                    .sum(None, futures::stream::iter(1..=1000u64))
                    .await
                    .unwrap();
                assert_eq!(total, 500_500, "{what}");
                // Bidirectional.
                let sent: Vec<Item> = (0..200).map(|i| (i, vec![1; 10])).collect();
                let back: Vec<(String, Item)> = feed
                    .echo("t".into(), futures::stream::iter(sent.clone()))
                    .await
                    .unwrap()
                    .map(|item| item.expect("an item"))
                    .collect()
                    .await;
                assert_eq!(back.len(), 200, "{what}");
                assert!(
                    back.iter()
                        .zip(&sent)
                        .all(|((t, got), want)| t == "t" && got == want),
                    "{what}: echoed in order"
                );
                feed.client().close();
            }
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_slow_reader_keeps_the_producer_within_its_window() {
    bounded(30, async {
        let (server, probe) = start(server_config(Dispatch::Direct, Default::default())).await;
        let window = 8;
        let feed = client_of(&server, Connect::Reused, window).await;
        let mut items = feed.endless(1024).await.unwrap();
        let mut read = 0u64;
        let mut worst = 0u64;
        for _ in 0..60 {
            let (n, payload) = items.message().await.unwrap().expect("endless");
            assert_eq!((n, payload.len()), (read, 1024), "in order");
            read += 1;
            // Let the producer run as far ahead as it can.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let ahead = probe.produced.load(Ordering::SeqCst) - read;
            worst = worst.max(ahead);
            assert!(
                items.queued() <= window as usize,
                "the client holds at most a window"
            );
        }
        // The producer is at most a window ahead of the reader, plus the one
        // item it made and waits to send.
        assert!(
            worst <= window as u64 + 1,
            "the producer ran {worst} items ahead of a window of {window}"
        );
        assert!(worst >= window as u64 / 2, "it did run ahead: {worst}");
        drop(items);
        assert!(
            wait_until(Duration::from_secs(2), || probe
                .dropped
                .load(Ordering::SeqCst)
                == 1)
            .await
        );
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_error_mid_stream_comes_after_the_items_sent_before_it() {
    bounded(20, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, _probe) = start(server_config(dispatch, queue)).await;
            let feed = client_of(&server, Connect::Reused, 64).await;
            let mut items = feed.numbers(0, 100, 8, Some(5)).await.unwrap();
            for i in 0..5 {
                let (n, _) = items.message().await.unwrap().expect("an item");
                assert_eq!(n, i, "{name}");
            }
            let err = items.message().await.unwrap_err();
            assert_eq!(err.code(), Code::NotFound, "{name}: {err}");
            assert_eq!(err.message(), "no item 5");
            assert!(
                items.message().await.unwrap().is_none(),
                "{name}: then the end"
            );
            // The connection goes on.
            assert_eq!(feed.add(2, 3).await.unwrap(), 5);
            feed.client().close();
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_handler_and_the_connection_goes_on() {
    bounded(20, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, probe) = start(server_config(dispatch, queue)).await;
            let feed = client_of(&server, Connect::Reused, 16).await;
            let mut items = feed.endless(100).await.unwrap();
            for _ in 0..3 {
                items.message().await.unwrap().expect("an item");
            }
            drop(items);
            endless_was_cancelled(&server, &probe, name).await;
            assert_eq!(feed.add(1, 1).await.unwrap(), 2, "{name}");
            feed.client().close();
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_handler_that_stops_reading_stops_the_callers_items() {
    bounded(20, async {
        let (server, probe) = start(server_config(Dispatch::Direct, Default::default())).await;
        let feed = client_of(&server, Connect::Reused, 16).await;
        // An endless source: only the server's end stops it.
        let total = feed
            .sum(Some(10), futures::stream::iter(1u64..))
            .await
            .unwrap();
        assert_eq!(total, 55);
        assert_eq!(probe.summed.load(Ordering::SeqCst), 10);
        // With the sender: the server's end closes it.
        let (mut sender, mut answers) = feed
            .client()
            .bidi::<_, u64, u64>("Feed", "sum", &(Some(2u64),), &CallOptions::default())
            .await
            .unwrap();
        sender.send(&5).await.unwrap();
        sender.send(&6).await.unwrap();
        assert_eq!(answers.message().await.unwrap(), Some(11));
        assert_eq!(answers.message().await.unwrap(), None);
        tokio::time::timeout(Duration::from_secs(2), sender.closed())
            .await
            .expect("the sender learns the call is over");
        let err = sender.send(&7).await.unwrap_err();
        assert_eq!(err.code(), Code::Cancelled, "{err}");
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_deadline_ends_the_stream_with_deadline_exceeded() {
    bounded(20, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, probe) = start(server_config(dispatch, queue)).await;
            let feed = client_of(&server, Connect::Reused, 16).await;
            let options = CallOptions {
                timeout: Some(Duration::from_millis(200)),
                ..CallOptions::default()
            };
            let started = Instant::now();
            let mut items = feed.with_options(options).endless(10).await.unwrap();
            let err = loop {
                match items.message().await {
                    Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(1)).await,
                    Ok(None) => panic!("{name}: ended without an error"),
                    Err(e) => break e,
                }
            };
            let took = started.elapsed();
            assert_eq!(err.code(), Code::DeadlineExceeded, "{name}: {err}");
            assert!(
                took >= Duration::from_millis(190) && took < Duration::from_millis(200 + 1000),
                "{name}: ended after {took:?}"
            );
            assert!(
                wait_until(Duration::from_secs(2), || probe
                    .dropped
                    .load(Ordering::SeqCst)
                    == 1)
                .await,
                "{name}: the producer is dropped at the deadline"
            );
            feed.client().close();
            server.shutdown().await;
        }
    })
    .await;
}

/// A TCP relay from a fresh loopback port to `target`, and the handle that
/// cuts every connection through it (both sides see the connection break).
async fn relay(target: std::net::SocketAddr) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        let mut pipes = tokio::task::JoinSet::new();
        while let Ok((mut inbound, _)) = listener.accept().await {
            let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                continue;
            };
            pipes.spawn(async move {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (addr, task)
}

#[tokio::test]
async fn a_broken_connection_ends_the_streams_on_both_sides() {
    bounded(20, async {
        // The connection breaks under a stream: both sides end it.
        let (server, probe) = start(server_config(Dispatch::Direct, Default::default())).await;
        let (addr, cut) = relay(server.local_addr()).await;
        let feed = FeedClient::new(Client::builder().addr(addr).build().await.unwrap());
        let mut items = feed.endless(10).await.unwrap();
        items.message().await.unwrap().expect("an item");
        cut.abort();
        assert!(
            wait_until(Duration::from_secs(2), || probe
                .dropped
                .load(Ordering::SeqCst)
                == 1)
            .await,
            "the server ends the stream of a closed connection"
        );
        // The stream of a closed client ends with an error, not silently.
        let mut failed = false;
        for _ in 0..1000 {
            match items.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(e) => {
                    failed = true;
                    assert_ne!(e.code(), Code::Ok);
                    break;
                }
            }
        }
        assert!(
            failed,
            "a stream cut off by its connection ends with an error"
        );
        server.shutdown().await;

        // The server goes away: the client's stream ends with an error.
        let mut config = server_config(Dispatch::Direct, Default::default());
        config.shutdown_grace = Duration::from_millis(50);
        let (server, _probe) = start(config).await;
        let feed = client_of(&server, Connect::Reused, 16).await;
        let mut items = feed.endless(10).await.unwrap();
        items.message().await.unwrap().expect("an item");
        server.shutdown().await;
        let mut last = None;
        for _ in 0..10_000 {
            match items.message().await {
                Ok(Some(_)) => continue,
                other => {
                    last = Some(other);
                    break;
                }
            }
        }
        let err = last.expect("the stream ended").expect_err("with an error");
        assert_ne!(err.code(), Code::Ok, "{err}");
    })
    .await;
}

#[tokio::test]
async fn a_hundred_streams_and_unary_calls_share_one_connection() {
    bounded(60, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, _probe) = start(server_config(dispatch, queue)).await;
            let feed = one_connection(&server, 16).await;
            let streams = (0..100u64).map(|s| {
                let feed = feed.clone();
                tokio::spawn(async move {
                    let items = feed.numbers(s * 1000, 200, 256, None).await?;
                    let got: Vec<u64> = items
                        .map(|item| item.map(|(n, _)| n))
                        .collect::<Vec<_>>()
                        .await
                        .into_iter()
                        .collect::<Result<_, Status>>()
                        .map_err(|s| s.into_error("Feed", "numbers"))?;
                    Ok::<_, RpcError>((s, got))
                })
            });
            let streams: Vec<_> = streams.collect();
            let calls: Vec<_> = (0..500u64)
                .map(|i| {
                    let feed = feed.clone();
                    tokio::spawn(async move { (i, feed.add(i, 1).await) })
                })
                .collect();
            for call in calls {
                let (i, answer) = call.await.unwrap();
                assert_eq!(answer.unwrap(), i + 1, "{name}: unary call {i}");
            }
            for stream in streams {
                let (s, got) = stream.await.unwrap().unwrap();
                let want: Vec<u64> = (s * 1000..s * 1000 + 200).collect();
                assert_eq!(got, want, "{name}: stream {s}, every item in order");
            }
            assert_eq!(feed.client().open_connections(), 1, "{name}");
            feed.client().close();
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unary_calls_are_answered_beside_a_stream_that_never_waits() {
    bounded(30, async {
        let (server, _probe) = start(server_config(Dispatch::Direct, Default::default())).await;
        let feed = one_connection(&server, 64).await;
        // Items small enough that decoding them (in this debug build, on the
        // test's own threads) is not what a unary answer waits for.
        let mut items = feed.endless(1024).await.unwrap();
        let streamed = Arc::new(AtomicU64::new(0));
        let reader = tokio::spawn({
            let streamed = streamed.clone();
            async move {
                while streamed.load(Ordering::Relaxed) < 1_000_000 {
                    if items.message().await.is_err() {
                        break;
                    }
                    streamed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let mut worst = Duration::ZERO;
        let began = Instant::now();
        for i in 0..200 {
            let started = Instant::now();
            assert_eq!(feed.add(i, i).await.unwrap(), 2 * i);
            worst = worst.max(started.elapsed());
        }
        // A bound, not a speed target: a starved call would wait for the
        // whole stream.
        let took = began.elapsed();
        assert!(
            worst < Duration::from_secs(2),
            "a unary call waited {worst:?}"
        );
        reader.abort();
        let streamed = streamed.load(Ordering::Relaxed);
        eprintln!("200 unary calls in {took:?} (worst {worst:?}) beside {streamed} streamed items");
        assert!(streamed > 64, "the stream ran meanwhile: {streamed} items");
        feed.client().close();
        server.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_fed_by_other_tasks_arrive_whole_beside_unary_calls() {
    bounded(30, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, _probe) = start(server_config(dispatch, queue)).await;
            let feed = one_connection(&server, 2).await;
            // Each stream's items come from a task of the handler's own, on
            // a timer: the connection task that runs the stream is woken
            // from outside for each, window 2.
            let watches: Vec<_> = (0..10u64)
                .map(|w| {
                    let feed = feed.clone();
                    tokio::spawn(async move {
                        let ticks = feed.ticks(30 + w, 1).await?;
                        ticks
                            .collect::<Vec<_>>()
                            .await
                            .into_iter()
                            .collect::<Result<Vec<u64>, Status>>()
                            .map_err(|s| s.into_error("Feed", "ticks"))
                    })
                })
                .collect();
            for i in 0..100 {
                assert_eq!(feed.add(i, 2).await.unwrap(), i + 2, "{name}: call {i}");
            }
            for (w, watch) in watches.into_iter().enumerate() {
                let got = watch.await.unwrap().unwrap();
                let want: Vec<u64> = (0..30 + w as u64).collect();
                assert_eq!(got, want, "{name}: watch {w}, every tick in order");
            }
            feed.client().close();
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_streams_take_no_task_of_their_own() {
    bounded(30, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, _probe) = start(server_config(dispatch, queue)).await;
            let feed = one_connection(&server, 4).await;
            assert_eq!(feed.add(1, 1).await.unwrap(), 2, "{name}");
            let metrics = tokio::runtime::Handle::current().metrics();
            let before = metrics.num_alive_tasks();
            // Fifty producers that wait for credit, each with its item in
            // hand: every stream open and its handler started.
            let mut open = Vec::new();
            for _ in 0..50 {
                let mut items = feed.endless(16).await.unwrap();
                assert!(items.message().await.unwrap().is_some(), "{name}");
                open.push(items);
            }
            let during = metrics.num_alive_tasks();
            assert!(
                during < before + 10,
                "{name}: {before} tasks before, {during} with 50 streams open"
            );
            // And the connection still answers beside them.
            assert_eq!(feed.add(2, 2).await.unwrap(), 4, "{name}");
            drop(open);
            feed.client().close();
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_second_open_of_an_open_stream_id_is_refused_and_the_first_goes_on() {
    use brisk::codec::{FrameCodec, FrameKind, OutFrame};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_util::codec::Decoder;

    bounded(20, async {
        let (server, probe) = start(server_config(Dispatch::Direct, Default::default())).await;
        let mut raw = tokio::net::TcpStream::connect(server.local_addr())
            .await
            .unwrap();
        let msgpack = brisk::SerializerKind::MsgPack;
        let frame = |id: u64, method: &'static str, body| {
            let mut open = OutFrame::stream_open(msgpack.id(), "Feed", method, body);
            open.request_id = id;
            open
        };
        let endless = brisk::codec::BodyCodec::encode_body(msgpack, &(16usize,)).unwrap();
        let mut out = bytes::BytesMut::new();
        // No credit is ever granted: the first stream's producer waits.
        frame(7, "endless", endless.clone())
            .encode(&mut out, 1 << 20)
            .unwrap();
        frame(7, "endless", endless)
            .encode(&mut out, 1 << 20)
            .unwrap();
        let add = brisk::codec::BodyCodec::encode_body(msgpack, &(2u64, 3u64)).unwrap();
        let mut call = OutFrame::request(8, msgpack.id(), "Feed", "add", add);
        call.request_id = 8;
        call.encode(&mut out, 1 << 20).unwrap();
        raw.write_all(&out).await.unwrap();

        let mut codec = FrameCodec::new(1 << 20);
        let mut buf = bytes::BytesMut::new();
        let (mut refused, mut answered) = (None, None);
        loop {
            while let Some(frame) = codec.decode(&mut buf).unwrap() {
                match (frame.header.request_id, frame.header.kind) {
                    (7, FrameKind::StreamError) => {
                        refused = frame.stream_end().err().map(|status| status.code())
                    }
                    (8, FrameKind::Response) => answered = Some(frame.code()),
                    _ => {}
                }
            }
            if refused.is_some() && answered.is_some() {
                break;
            }
            let n = tokio::time::timeout(Duration::from_secs(5), raw.read_buf(&mut buf))
                .await
                .expect("an answer within 5 s")
                .unwrap();
            assert!(n > 0, "the server closed the connection");
        }
        assert_eq!(
            refused,
            Some(Code::BadRequest),
            "the second open is refused"
        );
        assert_eq!(answered, Some(Code::Ok), "the connection goes on");
        // The first stream is still open: closing the connection ends it,
        // and its producer is dropped.
        drop(raw);
        // (counted as cancelled, as a stream its caller cancels is).
        endless_was_cancelled(&server, &probe, "closed mid-stream").await;
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_wrong_kind_of_call_and_too_many_streams_are_refused() {
    bounded(20, async {
        let mut config = server_config(Dispatch::Direct, Default::default());
        config.streams = StreamConfig {
            max_per_connection: 2,
            ..StreamConfig::default()
        };
        let (server, _probe) = start(config).await;
        let feed = client_of(&server, Connect::Reused, 16).await;
        let client = feed.client();
        // A streaming method called as a unary one.
        let err = client
            .call::<_, u64>(
                "Feed",
                "numbers",
                &(0u64, 1u64, 1usize, None::<u64>),
                &CallOptions::default(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, RpcError::Status(s) if s.code() == Code::Unimplemented),
            "{err:?}"
        );
        // A unary method opened as a stream.
        let mut items: Streaming<u64> = client
            .server_stream("Feed", "add", &(1u64, 2u64), &CallOptions::default())
            .await
            .unwrap();
        let err = items.message().await.unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented, "{err}");
        // Unknown methods are refused as streams too.
        let mut items: Streaming<u64> = client
            .server_stream("Feed", "nope", &(), &CallOptions::default())
            .await
            .unwrap();
        assert_eq!(
            items.message().await.unwrap_err().code(),
            Code::UnknownMethod
        );
        // Two streams open at most; the third is busy, and a slot frees up.
        let a = feed.endless(1).await.unwrap();
        let _b = feed.endless(1).await.unwrap();
        let mut c = feed.endless(1).await.unwrap();
        let err = match c.message().await {
            Ok(Some(_)) => panic!("a third stream ran"),
            Ok(None) => panic!("ended without an error"),
            Err(e) => e,
        };
        assert_eq!(err.code(), Code::ServerBusy, "{err}");
        drop(a);
        let mut ok = false;
        for _ in 0..100 {
            let mut d = feed.endless(1).await.unwrap();
            if d.message().await.is_ok_and(|m| m.is_some()) {
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(ok, "a stream that ended frees its slot");
        server.shutdown().await;
    })
    .await;
}

/// Sends one HTTP/1.1 POST on a fresh connection; the response's status,
/// content type and body (read in full, or only its first `limit` bytes —
/// then the connection is dropped mid-answer).
async fn http_post(
    addr: std::net::SocketAddr,
    path: &str,
    body: &'static str,
    limit: Option<usize>,
) -> (u16, String, String) {
    use http_body_util::BodyExt;
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    let conn = tokio::spawn(conn);
    let req = hyper::Request::post(path)
        .header("host", "localhost")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            body.as_bytes(),
        )))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let mut body = resp.into_body();
    let mut got = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            got.extend_from_slice(&data);
        }
        if limit.is_some_and(|limit| got.len() >= limit) {
            drop(body);
            conn.abort();
            break;
        }
    }
    (status, content_type, String::from_utf8(got).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_streams_are_newline_delimited_json_over_http() {
    bounded(20, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let config = server_config(dispatch, queue).with_http_addr("127.0.0.1:0");
            let (server, probe) = start(config).await;
            let http = server.http_addr().unwrap();
            let (status, content_type, body) =
                http_post(http, "/Feed/numbers", "[5, 3, 2, null]", None).await;
            assert_eq!(
                (status, content_type.as_str()),
                (200, "application/x-ndjson"),
                "{name}"
            );
            assert_eq!(body, "[5,[0,0]]\n[6,[1,1]]\n[7,[2,2]]\n", "{name}");
            // An error mid-stream is the last line.
            let (status, _, body) = http_post(http, "/Feed/numbers", "[0, 10, 1, 2]", None).await;
            assert_eq!(status, 200);
            let lines: Vec<&str> = body.lines().collect();
            assert_eq!(lines.len(), 3, "{name}: {body}");
            assert_eq!(lines[..2], ["[0,[0]]", "[1,[1]]"]);
            let last: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
            assert_eq!(last["error"], "not_found", "{name}: {body}");
            // Client and bidirectional streams are the binary protocol's.
            let (status, _, body) = http_post(http, "/Feed/sum", "[null]", None).await;
            assert_eq!(status, 501, "{name}: {body}");
            assert!(body.contains("binary protocol"), "{body}");
            let (status, _, _) = http_post(http, "/Feed/echo", "[\"t\"]", None).await;
            assert_eq!(status, 501);
            // A client that goes away mid-stream cancels it.
            let (status, _, body) = http_post(http, "/Feed/endless", "[4]", Some(64)).await;
            assert_eq!(status, 200);
            assert!(body.starts_with("[0,[7,7,7,7]]\n"), "{body}");
            assert!(
                wait_until(Duration::from_secs(2), || probe
                    .dropped
                    .load(Ordering::SeqCst)
                    == 1)
                .await,
                "{name}: the producer is dropped when the HTTP client goes away"
            );
            server.shutdown().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_cancelled_parent_ends_the_stream_and_its_handler() {
    bounded(20, async {
        let (server, probe) = start(server_config(Dispatch::Direct, Default::default())).await;
        let feed = client_of(&server, Connect::Reused, 16).await;
        let parent = brisk::rpc_core::CancelSignal::new();
        let options = CallOptions {
            cancel: Some(parent.clone()),
            ..CallOptions::default()
        };
        let mut items = feed
            .with_options(options.clone())
            .endless(10)
            .await
            .unwrap();
        items.message().await.unwrap().expect("an item");
        parent.cancel();
        let err = loop {
            match items.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("ended without an error"),
                Err(e) => break e,
            }
        };
        assert_eq!(err.code(), Code::Cancelled, "{err}");
        assert!(
            wait_until(Duration::from_secs(2), || probe
                .dropped
                .load(Ordering::SeqCst)
                == 1)
            .await,
            "the server dropped the handler"
        );
        // Already cancelled: the stream is not even opened.
        let err = feed.with_options(options).endless(10).await.unwrap_err();
        assert!(matches!(err, RpcError::Cancelled(_)), "{err:?}");
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn interceptors_guard_streams_on_both_sides() {
    bounded(20, async {
        let server = Server::builder()
            .config(server_config(Dispatch::Direct, Default::default()))
            .interceptor(brisk::TokenAuth::new(["s3cret"]))
            .service(FeedServer::new(FeedImpl::default()))
            .start()
            .await
            .unwrap();
        let addr = server.local_addr().to_string();
        // Without the token the server refuses the stream before its handler runs.
        let anonymous =
            FeedClient::new(Client::builder().addr(addr.clone()).build().await.unwrap());
        let mut items = anonymous.numbers(0, 3, 1, None).await.unwrap();
        assert_eq!(
            items.message().await.unwrap_err().code(),
            Code::Unauthenticated
        );
        // The client's interceptor adds its token to the stream's open.
        let trusted = FeedClient::new(
            Client::builder()
                .addr(addr)
                .interceptor(brisk::BearerToken::new("s3cret"))
                .build()
                .await
                .unwrap(),
        );
        let got: Vec<_> = trusted
            .numbers(0, 3, 1, None)
            .await
            .unwrap()
            .collect()
            .await;
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|item| item.is_ok()));
        let total = trusted
            .sum(None, futures::stream::iter([1u64, 2, 3]))
            .await
            .unwrap();
        assert_eq!(total, 6);
        server.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_of_large_items_is_written_out_whole() {
    bounded(60, async {
        for (name, dispatch, queue) in dispatch_variants() {
            let (server, _probe) = start(server_config(dispatch, queue)).await;
            // 64 items of 100 KiB in flight: several times what the server's
            // outbox takes in one turn, so most wait in its stream backlog.
            let feed = client_of(&server, Connect::Reused, 64).await;
            let options = CallOptions {
                timeout: Some(Duration::from_secs(30)),
                ..CallOptions::default()
            };
            let items: Vec<Result<Item, Status>> = feed
                .with_options(options)
                .numbers(0, 40, 100 * 1024, None)
                .await
                .unwrap()
                .collect()
                .await;
            assert_eq!(items.len(), 40, "{name}");
            for (i, item) in items.into_iter().enumerate() {
                let (n, payload) = item.unwrap_or_else(|e| panic!("{name}: item {i}: {e}"));
                assert_eq!((n, payload.len()), (i as u64, 100 * 1024), "{name}");
            }
            feed.client().close();
            server.shutdown().await;
        }
    })
    .await;
}

/// A ping-pong caller (one item, then its echo, then the next) is polled for
/// by its connection in both dispatch modes — a stream runs on its
/// connection either way — and every item comes back in order. On a
/// one-worker runtime (this test's) and, below, with two.
#[tokio::test]
async fn a_ping_pong_caller_is_busy_polled_for_in_both_dispatch_modes() {
    ping_pong_busy_polled().await;
}

/// With two runtime workers the poll reads the socket itself (`read_now`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_pong_caller_is_busy_polled_for_on_a_runtime_with_two_workers() {
    ping_pong_busy_polled().await;
}

async fn ping_pong_busy_polled() {
    bounded(120, async {
        for (name, dispatch, queue) in dispatch_variants() {
            until_the_poll_reads(name, true, || async move {
                let mut config = server_config(dispatch, queue);
                // The longest poll allowed: a loaded test machine still comes
                // back within it.
                config.busy_poll = Duration::from_millis(1);
                let (server, _probe) = start(config).await;
                let addr = server.local_addr().to_string();
                // The caller on a runtime of its own, as in another process:
                // the server's workers see only its socket.
                on_a_runtime_of_its_own(async move {
                    let connect = Connect::Fixed {
                        connections: 1,
                        coalesce_calls: 1,
                    };
                    let feed = client_at(addr, connect, 16).await;
                    let (items, rx) = futures::channel::mpsc::unbounded::<Item>();
                    let mut back = feed.echo("p".into(), rx).await.unwrap();
                    for i in 0..300u64 {
                        items.unbounded_send((i, vec![7; 32])).unwrap();
                        let (tag, (n, _)) = back.next().await.expect("an echo").expect("an item");
                        assert_eq!((tag.as_str(), n), ("p", i), "{name}");
                    }
                    drop(items);
                    assert!(back.next().await.is_none(), "{name}: the stream ends");
                    feed.client().close();
                })
                .await;
                let stats = server.stats();
                assert!(
                    stats.busy_polled_frames > 0,
                    "{name}: the caller's items were polled for"
                );
                server.shutdown().await;
                stats.busy_poll_reads
            })
            .await;
        }
    })
    .await;
}
