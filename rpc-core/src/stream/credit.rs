//! [`Credit`]: how many more items a flow's sender may send, and
//! [`StreamSink`]: the sender itself.
//!
//! Credit is a `tokio` semaphore whose permits are items: the receiver's
//! grants add permits, every item sent takes one for good. Stopping the
//! credit (the receiver went away, the stream ended, the connection closed)
//! closes the semaphore, which wakes a waiting sender with the reason.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore};

use super::StreamPeer;
use crate::{Code, Status};

/// The credit of one flow's sender.
#[derive(Debug)]
pub struct Credit {
    permits: Semaphore,
    stopped: Mutex<Option<Status>>,
    on_stop: Notify,
}

impl Default for Credit {
    fn default() -> Self {
        Credit {
            permits: Semaphore::new(0),
            stopped: Mutex::new(None),
            on_stop: Notify::new(),
        }
    }
}

impl Credit {
    /// No credit yet: the receiver grants its window when the stream opens.
    pub fn new() -> Arc<Credit> {
        Arc::new(Credit::default())
    }

    /// The receiver granted `n` more items. Credit past the semaphore's
    /// maximum is ignored (no honest receiver grants that much).
    pub fn grant(&self, n: u32) {
        let room = Semaphore::MAX_PERMITS - self.permits.available_permits();
        self.permits.add_permits((n as usize).min(room));
    }

    /// Items the sender may still send without waiting.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// No more items may be sent; a waiting sender gets `why`. The first
    /// reason stays.
    pub fn stop(&self, why: Status) {
        {
            let mut stopped = self.stopped.lock();
            if stopped.is_none() {
                *stopped = Some(why);
            }
        }
        self.permits.close();
        self.on_stop.notify_waiters();
    }

    /// Completes once the credit is stopped (at once if it is).
    pub async fn stopped(&self) {
        loop {
            let notified = self.on_stop.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopped(&self) -> bool {
        self.permits.is_closed()
    }

    /// Takes one item of credit, waiting for it; the stop reason once stopped.
    pub async fn take(&self) -> Result<(), Status> {
        // Credit is usually there: take it without building the waiting
        // future (the semaphore's queue is only needed to wait).
        match self.permits.try_acquire() {
            Ok(permit) => {
                permit.forget();
                return Ok(());
            }
            Err(tokio::sync::TryAcquireError::Closed) => return Err(self.stop_reason()),
            Err(tokio::sync::TryAcquireError::NoPermits) => {}
        }
        match self.permits.acquire().await {
            Ok(permit) => {
                permit.forget();
                Ok(())
            }
            Err(_) => Err(self.stop_reason()),
        }
    }

    fn stop_reason(&self) -> Status {
        self.stopped
            .lock()
            .clone()
            .unwrap_or_else(|| Status::new(Code::Cancelled, "the stream ended"))
    }
}

/// The sending end of one flow: items go out one unit of credit each.
///
/// A handler gets one for its server stream; a client, for its client
/// stream. A client's sink dropped before [`finish`](Self::finish) ends its
/// flow cleanly (like closing a channel); a server's is finished by the
/// server with the handler's outcome.
///
/// ```
/// # use rpc_core::stream::{Credit, StreamPeer, StreamSink};
/// # use rpc_core::Status;
/// # use bytes::Bytes;
/// # struct Nowhere;
/// # impl StreamPeer for Nowhere {
/// #     fn send_item(&self, _: u64, _: u8, _: Bytes) -> Result<(), Status> { Ok(()) }
/// #     fn send_end(&self, _: u64, _: u8, _: Result<(), Status>) {}
/// #     fn send_credit(&self, _: u64, _: u32) {}
/// #     fn receiver_gone(&self, _: u64, _: bool) {}
/// # }
/// # async fn run() -> Result<(), Status> {
/// let credit = Credit::new();
/// credit.grant(2); // what the receiver would do
/// let mut sink = StreamSink::new(7, 1, credit.clone(), std::sync::Arc::new(Nowhere));
/// sink.send(Bytes::from_static(b"a")).await?;
/// sink.send(Bytes::from_static(b"b")).await?;
/// assert_eq!(credit.available(), 0, "a third item would wait for credit");
/// sink.finish(Ok(()));
/// # Ok(()) }
/// ```
pub struct StreamSink {
    id: u64,
    serializer: u8,
    credit: Arc<Credit>,
    peer: Arc<dyn StreamPeer>,
    end_on_drop: bool,
    ended: bool,
}

impl std::fmt::Debug for StreamSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSink")
            .field("id", &self.id)
            .field("credit", &self.credit.available())
            .finish_non_exhaustive()
    }
}

impl StreamSink {
    /// The sender of stream `id`'s items through `peer`, within `credit`.
    /// Dropping it sends nothing (the server's way: it ends the flow itself).
    pub fn new(id: u64, serializer: u8, credit: Arc<Credit>, peer: Arc<dyn StreamPeer>) -> Self {
        StreamSink {
            id,
            serializer,
            credit,
            peer,
            end_on_drop: false,
            ended: false,
        }
    }

    /// Dropped unfinished, the sink ends its flow cleanly (the client's way).
    pub fn end_on_drop(mut self) -> Self {
        self.end_on_drop = true;
        self
    }

    /// Sends one serialized item, first waiting for a unit of credit. Fails
    /// once the flow cannot go on: the receiver stopped reading or went
    /// away, the stream ended, the connection closed.
    pub async fn send(&mut self, body: Bytes) -> Result<(), Status> {
        self.credit.take().await?;
        self.peer.send_item(self.id, self.serializer, body)
    }

    /// Completes once nothing more can be sent: the receiver stopped
    /// reading, the call ended, the connection closed.
    pub async fn closed(&self) {
        self.credit.stopped().await
    }

    /// Whether an item sent now would go without waiting.
    pub fn has_credit(&self) -> bool {
        self.credit.available() > 0
    }

    /// Ends the flow: `Ok` cleanly, or with an error the receiver reads
    /// after the items sent before it.
    pub fn finish(mut self, end: Result<(), Status>) {
        self.ended = true;
        if !self.credit.is_stopped() {
            self.peer.send_end(self.id, self.serializer, end);
        }
    }

    /// The stream's id on its connection.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for StreamSink {
    fn drop(&mut self) {
        if self.end_on_drop && !self.ended && !self.credit.is_stopped() {
            self.peer.send_end(self.id, self.serializer, Ok(()));
        }
    }
}
