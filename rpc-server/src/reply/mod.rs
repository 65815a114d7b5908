//! Everything about answers: how a call's outcome becomes an answer frame, how
//! the worker pool hands a connection its answers, and how a connection writes
//! them.
//!
//! - [`frame`]: [`ReplyTo`] (whom an answer goes to), the answer frame of an outcome, and encoding it so that an
//!   answer too large for the frame limit still reaches its caller as an error.
//! - [`pool_answers`]: [`PoolAnswers`], one connection's buffer of answers
//!   encoded by pool threads — which they write themselves while the waiting
//!   connection lends them its plain socket — and [`AnswerSlot`], one pooled
//!   call's duty to answer into it.
//! - [`pool_reads`]: the socket's read side lent to a worker too, for a lone
//!   caller: the worker reads the next request and starts it through the
//!   connection's [`TakeRequest`].
//! - [`outbox`]: [`Outbox`], the connection's socket writer, which coalesces a
//!   batch of answers into one `write` and holds large requests' frame budget
//!   until their answers are out.
//!
//! This module knows frames, buffers and sockets, not calls: it imports
//! nothing from the modules that run calls (`dispatch`) or serve connections
//! (`connection`), which both depend on it.

mod frame;
mod outbox;
mod pool_answers;
mod pool_reads;

pub(crate) use frame::ReplyTo;
pub(crate) use outbox::{high_water_mark, Outbox};
pub(crate) use pool_answers::{pool_news, AnswerSlot, Lender, PoolAnswers};
pub(crate) use pool_reads::TakeRequest;
