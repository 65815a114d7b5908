//! [`Inbox`]: one flow's items that arrived and were not read yet.
//!
//! The connection's reader pushes items and the end; the flow's
//! [`RawStreaming`](super::RawStreaming) pops them. The inbox also keeps the
//! receiver's side of the credit account, which is what bounds it:
//!
//! - `allowed`: items the sender may still send (granted − received). An
//!   item arriving at 0 is a protocol violation and ends the flow.
//! - `unacked`: items read since credit was last given back; once half a
//!   window, they are given back in one grant.
//!
//! So `buffered + unacked + allowed = window` at all times, and `buffered ≤
//! window`.

use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::{Code, Status};

/// The receiving state of one flow, shared by the connection's reader and
/// the flow's reader.
#[derive(Debug)]
pub struct Inbox {
    state: Mutex<State>,
    window: u32,
}

#[derive(Debug)]
struct State {
    items: VecDeque<Bytes>,
    /// How the flow ended, once it has (`Err` is reported once, then `None`).
    end: Option<Result<(), Status>>,
    end_read: bool,
    allowed: u32,
    unacked: u32,
    /// The reader went away: arrivals are dropped.
    gone: bool,
    waker: Option<Waker>,
}

/// What one poll of the inbox gave.
#[derive(Debug)]
pub(super) struct Next {
    /// The next item, the end (`None`), or the flow's error.
    pub item: Option<Result<Bytes, Status>>,
    /// Credit to give back to the sender now (0: none yet).
    pub grant: u32,
}

impl Inbox {
    /// An empty inbox whose sender is granted `window` items (at least 1).
    pub fn new(window: u32) -> Inbox {
        let window = window.max(1);
        Inbox {
            state: Mutex::new(State {
                items: VecDeque::new(),
                end: None,
                end_read: false,
                allowed: window,
                unacked: 0,
                gone: false,
                waker: None,
            }),
            window,
        }
    }

    /// The window: what the sender is granted when the flow opens.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// An item arrived. `Err` when it was past the sender's credit: the flow
    /// is ended with that error (the caller tells the sender).
    pub fn push(&self, item: Bytes) -> Result<(), Status> {
        let waker = {
            let mut st = self.state.lock();
            if st.gone || st.end.is_some() {
                return Ok(());
            }
            if st.allowed == 0 {
                let overrun = Status::new(
                    Code::BadRequest,
                    format!(
                        "the peer sent past its credit (window {} items)",
                        self.window
                    ),
                );
                st.items.clear();
                st.end = Some(Err(overrun.clone()));
                let waker = st.waker.take();
                drop(st);
                if let Some(w) = waker {
                    w.wake();
                }
                return Err(overrun);
            }
            st.allowed -= 1;
            st.items.push_back(item);
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// The flow ended (the first end stays): the reader gets the items
    /// already here, then `end`.
    pub fn finish(&self, end: Result<(), Status>) {
        let waker = {
            let mut st = self.state.lock();
            if st.end.is_some() {
                return;
            }
            st.end = Some(end);
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Whether the flow has ended (items may still wait to be read).
    pub fn is_finished(&self) -> bool {
        self.state.lock().end.is_some()
    }

    /// Items that arrived and were not read yet.
    pub fn buffered(&self) -> usize {
        self.state.lock().items.len()
    }

    /// The reader went away: what is buffered is dropped and so is what
    /// arrives later.
    pub(super) fn close(&self) {
        let mut st = self.state.lock();
        st.gone = true;
        st.items.clear();
        st.waker = None;
    }

    pub(super) fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Next> {
        let mut st = self.state.lock();
        if let Some(item) = st.items.pop_front() {
            st.unacked += 1;
            let grant = if st.unacked >= (self.window / 2).max(1) && st.end.is_none() {
                let n = std::mem::take(&mut st.unacked);
                st.allowed += n;
                n
            } else {
                0
            };
            return Poll::Ready(Next {
                item: Some(Ok(item)),
                grant,
            });
        }
        match &st.end {
            Some(end) => {
                let item = match end {
                    Err(status) if !st.end_read => Some(Err(status.clone())),
                    _ => None,
                };
                st.end_read = true;
                Poll::Ready(Next { item, grant: 0 })
            }
            None => {
                if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    st.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}
